/**
 * The `kubernetes` adapter of the deployer port: per deployment one Secret, one Deployment, one
 * ClusterIP Service (see `manifests.ts`) and, unless turned off, one NetworkPolicy
 * (`network-policy.ts`), created or replaced on every revision; a revision is deployed once its
 * rolling update has finished. A revision that fails puts the previous Deployment spec, Secret
 * and NetworkPolicy back, so the revision that served keeps serving.
 */
import {
  AppsV1Api,
  CoreV1Api,
  NetworkingV1Api,
  type V1Deployment,
  type V1NetworkPolicy,
  type V1Pod,
  type V1Secret,
  type V1Service,
} from '@kubernetes/client-node';
import {
  callOptions,
  coreKinds,
  createOrReplace,
  deploymentKind,
  describeApiError,
  findObject,
  formatMs,
  kubeConfigOf,
  networkPolicyKind,
  poll,
  PollTimeoutError,
  removeObject,
  sleep,
  writable,
  type KindApi,
  type KubernetesCluster,
  type Named,
} from '@berth/kube';
import { DeployFailedError, type DeployedRevision, type Deployer, type DeployLog, type RevisionSpec } from '../deployer.js';
import {
  ANNOTATIONS,
  buildManifests,
  CONTAINER_NAME,
  deploymentLabelSelector,
  revisionPodSelector,
  serviceUrl,
  TERMINATION_GRACE_SECONDS,
  UnrunnableRevisionError,
  type KubeRevisionSpec,
} from './manifests.js';
import { buildNetworkPolicy, describeEndpoint, resolveEndpoints, systemLookup, type AgentNetworkPolicy, type Lookup } from './network-policy.js';
import { describeProblem, podProblems, rolloutVerdict, type PodProblem } from './rollout.js';

export interface KubernetesDeployerOptions {
  /** The cluster: a loaded `KubeConfig` (in-cluster or a kubeconfig file), or an address and token. */
  cluster: KubernetesCluster;
  /**
   * Namespace of every deployment's objects (it must exist).
   * @default 'berth'
   */
  namespace?: string;
  /**
   * How long a rollout may take before the revision fails.
   * @default 600_000 (10 minutes)
   */
  rolloutTimeoutMs?: number;
  /**
   * How often the rollout is checked.
   * @default 2_000
   */
  pollIntervalMs?: number;
  /** Secrets for pulling private images, added to every pod. */
  imagePullSecrets?: string[];
  /** The agent server pods' service account. */
  serviceAccountName?: string;
  /**
   * The agent-server image (`BERTH_AGENT_SERVER_IMAGE`): runs revisions built from source, whose
   * project an init container fetches from the control plane. Unset: only image revisions run.
   */
  agentServerImage?: string;
  /**
   * What each deployment's pods may reach and be reached by, as a NetworkPolicy of their own.
   * Unset: no policy is made (for clusters whose network plugin enforces none, or whose operator
   * writes their own), and one made before is removed at the deployment's next deploy.
   */
  networkPolicy?: AgentNetworkPolicy;
  /**
   * Resolves the hosts of the agent server's DATABASE_URL and REDIS_URL for its NetworkPolicy.
   * @default the system resolver
   */
  lookup?: Lookup;
  /**
   * How long `remove` waits for a deleted deployment's pods to be gone before it removes their
   * NetworkPolicy (which contains them until then).
   * @default their termination grace period plus 30 s
   */
  podsGoneTimeoutMs?: number;
}

/** Lines of a failing pod's output copied into the deploy log. */
const LOG_TAIL_LINES = 20;
export class KubernetesDeployer implements Deployer {
  readonly name = 'kubernetes';
  /** Workloads are the cluster's: they run on while the control plane is away. */
  readonly revisionsSurviveClose = true;
  readonly namespace: string;
  readonly #core: CoreV1Api;
  readonly #apps: AppsV1Api;
  readonly #net: NetworkingV1Api;
  readonly #options: KubernetesDeployerOptions;
  readonly #rolloutTimeoutMs: number;
  readonly #pollIntervalMs: number;
  readonly #closed = new AbortController();

  constructor(options: KubernetesDeployerOptions) {
    this.#options = options;
    this.namespace = options.namespace ?? 'berth';
    this.#rolloutTimeoutMs = options.rolloutTimeoutMs ?? 600_000;
    this.#pollIntervalMs = options.pollIntervalMs ?? 2_000;
    const kc = kubeConfigOf(options.cluster);
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#apps = kc.makeApiClient(AppsV1Api);
    this.#net = kc.makeApiClient(NetworkingV1Api);
  }

