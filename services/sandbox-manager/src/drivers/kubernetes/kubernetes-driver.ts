/**
 * The `kubernetes` adapter of the sandbox driver port: a Pod per instance (see `manifests.ts`),
 * commands and files through the exec API (see `exec.ts`).
 *
 * Stop deletes the pod and keeps everything else (the record ConfigMap, Secrets, NetworkPolicy,
 * volume claims); start creates the pod again from the spec. A pod's own filesystem goes with it:
 * on Kubernetes only files on named volumes survive stop/start (the container driver keeps the
 * container, so it keeps them all).
 *
 * Warm-pool members are instances like any other; a claim writes the `berth.dev/claimed-by` label
 * at the resourceVersion it read, so of concurrent claims exactly one wins (the others get 409).
 */
import { randomUUID } from 'node:crypto';
import { CoreV1Api, Exec, NetworkingV1Api, PatchStrategy, setHeaderOptions, type V1ConfigMap, type V1Pod } from '@kubernetes/client-node';
import {
  callOptions,
  coreKinds,
  createOrReplace,
  describeApiError,
  findObject,
  formatMs,
  isStatus,
  kubeConfigOf,
  labelValue,
  networkPolicyKind,
  poll,
  PollTimeoutError,
  removeObject,
  shortHash,
  type KindApi,
  type KubernetesCluster,
  type Named,
} from '@berth/kube';
import {
  fileTooLarge,
  ImagePullError,
  InstanceError,
  InstanceNotFoundError,
  MAX_FILE_BYTES,
  type ExecSpec,
  type ImageInfo,
  type ImageSource,
  type InstanceSpec,
  type InstanceState,
  type SandboxDriver,
  type SandboxProcess,
} from '../driver.js';
import { EXEC_WRAPPER, ExecStream, fileError, KILL_SCRIPT, PodProcess, READ_SCRIPT, runToEnd, WRITE_SCRIPT, type ExecTarget } from './exec.js';
import {
  buildManifests,
  buildPullNetworkPolicy,
  COMPONENT_IMAGE_PULL,
  INSTANCE_SELECTOR,
  LABELS,
  proxySecretName,
  pullSecretName,
  SANDBOX_CONTAINER,
  type ManifestOptions,
} from './manifests.js';

export interface KubernetesDriverOptions extends Omit<ManifestOptions, 'namespace'> {
  cluster: KubernetesCluster;
  /**
   * Namespace of every sandbox's objects (it must exist).
   * @default 'berth-sandboxes'
   */
  namespace?: string;
  /**
   * How long a pod may take to become ready (pull, schedule, start).
   * @default 120_000
   */
  readyTimeoutMs?: number;
  /**
   * How often a starting or stopping pod is checked.
   * @default 500
   */
  pollIntervalMs?: number;
}

/** Waiting reasons that mean the image cannot be had. */
const PULL_FAILURES = new Set(['ErrImagePull', 'ImagePullBackOff', 'InvalidImageName', 'ErrImageNeverPull', 'RegistryUnavailable']);
/** Waiting reasons that will not fix themselves. */
const START_FAILURES = new Set(['CreateContainerConfigError', 'CreateContainerError', 'RunContainerError', 'CrashLoopBackOff']);

function podReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

/** Why a pod ended by itself, for people; undefined while it has not. */
function podFailure(pod: V1Pod): string | undefined {
  for (const status of pod.status?.containerStatuses ?? []) {
    const terminated = status.state?.terminated;
    if (!terminated) continue;
    if (terminated.reason === 'OOMKilled') {
      const limit = pod.spec?.containers.find((c) => c.name === status.name)?.resources?.limits?.['memory'];
      return `out of memory${limit ? ` (limit ${limit})` : ''}`;
    }
    return `${status.name === SANDBOX_CONTAINER ? '' : `${status.name} container `}exited with code ${terminated.exitCode}${terminated.message ? `: ${terminated.message}` : ''}`;
  }
  if (pod.status?.phase === 'Failed') return pod.status.message ?? pod.status.reason ?? 'the pod failed';
  return undefined;
}

/** Where a pod that is not ready stands, for the error of a timeout. */
function podProgress(pod: V1Pod | undefined): string {
  if (!pod) return 'no pod';
  const unscheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False');
  if (unscheduled) return `not scheduled: ${unscheduled.message ?? unscheduled.reason ?? 'no node fits'}`;
  const waiting = pod.status?.containerStatuses?.map((s) => s.state?.waiting).find((w) => w?.reason);
  if (waiting) return `${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}`;
  return `phase ${pod.status?.phase ?? 'unknown'}`;
}

