/**
 * A simulated Deployment controller. With `rollingUpdate`, it rolls Deployments out as upstream
 * does (rolling-update.ts), with pods that the kubelets start and make Ready. Otherwise, when a
 * Deployment's spec changes it reports the rollout as
 * progressing at once, and after `delayMs` finishes it the way the test decided: `ready` (new
 * pods Ready, old pods gone, `Available`), `fail` (one new pod that never gets ready, with the
 * reason and logs the test gave, old pods kept, `Progressing` False) or `stall` (a new pod that
 * never gets ready and no verdict, for timeouts and aborts). Pods are real stored objects owned
 * by the Deployment, labelled from its template plus `pod-template-hash`.
 */
import { randomBytes } from 'node:crypto';
import type { PodLogs } from './pod-logs.js';
import { podReady, reconcileRollout, templateHash, type DeploymentCondition as Condition } from './rolling-update.js';
import type { ObjectStore, StoreEvent } from './store.js';
import { timestamp, type KubeObject } from './types.js';

export interface RolloutFailure {
  /**
   * Reason of the `Progressing` False condition.
   * @default 'ProgressDeadlineExceeded'
   */
  reason?: string;
  /**
   * Message of that condition.
   * @default 'ReplicaSet "<name>-<hash>" has timed out progressing.'
   */
  message?: string;
  /**
   * Why the new pod's container waits (`CrashLoopBackOff`, `ImagePullBackOff`, ...).
   * @default 'CrashLoopBackOff'
   */
  podReason?: string;
  /** Message of the container's waiting state. */
  podMessage?: string;
  /** What the new pod's container printed, served at `pods/{name}/log`. */
  logs?: string;
  /**
   * Whether the Deployment reports the failure (`Progressing` False). False shows only the failing
   * pod, as a real cluster does until the progress deadline (10 minutes by default) has passed.
   * @default true
   */
  progressDeadline?: boolean;
}

export type RolloutOutcome = { result: 'ready' } | ({ result: 'fail' } & RolloutFailure) | { result: 'stall' };

/** Decides how a rollout of this Deployment ends; undefined falls through to the image rules. */
export type RolloutDecider = (deployment: KubeObject) => RolloutOutcome | undefined;

export interface DeploymentControllerOptions {
  /**
   * How long a rollout takes before its outcome shows.
   * @default 30
   */
  delayMs?: number;
  /** A hook deciding outcomes, consulted before the per-image rules. */
  decide?: RolloutDecider;
  /**
   * Roll out as upstream's controller does (the strategy's surge and unavailability, old pods
   * removed gracefully as new ones get Ready), with pods created Pending for the kubelets: the
   * simulated one (PodController) or a {@link Kubelet} running processes. `delayMs` and the
   * outcome rules then do not apply: the pods' readiness decides.
   * @default false
   */
  rollingUpdate?: boolean;
}

type Obj = Record<string, unknown>;

export class DeploymentController {
  /** How long a rollout takes before its outcome shows. */
  delayMs: number;
  #decide: RolloutDecider | undefined;
  readonly #imageOutcomes = new Map<string, RolloutOutcome>();
  readonly #timers = new Map<string, NodeJS.Timeout[]>();
  readonly #handled = new Map<string, number>();
  readonly #store: ObjectStore;
  readonly #logs: PodLogs;
  readonly #unsubscribe: () => void;
  /** Deployments (namespace/name) whose rollout is due another step (rollingUpdate). */
  readonly #due = new Set<string>();
  #closed = false;

  constructor(store: ObjectStore, logs: PodLogs, options: DeploymentControllerOptions = {}) {
    this.#store = store;
    this.#logs = logs;
    this.delayMs = options.delayMs ?? 30;
    this.#decide = options.decide;
    this.#unsubscribe = store.subscribe((event) => (options.rollingUpdate ? this.#onRollingChange(event) : this.#onChange(event)));
  }

  /** Rollouts of Deployments running `image` (in any container) fail this way. */
  failImage(image: string, failure: RolloutFailure = {}): void {
    this.#imageOutcomes.set(image, { result: 'fail', ...failure });
  }

  /** Rollouts of Deployments running `image` never finish. */
  stallImage(image: string): void {
    this.#imageOutcomes.set(image, { result: 'stall' });
  }

  /** Replaces the decider hook (undefined removes it). */
  setDecider(decide: RolloutDecider | undefined): void {
    this.#decide = decide;
  }

  /** Forgets the image rules and the hook: every rollout succeeds again. */
  resetOutcomes(): void {
    this.#imageOutcomes.clear();
    this.#decide = undefined;
  }

