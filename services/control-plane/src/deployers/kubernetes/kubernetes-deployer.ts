/**
 * The `kubernetes` adapter of the deployer port: per deployment one Secret, one Deployment and
 * one ClusterIP Service (see `manifests.ts`), created or replaced on every revision; a revision
 * is deployed once its rolling update has finished. A revision that fails puts the previous
 * Deployment spec and Secret back, so the revision that served keeps serving.
 */
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  KubeConfig,
  Observable,
  type ConfigurationOptions,
  type RequestContext,
  type ResponseContext,
  type V1Deployment,
  type V1ObjectMeta,
  type V1Pod,
  type V1Secret,
  type V1Service,
} from '@kubernetes/client-node';
import { DeployFailedError, type DeployedRevision, type Deployer, type DeployLog, type RevisionSpec } from '../deployer.js';
import {
  ANNOTATIONS,
  buildManifests,
  CONTAINER_NAME,
  deploymentLabelSelector,
  revisionPodSelector,
  serviceUrl,
  type ImageRevisionSpec,
} from './manifests.js';
import { describeProblem, podProblems, rolloutVerdict, type PodProblem } from './rollout.js';

/** A cluster given by address: the API server URL and, usually, a bearer token. */
export interface KubernetesServer {
  /** The API server, e.g. `https://10.0.0.1:6443`. */
  server: string;
  token?: string;
  /** Base64 PEM of the CA that signed the server's certificate. */
  caData?: string;
  /**
   * Skip TLS verification (test clusters only). A plain `http://` server (`kubectl proxy`) has no
   * TLS to verify, and client-node refuses it unless this is set, so it is then set for it.
   * @default false for https, true for http
   */
  skipTLSVerify?: boolean;
}

export interface KubernetesDeployerOptions {
  /** The cluster: a loaded `KubeConfig` (in-cluster or a kubeconfig file), or an address and token. */
  cluster: KubeConfig | KubernetesServer;
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
}

/** Lines of a failing pod's output copied into the deploy log. */
const LOG_TAIL_LINES = 20;
/** Retries of a write that lost an optimistic-concurrency race. */
const WRITE_ATTEMPTS = 4;

type Named = { metadata?: V1ObjectMeta };

/** One of the three kinds, as read/create/replace/delete on the typed clients. */
interface KindApi<T extends Named> {
  kind: string;
  read(name: string): Promise<T>;
  create(body: T): Promise<T>;
  replace(name: string, body: T): Promise<T>;
  remove(name: string): Promise<unknown>;
  list(labelSelector: string): Promise<T[]>;
}

function isStatus(error: unknown, code: number): boolean {
  return error instanceof ApiException && error.code === code;
}