export class KubernetesDriver implements SandboxDriver {
  readonly kind = 'kubernetes' as const;
  readonly namespace: string;
  readonly #core: CoreV1Api;
  readonly #net: NetworkingV1Api;
  readonly #exec: Exec;
  readonly #manifests: ManifestOptions;
  readonly #readyTimeoutMs: number;
  readonly #pollIntervalMs: number;
  readonly #closed = new AbortController();
  /** What `pullImage` learnt of each image (its user decides runAsNonRoot). */
  readonly #images = new Map<string, ImageInfo>();
  readonly #server: string;
  /** Exec connections open now, closed with the driver. */
  readonly #streams = new Set<ExecStream>();

  constructor(options: KubernetesDriverOptions) {
    const { cluster, namespace, readyTimeoutMs, pollIntervalMs, ...manifests } = options;
    this.namespace = namespace ?? 'berth-sandboxes';
    this.#manifests = { ...manifests, namespace: this.namespace };
    this.#readyTimeoutMs = readyTimeoutMs ?? 120_000;
    this.#pollIntervalMs = pollIntervalMs ?? 500;
    const kc = kubeConfigOf(cluster);
    this.#server = kc.getCurrentCluster()?.server ?? 'the cluster';
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#net = kc.makeApiClient(NetworkingV1Api);
    this.#exec = new Exec(kc);
  }

  async unavailableReason(): Promise<string | undefined> {
    try {
      await this.#core.listNamespacedPod({ namespace: this.namespace, labelSelector: INSTANCE_SELECTOR, limit: 1 }, this.#call());
      return undefined;
    } catch (error) {
      if (isStatus(error, 403))
        return `the Kubernetes credentials may not manage pods in namespace ${this.namespace} (${describeApiError(error)}): grant the sandbox manager a Role for pods, pods/exec, secrets, configmaps, persistentvolumeclaims and networkpolicies there`;
      return `the Kubernetes API at ${this.#server} cannot be used for sandboxes: ${describeApiError(error)}`;
    }
  }