  close(): void {
    this.#closed = true;
    this.#unsubscribe();
    for (const timers of this.#timers.values()) for (const t of timers) clearTimeout(t);
    this.#timers.clear();
  }

  /** A Deployment, or a pod a Deployment owns, changed: its rollout takes its next step soon after (changes coalesce). */
  #onRollingChange(event: StoreEvent): void {
    const { group, resource } = event.resource;
    let key: string | undefined;
    if (group === 'apps' && resource === 'deployments' && event.type !== 'DELETED') key = `${event.object.metadata.namespace}/${event.object.metadata.name}`;
    if (group === '' && resource === 'pods') {
      const owner = (event.object.metadata.ownerReferences ?? []).find((r) => r.kind === 'Deployment' && r.controller);
      if (owner) key = `${event.object.metadata.namespace}/${owner.name}`;
    }
    if (key === undefined || this.#due.has(key)) return;
    this.#due.add(key);
    setImmediate(() => {
      this.#due.delete(key);
      if (this.#closed) return;
      const [namespace, name] = key.split('/') as [string, string];
      const deployment = this.#store.find('apps/deployments', namespace, name);
      if (deployment) reconcileRollout(this.#store, deployment);
    });
  }

  #onChange(event: StoreEvent): void {
    if (event.resource.group !== 'apps' || event.resource.resource !== 'deployments') return;
    const { namespace, name, generation } = event.object.metadata;
    const key = `${namespace}/${name}`;
    if (event.type === 'DELETED') {
      this.#cancel(key);
      this.#handled.delete(key);
      return;
    }
    // Status writes (ours included) do not change the generation: nothing to roll out.
    if (generation === undefined || this.#handled.get(key) === generation) return;
    this.#handled.set(key, generation);
    this.#cancel(key);
    // Upstream observes the new generation almost at once, and finishes the rollout later.
    this.#timers.set(key, [
      setTimeout(() => this.#step(namespace!, name!, generation, 'progressing'), 0),
      setTimeout(() => this.#step(namespace!, name!, generation, 'finish'), this.delayMs),
    ]);
  }

  #cancel(key: string): void {
    for (const t of this.#timers.get(key) ?? []) clearTimeout(t);
    this.#timers.delete(key);
  }

  #outcome(deployment: KubeObject): RolloutOutcome {
    const decided = this.#decide?.(deployment);
    if (decided) return decided;
    for (const container of this.#containers(deployment)) {
      const rule = this.#imageOutcomes.get(String(container['image']));
      if (rule) return rule;
    }
    return { result: 'ready' };
  }

  #containers(deployment: KubeObject): Obj[] {
    const template = (deployment['spec'] as Obj | undefined)?.['template'] as Obj | undefined;
    return ((template?.['spec'] as Obj | undefined)?.['containers'] ?? []) as Obj[];
  }

  #step(namespace: string, name: string, generation: number, phase: 'progressing' | 'finish'): void {
    const deployment = this.#store.find('apps/deployments', namespace, name);
    // Deleted, or changed again since: the newer change has its own timers.
    if (!deployment || deployment.metadata.generation !== generation) return;
    const spec = deployment['spec'] as Obj;
    const desired = typeof spec['replicas'] === 'number' ? spec['replicas'] : 1;
    const template = spec['template'] as Obj;
    const hash = templateHash(template);
    const rsName = `${name}-${hash}`;
    const owned = this.#store.list('pods', namespace).filter((p) => (p.metadata.ownerReferences ?? []).some((r) => r.uid === deployment.metadata.uid));
    const current = owned.filter((p) => p.metadata.labels?.['pod-template-hash'] === hash);
    const old = owned.filter((p) => p.metadata.labels?.['pod-template-hash'] !== hash);
    const oldReady = old.filter(podReady).length;
    const previous = ((deployment['status'] as Obj | undefined)?.['conditions'] ?? []) as Condition[];

    if (phase === 'progressing') {
      const ready = owned.filter(podReady).length;
      this.#writeStatus(deployment, previous, {
        replicas: owned.length,
        updatedReplicas: current.length,
        readyReplicas: ready,
        availableReplicas: ready,
        available: ready >= desired,
        progressing: { status: 'True', reason: 'ReplicaSetUpdated', message: `ReplicaSet "${rsName}" is progressing.` },
      });
      return;
    }

    const outcome = this.#outcome(deployment);
    if (outcome.result === 'ready') {
      for (const pod of old) this.#deletePod(pod);
      const keep = current.filter(podReady).slice(0, desired);
      for (const pod of current) if (!keep.includes(pod)) this.#deletePod(pod);
      while (keep.length < desired) keep.push(this.#createPod(deployment, template, hash, { ready: true }));
      this.#writeStatus(deployment, previous, {
        replicas: desired,
        updatedReplicas: desired,
        readyReplicas: desired,
        availableReplicas: desired,
        available: true,
        progressing: { status: 'True', reason: 'NewReplicaSetAvailable', message: `ReplicaSet "${rsName}" has successfully progressed.` },
      });
      return;
    }

    // A failed or stalled rollout: one surge pod that never gets ready, the old pods keep serving.
    const fresh =
      current.length > 0 || desired === 0
        ? current
        : [this.#createPod(deployment, template, hash, outcome.result === 'fail' ? { ready: false, failure: outcome } : { ready: false })];
    const counts = {
      replicas: old.length + fresh.length,
      updatedReplicas: fresh.length,
      readyReplicas: oldReady,
      availableReplicas: oldReady,
      available: oldReady >= desired,
    };
    if (outcome.result === 'stall' || outcome.progressDeadline === false) {
      this.#writeStatus(deployment, previous, {
        ...counts,
        progressing: { status: 'True', reason: 'ReplicaSetUpdated', message: `ReplicaSet "${rsName}" is progressing.` },
      });
      return;
    }
    this.#writeStatus(deployment, previous, {
      ...counts,
      progressing: {
        status: 'False',
        reason: outcome.reason ?? 'ProgressDeadlineExceeded',
        message: outcome.message ?? `ReplicaSet "${rsName}" has timed out progressing.`,
      },
    });
  }

  #writeStatus(
    deployment: KubeObject,
    previous: Condition[],
    s: {
      replicas: number;
      updatedReplicas: number;
      readyReplicas: number;
      availableReplicas: number;
      available: boolean;
      progressing: Pick<Condition, 'status' | 'reason' | 'message'>;
    },
  ): void {
    const condition = (type: string, next: Pick<Condition, 'status' | 'reason' | 'message'>): Condition => {
      const before = previous.find((c) => c.type === type);
      const time = timestamp();
      return { type, ...next, lastUpdateTime: time, lastTransitionTime: before && before.status === next.status ? before.lastTransitionTime : time };
    };
    const status: Obj = {
      observedGeneration: deployment.metadata.generation,
      replicas: s.replicas,
      updatedReplicas: s.updatedReplicas,
      readyReplicas: s.readyReplicas,
      availableReplicas: s.availableReplicas,
      conditions: [
        condition(
          'Available',
          s.available
            ? { status: 'True', reason: 'MinimumReplicasAvailable', message: 'Deployment has minimum availability.' }
            : { status: 'False', reason: 'MinimumReplicasUnavailable', message: 'Deployment does not have minimum availability.' },
        ),
        condition('Progressing', s.progressing),
      ],
    };
    const unavailable = s.replicas - s.availableReplicas;
    if (unavailable > 0) status['unavailableReplicas'] = unavailable;
    this.#store.replace('apps/deployments', deployment.metadata.namespace, deployment.metadata.name!, { ...deployment, status }, { subresource: 'status' });
  }

  #createPod(deployment: KubeObject, template: Obj, hash: string, state: { ready: boolean; failure?: RolloutFailure }): KubeObject {
    const meta = (template['metadata'] ?? {}) as Obj;
    const podSpec = structuredClone((template['spec'] ?? {}) as Obj);
    const namespace = deployment.metadata.namespace!;
    const name = `${deployment.metadata.name}-${hash}-${randomBytes(3).toString('hex').slice(0, 5)}`;
    const started = timestamp();
    const containers = ((podSpec['containers'] ?? []) as Obj[]).map((c) => {
      const failure = state.failure;
      const crash = failure && (failure.podReason ?? 'CrashLoopBackOff') === 'CrashLoopBackOff';
      return {
        name: c['name'],
        image: c['image'],
        ready: state.ready,
        started: state.ready || !failure,
        restartCount: crash ? 4 : 0,
        state: failure
          ? {
              waiting: {
                reason: failure.podReason ?? 'CrashLoopBackOff',
                message: failure.podMessage ?? `back-off 40s restarting failed container=${String(c['name'])} pod=${name}`,
              },
            }
          : { running: { startedAt: started } },
        ...(crash ? { lastState: { terminated: { exitCode: 1, reason: 'Error', startedAt: started, finishedAt: started } } } : {}),
      };
    });
    const pending = state.failure && state.failure.podReason !== undefined && state.failure.podReason !== 'CrashLoopBackOff';
    const pod = this.#store.create(
      'pods',
      namespace,
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name,
          namespace,
          labels: { ...((meta['labels'] ?? {}) as Record<string, string>), 'pod-template-hash': hash },
          ...(meta['annotations'] ? { annotations: meta['annotations'] as Record<string, string> } : {}),
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name!, uid: deployment.metadata.uid!, controller: true }],
        },
        spec: podSpec,
        status: {
          phase: pending ? 'Pending' : 'Running',
          conditions: [
            { type: 'Ready', status: state.ready ? 'True' : 'False', ...(state.ready ? {} : { reason: 'ContainersNotReady' }) },
            { type: 'ContainersReady', status: state.ready ? 'True' : 'False' },
          ],
          podIP: `10.244.0.${1 + Math.floor(Math.random() * 250)}`,
          startTime: started,
          containerStatuses: containers,
        },
      },
      { keepStatus: true },
    );
    if (state.failure?.logs !== undefined) this.#logs.set(namespace, name, state.failure.logs);
    return pod;
  }

  #deletePod(pod: KubeObject): void {
    if (this.#store.find('pods', pod.metadata.namespace, pod.metadata.name!)) this.#store.delete('pods', pod.metadata.namespace, pod.metadata.name!);
  }
}