  async deploy(spec: RevisionSpec, log: DeployLog, signal?: AbortSignal): Promise<DeployedRevision> {
    const aborted = signal ? AbortSignal.any([signal, this.#closed.signal]) : this.#closed.signal;
    aborted.throwIfAborted();
    if (spec.artifact.kind === 'directory' && !spec.artifact.archive) {
      const message =
        'this revision was built from source but the control plane keeps no archive of it for the cluster to fetch: ' +
        'set BERTH_S3_BUCKET (and BERTH_ARTIFACTS_URL) on the control plane and deploy again, or use source external_docker with an image_uri';
      log(message, 'error');
      throw new DeployFailedError(message);
    }
    const kubeSpec = spec as KubeRevisionSpec;
    let manifests: ReturnType<typeof buildManifests>;
    try {
      manifests = buildManifests(kubeSpec, {
        namespace: this.namespace,
        ...(this.#options.imagePullSecrets ? { imagePullSecrets: this.#options.imagePullSecrets } : {}),
        ...(this.#options.serviceAccountName ? { serviceAccountName: this.#options.serviceAccountName } : {}),
        ...(this.#options.agentServerImage ? { agentServerImage: this.#options.agentServerImage } : {}),
      });
    } catch (error) {
      if (!(error instanceof UnrunnableRevisionError)) throw error;
      log(error.message, 'error');
      throw new DeployFailedError(error.message, { cause: error });
    }
    const name = manifests.deployment.metadata!.name!;
    const kinds = this.#kinds(aborted);
    let previous: Previous | undefined;
    try {
      const what = kubeSpec.artifact.kind === 'image' ? `image ${kubeSpec.artifact.imageUri}` : `built from source, sha256 ${kubeSpec.artifact.archive.sha256}`;
      log(`deploying revision ${spec.revisionId} (${what}) as ${name} in namespace ${this.namespace}`);
      // What serves now, to put back if this revision fails.
      previous = {
        secret: await findObject(kinds.secret, name),
        deployment: await findObject(kinds.deployment, name),
        networkPolicy: await findObject(kinds.networkPolicy, name),
      };
      // The policy first: no pod of this revision runs uncontained, not even for a moment.
      await this.#applyNetworkPolicy(kinds.networkPolicy, spec, previous.networkPolicy, log);
      await this.#apply(kinds.secret, manifests.secret, previous.secret, log);
      const applied = await this.#apply(kinds.deployment, manifests.deployment, previous.deployment, log);
      await this.#apply(kinds.service, manifests.service, await findObject(kinds.service, name), log, (body, existing) => ({
        ...body,
        // The cluster IP is immutable once assigned.
        spec: { ...body.spec, clusterIP: existing.spec?.clusterIP, clusterIPs: existing.spec?.clusterIPs },
      }));
      await this.#waitForRollout(spec, name, applied.metadata?.generation ?? 1, log, aborted);
    } catch (error) {
      if (aborted.aborted) {
        // A newer revision replaces this one (or we are closing): it owns the objects now.
        log(`deploy of revision ${spec.revisionId} stopped: ${this.#closed.signal.aborted ? 'the deployer is closing' : 'aborted'}`, 'warn');
        throw aborted.reason;
      }
      const failure = error instanceof DeployFailedError ? error : new DeployFailedError(`kubernetes: ${describeApiError(error)}`, { cause: error });
      if (!(error instanceof DeployFailedError)) log(failure.message, 'error');
      if (previous) await this.#restore(spec.deploymentId, name, previous, log);
      throw failure;
    }
    const url = serviceUrl(manifests.service.metadata!.name!, this.namespace);
    log(`revision ${spec.revisionId} is deployed at ${url}`);
    return { revisionId: spec.revisionId, url };
  }

  async retire(_deploymentId: string, revisionId: string, log: DeployLog): Promise<void> {
    // Nothing to stop: the rolling update already replaced the revision's pods, after their grace period.
    log(`revision ${revisionId} was replaced by the rolling update`);
  }

  async remove(deploymentId: string, log: DeployLog): Promise<void> {
    if (this.#closed.signal.aborted) throw new DeployFailedError('the kubernetes deployer is closed');
    const kinds = this.#kinds(this.#closed.signal);
    const selector = deploymentLabelSelector(deploymentId);
    let removed = 0;
    const removeAll = async (kind: KindApi<Named>) => {
      for (const object of await kind.list(selector)) {
        const objectName = object.metadata!.name!;
        const deleted = await removeObject(kind, objectName).catch((error: unknown) => {
          throw new DeployFailedError(`kubernetes: ${describeApiError(error)}`, { cause: error });
        });
        if (deleted) {
          log(`deleted ${kind.kind} ${objectName}`);
          removed++;
        }
      }
    };
    for (const kind of [kinds.deployment, kinds.service, kinds.secret] as Array<KindApi<Named>>) await removeAll(kind);
    // Pods run on for their grace period after their Deployment is gone (longer if their code
    // ignores SIGTERM): the policy keeps containing them until the last one is gone.
    if ((await kinds.networkPolicy.list(selector)).length > 0) {
      await this.#podsGone(selector, log);
      await removeAll(kinds.networkPolicy as KindApi<Named>);
    }
    if (removed === 0) log(`nothing of deployment ${deploymentId} in namespace ${this.namespace}`);
  }

  async close(): Promise<void> {
    // Workloads keep running; only our own waits stop.
    this.#closed.abort(new DeployFailedError('the kubernetes deployer is closed'));
  }

  /**
   * Writes the deployment's NetworkPolicy, its platform services' hosts resolved now; with the
   * policy turned off, removes one an earlier configuration made.
   */
  async #applyNetworkPolicy(kind: KindApi<V1NetworkPolicy>, spec: RevisionSpec, existing: V1NetworkPolicy | undefined, log: DeployLog): Promise<void> {
    const policy = this.#options.networkPolicy;
    if (!policy) {
      const name = existing?.metadata?.name;
      if (name && (await removeObject(kind, name))) log(`deleted NetworkPolicy ${name}: the deployer makes none (BERTH_DEPLOYMENT_NETWORK_POLICY=off)`, 'warn');
      return;
    }
    const endpoints = await resolveEndpoints(spec.env, this.namespace, this.#options.lookup ?? systemLookup);
    for (const endpoint of endpoints) log(describeEndpoint(endpoint), endpoint.addresses.length > 0 || endpoint.serviceNamespace ? 'info' : 'warn');
    await this.#apply(kind, buildNetworkPolicy(spec, this.namespace, policy, endpoints), existing, log);
  }

  /** Waits until no pod of the deployment is left; DeployFailedError (the removal is tried again) when some stay. */
  async #podsGone(selector: string, log: DeployLog): Promise<void> {
    const signal = this.#closed.signal;
    const timeoutMs = this.#options.podsGoneTimeoutMs ?? (TERMINATION_GRACE_SECONDS + 30) * 1000;
    const left = async () => (await this.#core.listNamespacedPod({ namespace: this.namespace, labelSelector: selector }, callOptions(signal))).items;
    const pods = await left();
    if (pods.length === 0) return;
    log(`waiting for ${pods.length} pod(s) to end before removing their NetworkPolicy`);
    try {
      await poll(async () => ((await left()).length === 0 ? true : undefined), {
        timeoutMs,
        intervalMs: this.#pollIntervalMs,
        signal,
        what: "the end of the deployment's pods",
      });
    } catch (error) {
      if (!(error instanceof PollTimeoutError)) throw error;
      const names = (await left()).map((p) => p.metadata?.name).join(', ');
      throw new DeployFailedError(`pods ${names} are still there after ${formatMs(timeoutMs)}: their NetworkPolicy stays until they are gone`, {
        cause: error,
      });
    }
  }

  /** Creates the object, or replaces it (at the resourceVersion read) when it exists. */
  #apply<T extends Named>(kind: KindApi<T>, body: T, existing: T | undefined, log: DeployLog, keep?: (body: T, existing: T) => T): Promise<T> {
    return createOrReplace(kind, body, { existing, onWrite: (action, kindName, name) => log(`${action} ${kindName} ${name}`), ...(keep ? { keep } : {}) });
  }

  async #waitForRollout(spec: RevisionSpec, name: string, generation: number, log: DeployLog, signal: AbortSignal): Promise<void> {
    const deadline = Date.now() + this.#rolloutTimeoutMs;
    const warned = new Set<string>();
    let lastMessage = '';
    const pods = () =>
      this.#core.listNamespacedPod({ namespace: this.namespace, labelSelector: revisionPodSelector(spec.deploymentId, spec.revisionId) }, callOptions(signal));
    for (;;) {
      const deployment = await this.#apps.readNamespacedDeployment({ name, namespace: this.namespace }, callOptions(signal));
      const verdict = rolloutVerdict(deployment, generation);
      if (verdict.state === 'done') return;
      const revisionPods = (await pods()).items;
      const problems = podProblems(revisionPods);
      for (const problem of problems) {
        const line = describeProblem(problem);
        if (!problem.fatal && !warned.has(`${problem.pod}/${problem.reason}`)) {
          warned.add(`${problem.pod}/${problem.reason}`);
          log(line, 'warn');
        }
      }
      const fatal = problems.filter((p) => p.fatal);
      if (verdict.state === 'failed' || fatal.length > 0) {
        const reason = fatal.length > 0 ? describeProblem(fatal[0]!) : (verdict as { reason: string }).reason;
        throw await this.#failure(spec, `revision ${spec.revisionId} failed to roll out: ${reason}`, revisionPods, problems, log, signal);
      }
      if (verdict.message !== lastMessage) {
        lastMessage = verdict.message;
        log(verdict.message);
      }
      if (Date.now() >= deadline) {
        const limit = formatMs(this.#rolloutTimeoutMs);
        throw await this.#failure(
          spec,
          `revision ${spec.revisionId} did not finish rolling out within ${limit} (${lastMessage})`,
          revisionPods,
          problems,
          log,
          signal,
        );
      }
      await sleep(Math.min(this.#pollIntervalMs, Math.max(0, deadline - Date.now())), signal);
    }
  }

  /** A `DeployFailedError` for `summary`, with what the failing pods printed in the log. */
  async #failure(spec: RevisionSpec, summary: string, pods: V1Pod[], problems: PodProblem[], log: DeployLog, signal: AbortSignal): Promise<DeployFailedError> {
    for (const problem of problems) log(describeProblem(problem), 'error');
    // The pods to read output from: those with a problem first, then any not-ready pod.
    const names = [...new Set([...problems.map((p) => p.pod), ...pods.map((p) => p.metadata?.name ?? '')].filter((n) => n))].slice(0, 2);
    let lastLine: string | undefined;
    for (const pod of names) {
      const restarted = problems.some((p) => p.pod === pod && p.restarts > 0);
      const text = await this.#podLog(pod, restarted, signal);
      const lines = text.split('\n').filter((line) => line.trim().length > 0);
      if (lines.length === 0) continue;
      log(`last ${lines.length} log lines of pod ${pod}:`, 'error');
      for (const line of lines) log(line, 'error');
      lastLine ??= lines[lines.length - 1];
    }
    const message = lastLine ? `${summary}; last log line: ${lastLine}` : summary;
    log(message, 'error');
    return new DeployFailedError(message);
  }

  /** The tail of a pod's output: of the crashed container when it restarted, else of the current one. */
  async #podLog(pod: string, previous: boolean, signal: AbortSignal): Promise<string> {
    const read = (prev: boolean) =>
      this.#core.readNamespacedPodLog(
        { name: pod, namespace: this.namespace, container: CONTAINER_NAME, tailLines: LOG_TAIL_LINES, ...(prev ? { previous: true } : {}) },
        callOptions(signal),
      );
    try {
      const text = await read(previous);
      return text || (previous ? await read(false) : '');
    } catch {
      try {
        return previous ? await read(false) : '';
      } catch {
        // Logs are a courtesy: the failure is reported without them.
        return '';
      }
    }
  }