  /**
   * Pulls the image onto a node by running it in a short-lived pod (the cluster pulls, not us), and
   * reads what it runs as by exec: the user's uid (`id -u`), its working directory, and the digest
   * the node resolved. The pod has no network (a NetworkPolicy denying all) and a deadline.
   * `insecureRegistries` is the nodes' container runtime configuration on Kubernetes, not ours.
   */
  /** What the pull of the spec's image found: this driver's own record, else the one the spec carries. */
  #imageOf(spec: InstanceSpec): ImageInfo | undefined {
    const pulled = this.#images.get(spec.image.reference);
    if (pulled) return pulled;
    return spec.image.user !== undefined ? { user: spec.image.user, workingDir: '' } : undefined;
  }

  async pullImage(image: ImageSource): Promise<ImageInfo> {
    const instance = `berth-pull-${shortHash(`${image.reference}\n${randomUUID()}`, 12)}`;
    const spec: InstanceSpec = {
      instance,
      tenantId: 'berth',
      image,
      resources: {},
      volumes: [],
      egress: { rules: [], allowList: [], denyList: [], privateAllow: [] },
      env: {},
      labels: {},
    };
    const { pod, pullSecret } = buildManifests(spec, this.#manifests);
    // Not an instance: `list` must not find it.
    pod.metadata!.labels![LABELS.component] = COMPONENT_IMAGE_PULL;
    // Only the image's own container, and no more time than a pull takes.
    pod.spec = { ...pod.spec!, containers: [pod.spec!.containers[0]!], volumes: [], activeDeadlineSeconds: Math.ceil(this.#readyTimeoutMs / 1000) + 60 };
    pod.spec.containers[0]!.volumeMounts = [];
    pod.spec.containers[0]!.env = [];
    const kinds = this.#kinds();
    try {
      const isolation = buildPullNetworkPolicy(this.namespace);
      await createOrReplace(kinds.networkPolicy, isolation, { existing: await findObject(kinds.networkPolicy, isolation.metadata!.name!) });
      if (pullSecret) await createOrReplace(kinds.secret, pullSecret, { existing: undefined });
      await kinds.pod.create(pod);
      const ready = await this.#waitReady(instance, image.reference);
      const { stdout } = await runToEnd(this.#target(instance), ['/bin/sh', '-c', 'id -u 2>/dev/null || echo 0; pwd']);
      const [uid = '', cwd = '/'] = stdout.toString('utf8').trim().split('\n');
      const imageId = ready.status?.containerStatuses?.[0]?.imageID ?? '';
      const digest = /(sha256:[0-9a-f]{64})/.exec(imageId)?.[1];
      const info: ImageInfo = { user: uid === '0' ? '' : uid, workingDir: cwd === '/' ? '' : cwd, ...(digest ? { digest } : {}) };
      this.#images.set(image.reference, info);
      return info;
    } catch (error) {
      if (error instanceof ImagePullError || error instanceof InstanceError) throw error;
      throw new InstanceError(`could not pull ${image.reference}: ${describeApiError(error)}`, { cause: error });
    } finally {
      // The pull's outcome is what the caller needs; a pod left behind ends at its deadline.
      await removeObject(kinds.pod, instance).catch(() => undefined);
      if (pullSecret) await removeObject(kinds.secret, pullSecretName(instance)).catch(() => undefined);
    }
  }

  async create(spec: InstanceSpec): Promise<void> {
    const kinds = this.#kinds();
    const manifests = buildManifests(spec, this.#manifests, this.#imageOf(spec));
    try {
      for (const claim of manifests.volumeClaims) {
        // A volume outlives instances: an existing claim is the tenant's data, used as it is.
        if (!(await findObject(kinds.claim, claim.metadata!.name!))) {
          // Two instances creating one volume at once: the second finds it made.
          await kinds.claim.create(claim).catch((error: unknown) => {
            if (!isStatus(error, 409)) throw error;
          });
        }
      }
      await kinds.configMap.create(manifests.record);
    } catch (error) {
      if (isStatus(error, 409)) throw new InstanceError(`sandbox instance ${spec.instance} already exists`, { cause: error });
      throw new InstanceError(`could not create sandbox instance ${spec.instance}: ${describeApiError(error)}`, { cause: error });
    }
    try {
      await this.#startPod(spec);
    } catch (error) {
      // A failed create leaves nothing behind (its volumes excepted). Should the clean-up fail too,
      // the create's error is still the one to report; `list` finds the leftover for the reaper.
      await this.remove(spec.instance).catch(() => undefined);
      throw error;
    }
  }

  async stop(instance: string): Promise<void> {
    await this.#record(instance);
    await this.#deletePod(instance, 'stop');
  }

  async start(instance: string, spec: InstanceSpec): Promise<void> {
    const record = await this.#record(instance);
    const pod = await findObject(this.#kinds().pod, instance);
    if (pod && podReady(pod)) return;
    if (pod) await this.stop(instance);
    const kinds = this.#kinds();
    const manifests = buildManifests(spec, this.#manifests, this.#imageOf(spec));
    await createOrReplace(kinds.configMap, manifests.record, { existing: record });
    await this.#startPod(spec);
  }

  async remove(instance: string): Promise<void> {
    const kinds = this.#kinds();
    try {
      // The pod first: what it mounts goes after it.
      await this.#deletePod(instance, 'remove');
      await removeObject(kinds.networkPolicy, instance);
      await removeObject(kinds.secret, proxySecretName(instance));
      await removeObject(kinds.secret, pullSecretName(instance));
      await removeObject(kinds.configMap, instance);
    } catch (error) {
      if (error instanceof InstanceError) throw error;
      throw new InstanceError(`could not remove sandbox instance ${instance}: ${describeApiError(error)}`, { cause: error });
    }
  }

  async removeVolume(volume: string): Promise<void> {
    try {
      await removeObject(this.#kinds().claim, volume);
    } catch (error) {
      throw new InstanceError(`could not remove volume ${volume}: ${describeApiError(error)}`, { cause: error });
    }
  }

  async inspect(instance: string): Promise<InstanceState> {
    const kinds = this.#kinds();
    const pod = await findObject(kinds.pod, instance);
    if (pod) {
      const failure = podFailure(pod);
      return failure ? { state: 'failed', reason: failure } : { state: 'running' };
    }
    return (await findObject(kinds.configMap, instance)) ? { state: 'stopped' } : { state: 'missing' };
  }

  async list(labels: Record<string, string> = {}): Promise<string[]> {
    const kinds = this.#kinds();
    const names = new Set<string>();
    const selector = [INSTANCE_SELECTOR, ...Object.entries(labels).map(([key, value]) => `${key}=${labelValue(value)}`)].join(',');
    // Records and pods both: a pod whose record was lost is still ours to find.
    for (const object of [...(await kinds.configMap.list(selector)), ...(await kinds.pod.list(selector))]) {
      const name = object.metadata?.labels?.[LABELS.instance];
      if (name) names.add(name);
    }
    return [...names].sort();
  }

  async claim(instance: string, sandboxId: string): Promise<boolean> {
    const pod = await findObject(this.#kinds().pod, instance);
    if (!pod || !podReady(pod) || podFailure(pod)) return false;
    const claimant = labelValue(sandboxId);
    const owner = pod.metadata?.labels?.[LABELS.claimedBy];
    if (owner !== undefined) return owner === claimant;
    try {
      await this.#core.patchNamespacedPod(
        {
          name: instance,
          namespace: this.namespace,
          // The resourceVersion is a precondition: a claim that read an older pod loses with 409.
          body: { metadata: { resourceVersion: pod.metadata!.resourceVersion, labels: { [LABELS.claimedBy]: claimant } } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch, this.#call()),
      );
      return true;
    } catch (error) {
      if (isStatus(error, 409) || isStatus(error, 404)) return false;
      throw new InstanceError(`could not claim sandbox instance ${instance}: ${describeApiError(error)}`, { cause: error });
    }
  }

  async exec(instance: string, spec: ExecSpec): Promise<SandboxProcess> {
    const env = Object.entries(spec.env).map(([name, value]) => `${name}=${value}`);
    const argv = ['/bin/sh', '-c', EXEC_WRAPPER, 'berth-exec', spec.shell, spec.cwd ?? '', spec.command, ...env];
    const stream = await this.#inInstance(instance, () => ExecStream.open(this.#target(instance), argv));
    this.#streams.add(stream);
    const forget = () => this.#streams.delete(stream);
    stream.exitCode.then(forget, forget);
    return PodProcess.start(stream, async (pid) => {
      await runToEnd(this.#target(instance), ['/bin/sh', '-c', KILL_SCRIPT, 'berth-kill', String(pid)]);
    });
  }

  async writeFile(instance: string, path: string, data: Buffer): Promise<void> {
    const result = await this.#inInstance(instance, () =>
      runToEnd(this.#target(instance), ['/bin/sh', '-c', WRITE_SCRIPT, 'berth-write', path], { stdin: data }),
    );
    if (result.exitCode !== 0) throw fileError('write', path, result.exitCode, result.stderr);
  }

  async readFile(instance: string, path: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    const maxBytes = options.maxBytes ?? MAX_FILE_BYTES;
    const result = await this.#inInstance(instance, () =>
      // The file's bytes and whatever the sandbox's `cat` says on stderr, which is at most a line.
      runToEnd(this.#target(instance), ['/bin/sh', '-c', READ_SCRIPT, 'berth-read', path], { maxOutputBytes: maxBytes + 64 * 1024 }),
    );
    if (result.overflowed || result.stdout.length > maxBytes) {
      throw fileTooLarge(path, maxBytes);
    }
    if (result.exitCode !== 0) throw fileError('read', path, result.exitCode, result.stderr);
    return result.stdout;
  }

  async close(): Promise<void> {
    // Sandboxes are the cluster's: they run on; our waits stop and our exec connections close
    // (their commands lose stdin and their `exited` rejects).
    this.#closed.abort(new InstanceError('the kubernetes sandbox driver is closed'));
    for (const stream of this.#streams) stream.close();
  }

  /** Applies the instance's Secrets and NetworkPolicy, creates its pod and waits until it is ready. */
  async #startPod(spec: InstanceSpec): Promise<void> {
    const kinds = this.#kinds();
    const manifests = buildManifests(spec, this.#manifests, this.#imageOf(spec));
    try {
      const apply = async <T extends Named>(kind: KindApi<T>, body: T) =>
        createOrReplace(kind, body, { existing: await findObject(kind, body.metadata!.name!) });
      await apply(kinds.secret, manifests.proxySecret);
      if (manifests.pullSecret) await apply(kinds.secret, manifests.pullSecret);
      else await removeObject(kinds.secret, pullSecretName(spec.instance));
      await apply(kinds.networkPolicy, manifests.networkPolicy);
      await kinds.pod.create(manifests.pod);
    } catch (error) {
      throw new InstanceError(`could not start sandbox instance ${spec.instance}: ${describeApiError(error)}`, { cause: error });
    }
    await this.#waitReady(spec.instance, spec.image.reference);
  }

  /** Polls the pod until it is Ready; ImagePullError or InstanceError with the kubelet's words otherwise. */
  async #waitReady(instance: string, image: string): Promise<V1Pod> {
    let last: V1Pod | undefined;
    try {
      return await poll(
        async () => {
          const pod = await findObject(this.#kinds().pod, instance);
          last = pod;
          if (!pod) throw new InstanceError(`the pod of sandbox instance ${instance} was deleted while it started`);
          if (podReady(pod)) return pod;
          const failure = podFailure(pod);
          if (failure) throw new InstanceError(`sandbox instance ${instance} did not start: ${failure}`);
          for (const status of pod.status?.containerStatuses ?? []) {
            const waiting = status.state?.waiting;
            if (!waiting?.reason) continue;
            const said = `${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}`;
            if (PULL_FAILURES.has(waiting.reason)) {
              throw new ImagePullError(`could not pull image ${status.name === SANDBOX_CONTAINER ? image : status.image}: ${said}`);
            }
            if (START_FAILURES.has(waiting.reason)) throw new InstanceError(`sandbox instance ${instance} did not start: ${status.name} container ${said}`);
          }
          return undefined;
        },
        { timeoutMs: this.#readyTimeoutMs, intervalMs: this.#pollIntervalMs, signal: this.#closed.signal, what: `sandbox instance ${instance} becoming ready` },
      );
    } catch (error) {
      if (error instanceof PollTimeoutError)
        throw new InstanceError(`sandbox instance ${instance} did not become ready within ${formatMs(this.#readyTimeoutMs)} (${podProgress(last)})`, {
          cause: error,
        });
      if (error instanceof ImagePullError || error instanceof InstanceError) throw error;
      throw new InstanceError(`sandbox instance ${instance}: ${describeApiError(error)}`, { cause: error });
    }
  }

  /**
   * Deletes the pod and waits until it is gone (its containers have ended), so that a pod of the
   * same name can be created next: `start` after `stop`, `create` after `remove`.
   */
  async #deletePod(instance: string, action: 'stop' | 'remove'): Promise<void> {
    const pods = this.#kinds().pod;
    try {
      if (!(await removeObject(pods, instance))) return;
      await poll(async () => ((await findObject(pods, instance)) ? undefined : true), {
        timeoutMs: 60_000,
        intervalMs: this.#pollIntervalMs,
        signal: this.#closed.signal,
        what: `the pod of sandbox instance ${instance} going away`,
      });
    } catch (error) {
      throw new InstanceError(`could not ${action} sandbox instance ${instance}: ${describeApiError(error)}`, { cause: error });
    }
  }

  /** The record of an instance that exists (running or stopped); InstanceNotFoundError otherwise. */
  async #record(instance: string): Promise<V1ConfigMap> {
    const record = await findObject(this.#kinds().configMap, instance);
    if (!record) throw new InstanceNotFoundError(instance);
    return record;
  }

  /** Runs `call` (an exec) and, when it fails, says whether the instance is stopped or missing. */
  async #inInstance<T>(instance: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof InstanceError)) throw error;
      const kinds = this.#kinds();
      if (await findObject(kinds.pod, instance).catch(() => true)) throw error;
      if (!(await findObject(kinds.configMap, instance).catch(() => true))) throw new InstanceNotFoundError(instance, { cause: error });
      throw new InstanceError(`sandbox instance ${instance} is stopped: start it first`, { cause: error });
    }
  }

  #target(instance: string): ExecTarget {
    return { exec: this.#exec, namespace: this.namespace, pod: instance, container: SANDBOX_CONTAINER };
  }

  #call() {
    return callOptions(this.#closed.signal);
  }

  #kinds() {
    const call = () => this.#call();
    const { pod, secret, configMap, persistentVolumeClaim: claim } = coreKinds(this.#core, this.namespace, call);
    return { pod, secret, configMap, claim, networkPolicy: networkPolicyKind(this.#net, this.namespace, call) };
  }
}