/** The API server's own words for a failed call (the `Status` message), else the error text. */
export function describeApiError(error: unknown): string {
  if (error instanceof ApiException) {
    try {
      const status = JSON.parse(String(error.body)) as { message?: string };
      if (status.message) return `${status.message} (HTTP ${error.code})`;
    } catch {
      // Not a Status object (a proxy in between, or no body): fall through.
    }
    // client-node drops the body of a 401.
    if (error.code === 401) return 'Unauthorized: the Kubernetes API rejected the credentials (HTTP 401)';
    return `HTTP ${error.code} from the Kubernetes API`;
  }
  return error instanceof Error ? error.message : String(error);
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Only what a write may carry over from a read object (no uid, status or managed fields). */
function writable<T extends Named>(object: T): T {
  const { name, namespace, labels, annotations } = object.metadata ?? {};
  const { status: _status, ...rest } = object as T & { status?: unknown };
  return { ...rest, metadata: { name, namespace, labels, annotations } } as T;
}

export class KubernetesDeployer implements Deployer {
  readonly name = 'kubernetes';
  /** Workloads are the cluster's: they run on while the control plane is away. */
  readonly revisionsSurviveClose = true;
  readonly namespace: string;
  readonly #core: CoreV1Api;
  readonly #apps: AppsV1Api;
  readonly #options: KubernetesDeployerOptions;
  readonly #rolloutTimeoutMs: number;
  readonly #pollIntervalMs: number;
  readonly #closed = new AbortController();

  constructor(options: KubernetesDeployerOptions) {
    this.#options = options;
    this.namespace = options.namespace ?? 'berth';
    this.#rolloutTimeoutMs = options.rolloutTimeoutMs ?? 600_000;
    this.#pollIntervalMs = options.pollIntervalMs ?? 2_000;
    let kc: KubeConfig;
    if (options.cluster instanceof KubeConfig) {
      kc = options.cluster;
    } else {
      kc = new KubeConfig();
      const { server, token, caData, skipTLSVerify } = options.cluster;
      kc.loadFromClusterAndUser(
        { name: 'berth', server, skipTLSVerify: skipTLSVerify ?? server.startsWith('http://'), ...(caData ? { caData } : {}) },
        { name: 'berth', ...(token ? { token } : {}) },
      );
    }
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#apps = kc.makeApiClient(AppsV1Api);
  }

  async deploy(spec: RevisionSpec, log: DeployLog, signal?: AbortSignal): Promise<DeployedRevision> {
    const aborted = signal ? AbortSignal.any([signal, this.#closed.signal]) : this.#closed.signal;
    aborted.throwIfAborted();
    if (spec.artifact.kind !== 'image') {
      const message =
        'the kubernetes deployer runs container images: use source external_docker with an image_uri ' +
        '(built from the project with `langgraph build` or a Dockerfile), or run Berth with the local deployer to deploy a project directory';
      log(message, 'error');
      throw new DeployFailedError(message);
    }
    const imageSpec = spec as ImageRevisionSpec;
    const manifests = buildManifests(imageSpec, {
      namespace: this.namespace,
      ...(this.#options.imagePullSecrets ? { imagePullSecrets: this.#options.imagePullSecrets } : {}),
      ...(this.#options.serviceAccountName ? { serviceAccountName: this.#options.serviceAccountName } : {}),
    });
    const name = manifests.deployment.metadata!.name!;
    const kinds = this.#kinds(aborted);
    let previous: { secret: V1Secret | undefined; deployment: V1Deployment | undefined } | undefined;
    try {
      log(`deploying revision ${spec.revisionId} (image ${imageSpec.artifact.imageUri}) as ${name} in namespace ${this.namespace}`);
      // What serves now, to put back if this revision fails.
      previous = { secret: await this.#find(kinds.secret, name), deployment: await this.#find(kinds.deployment, name) };
      await this.#apply(kinds.secret, manifests.secret, previous.secret, log);
      const applied = await this.#apply(kinds.deployment, manifests.deployment, previous.deployment, log);
      await this.#apply(kinds.service, manifests.service, await this.#find(kinds.service, name), log, (body, existing) => ({
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
      const failure =
        error instanceof DeployFailedError ? error : new DeployFailedError(`kubernetes: ${describeApiError(error)}`, { cause: error });
      if (!(error instanceof DeployFailedError)) log(failure.message, 'error');
      if (previous) await this.#restore(name, previous, log);
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
    for (const kind of [kinds.deployment, kinds.service, kinds.secret]) {
      for (const object of await kind.list(selector)) {
        const objectName = object.metadata!.name!;
        try {
          await kind.remove(objectName);
          log(`deleted ${kind.kind} ${objectName}`);
          removed++;
        } catch (error) {
          if (!isStatus(error, 404)) throw new DeployFailedError(`kubernetes: ${describeApiError(error)}`, { cause: error });
        }
      }
    }
    if (removed === 0) log(`nothing of deployment ${deploymentId} in namespace ${this.namespace}`);
  }

  async close(): Promise<void> {
    // Workloads keep running; only our own waits stop.
    this.#closed.abort(new DeployFailedError('the kubernetes deployer is closed'));
  }

  /** Creates the object, or replaces it (at the resourceVersion read) when it exists. */
  async #apply<T extends Named>(kind: KindApi<T>, body: T, existing: T | undefined, log: DeployLog, keep?: (body: T, existing: T) => T): Promise<T> {
    const name = body.metadata!.name!;
    let current = existing;
    for (let attempt = 1; ; attempt++) {
      try {
        if (!current) {
          log(`creating ${kind.kind} ${name}`);
          return await kind.create(body);
        }
        log(`replacing ${kind.kind} ${name}`);
        const next = keep ? keep(body, current) : body;
        return await kind.replace(name, { ...next, metadata: { ...next.metadata, resourceVersion: current.metadata?.resourceVersion } });
      } catch (error) {
        // Lost a race with another writer: read again and retry.
        if (attempt >= WRITE_ATTEMPTS || !isStatus(error, 409)) throw error;
        current = await this.#find(kind, name);
      }
    }
  }

  async #find<T extends Named>(kind: KindApi<T>, name: string): Promise<T | undefined> {
    try {
      return await kind.read(name);
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  async #waitForRollout(spec: RevisionSpec, name: string, generation: number, log: DeployLog, signal: AbortSignal): Promise<void> {
    const deadline = Date.now() + this.#rolloutTimeoutMs;
    const warned = new Set<string>();
    let lastMessage = '';
    const pods = () => this.#core.listNamespacedPod({ namespace: this.namespace, labelSelector: revisionPodSelector(spec.deploymentId, spec.revisionId) }, this.#call(signal));
    for (;;) {
      const deployment = await this.#apps.readNamespacedDeployment({ name, namespace: this.namespace }, this.#call(signal));
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
        const limit = this.#rolloutTimeoutMs < 1000 ? `${this.#rolloutTimeoutMs}ms` : `${Math.round(this.#rolloutTimeoutMs / 1000)}s`;
        throw await this.#failure(spec, `revision ${spec.revisionId} did not finish rolling out within ${limit} (${lastMessage})`, revisionPods, problems, log, signal);
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
        this.#call(signal),
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
  async #restore(name: string, previous: { secret: V1Secret | undefined; deployment: V1Deployment | undefined }, log: DeployLog): Promise<void> {
    const kinds = this.#kinds(this.#closed.signal);
    try {
      if (!previous.deployment) {
        for (const kind of [kinds.deployment, kinds.service, kinds.secret] as Array<KindApi<Named>>) {
          await kind.remove(name).catch((error: unknown) => {
            if (!isStatus(error, 404)) throw error;
          });
        }
        log(`removed the objects of the failed first revision`, 'warn');
        return;
      }
      const quiet: DeployLog = () => undefined;
      if (previous.secret) await this.#apply(kinds.secret, writable(previous.secret), undefined, quiet);
      await this.#apply(kinds.deployment, writable(previous.deployment), undefined, quiet);
      const revision = previous.deployment.metadata?.annotations?.[ANNOTATIONS.revisionId];
      log(`rolled ${name} back to ${revision ? `revision ${revision}` : 'its previous spec'}, which keeps serving`, 'warn');
    } catch (error) {
      log(`could not restore the previous revision: ${describeApiError(error)}`, 'error');
    }
  }

  /** Per-call options that tie the HTTP request to `signal`. */
  #call(signal: AbortSignal): ConfigurationOptions {
    return {
      middleware: [
        {
          pre: (context: RequestContext) => {
            context.setSignal(signal);
            return new Observable(Promise.resolve(context));
          },
          post: (response: ResponseContext) => new Observable(Promise.resolve(response)),
        },
      ],
      middlewareMergeStrategy: 'append',
    };
  }

  #kinds(signal: AbortSignal): { secret: KindApi<V1Secret>; deployment: KindApi<V1Deployment>; service: KindApi<V1Service> } {
    const namespace = this.namespace;
    const o = () => this.#call(signal);
    return {
      secret: {
        kind: 'Secret',
        read: (name) => this.#core.readNamespacedSecret({ name, namespace }, o()),
        create: (body) => this.#core.createNamespacedSecret({ namespace, body }, o()),
        replace: (name, body) => this.#core.replaceNamespacedSecret({ name, namespace, body }, o()),
        remove: (name) => this.#core.deleteNamespacedSecret({ name, namespace }, o()),
        list: async (labelSelector) => (await this.#core.listNamespacedSecret({ namespace, labelSelector }, o())).items,
      },
      deployment: {
        kind: 'Deployment',
        read: (name) => this.#apps.readNamespacedDeployment({ name, namespace }, o()),
        create: (body) => this.#apps.createNamespacedDeployment({ namespace, body }, o()),
        replace: (name, body) => this.#apps.replaceNamespacedDeployment({ name, namespace, body }, o()),
        // Background: the pods go with it, without holding up the call.
        remove: (name) => this.#apps.deleteNamespacedDeployment({ name, namespace, propagationPolicy: 'Background' }, o()),
        list: async (labelSelector) => (await this.#apps.listNamespacedDeployment({ namespace, labelSelector }, o())).items,
      },
      service: {
        kind: 'Service',
        read: (name) => this.#core.readNamespacedService({ name, namespace }, o()),
        create: (body) => this.#core.createNamespacedService({ namespace, body }, o()),
        replace: (name, body) => this.#core.replaceNamespacedService({ name, namespace, body }, o()),
        remove: (name) => this.#core.deleteNamespacedService({ name, namespace }, o()),
        list: async (labelSelector) => (await this.#core.listNamespacedService({ namespace, labelSelector }, o())).items,
      },
    };
  }
}