  /** Puts back what served before a failed revision; a first revision that failed is removed. */
  async #restore(deploymentId: string, name: string, previous: Previous, log: DeployLog): Promise<void> {
    const kinds = this.#kinds(this.#closed.signal);
    try {
      if (!previous.deployment) {
        for (const kind of [kinds.deployment, kinds.service, kinds.secret] as Array<KindApi<Named>>) {
          await removeObject(kind, name);
        }
        log(`removed the objects of the failed first revision`, 'warn');
        // The policy once the failed revision's pods are gone: it contains them while they end.
        try {
          await this.#podsGone(deploymentLabelSelector(deploymentId), log);
          await removeObject(kinds.networkPolicy, name);
        } catch (error) {
          if (!(error instanceof DeployFailedError)) throw error;
          log(`${error.message} (it goes with the deployment)`, 'warn');
        }
        return;
      }
      const quiet: DeployLog = () => undefined;
      if (previous.secret) await this.#apply(kinds.secret, writable(previous.secret), undefined, quiet);
      await this.#apply(kinds.deployment, writable(previous.deployment), undefined, quiet);
      // The policy the previous revision served under (none: it served before there were policies).
      if (previous.networkPolicy) await this.#apply(kinds.networkPolicy, writable(previous.networkPolicy), undefined, quiet);
      else await removeObject(kinds.networkPolicy, name);
      const revision = previous.deployment.metadata?.annotations?.[ANNOTATIONS.revisionId];
      log(`rolled ${name} back to ${revision ? `revision ${revision}` : 'its previous spec'}, which keeps serving`, 'warn');
    } catch (error) {
      log(`could not restore the previous revision: ${describeApiError(error)}`, 'error');
    }
  }

  #kinds(signal: AbortSignal): {
    secret: KindApi<V1Secret>;
    deployment: KindApi<V1Deployment>;
    service: KindApi<V1Service>;
    networkPolicy: KindApi<V1NetworkPolicy>;
  } {
    const call = () => callOptions(signal);
    const { secret, service } = coreKinds(this.#core, this.namespace, call);
    return { secret, service, deployment: deploymentKind(this.#apps, this.namespace, call), networkPolicy: networkPolicyKind(this.#net, this.namespace, call) };
  }
}

/** What served a deployment before a revision's deploy began, to put back if the revision fails. */
interface Previous {
  secret: V1Secret | undefined;
  deployment: V1Deployment | undefined;
  networkPolicy: V1NetworkPolicy | undefined;
}
