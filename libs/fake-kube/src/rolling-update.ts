/**
 * A Deployment's rollout as upstream's controller runs it, with pods that kubelets start (the
 * simulated one, PodController, or a {@link Kubelet} running processes): the strategy decides the
 * steps. RollingUpdate adds new pods up to `replicas + maxSurge` and removes old ones only while
 * `replicas - maxUnavailable` pods stay Ready (unready old pods go first); Recreate removes every
 * old pod and starts new ones once they are gone. Pods that terminate (deleted gracefully, still
 * stopping) count for nothing, as upstream's ReplicaSets do not count them. ReplicaSets themselves
 * are not stored: pods carry the template's `pod-template-hash` and are owned by the Deployment.
 */
import { createHash, randomBytes } from 'node:crypto';
import { canonical, type ObjectStore } from './store.js';
import { timestamp, type KubeObject } from './types.js';

type Obj = Record<string, unknown>;

/** A condition of a Deployment's status. */
export interface DeploymentCondition {
  type: string;
  status: 'True' | 'False';
  reason: string;
  message: string;
  lastUpdateTime: string;
  lastTransitionTime: string;
}

/** The hash the controller gives pods of one pod template (upstream's `pod-template-hash`). */
export function templateHash(template: unknown): string {
  return createHash('sha256').update(canonical(template)).digest('hex').slice(0, 10);
}

/** Whether a pod is Ready (its Ready condition True). */
export function podReady(pod: KubeObject): boolean {
  const conditions = ((pod['status'] as Obj | undefined)?.['conditions'] ?? []) as Array<{ type: string; status: string }>;
  return conditions.some((c) => c.type === 'Ready' && c.status === 'True');
}

/** An int-or-percent of `replicas`, rounded up (maxSurge) or down (maxUnavailable), as upstream. */
function scaled(value: unknown, replicas: number, fallback: string, roundUp: boolean): number {
  const v = value ?? fallback;
  if (typeof v === 'number') return v;
  const percent = /^(\d+)%$/.exec(String(v));
  if (!percent) return Number(v);
  const exact = (Number(percent[1]) * replicas) / 100;
  return roundUp ? Math.ceil(exact) : Math.floor(exact);
}

/** Brings the Deployment's pods one step closer to its spec (called again on every change of them), and writes its status. */
export function reconcileRollout(store: ObjectStore, deployment: KubeObject): void {
  const spec = deployment['spec'] as Obj;
  const desired = typeof spec['replicas'] === 'number' ? spec['replicas'] : 1;
  const template = spec['template'] as Obj;
  const hash = templateHash(template);
  const namespace = deployment.metadata.namespace!;
  const owned = store.list('pods', namespace).filter((p) => (p.metadata.ownerReferences ?? []).some((r) => r.uid === deployment.metadata.uid));
  const active = owned.filter((p) => p.metadata.deletionTimestamp === undefined);
  const fresh = active.filter((p) => p.metadata.labels?.['pod-template-hash'] === hash);
  let old = active.filter((p) => p.metadata.labels?.['pod-template-hash'] !== hash);
  const remove = (pod: KubeObject) => {
    store.delete('pods', namespace, pod.metadata.name!);
    old = old.filter((p) => p !== pod);
  };
  const strategy = (spec['strategy'] ?? {}) as Obj;
  let maxUnavailable = 0;

  if (strategy['type'] === 'Recreate') {
    for (const pod of [...old]) remove(pod);
    // New pods only once no old one runs, terminating ones included.
    const stopping = owned.some((p) => p.metadata.labels?.['pod-template-hash'] !== hash);
    if (!stopping) for (let n = fresh.length; n < desired; n++) fresh.push(createPod(store, deployment, template, hash));
    maxUnavailable = desired;
  } else {
    const rolling = (strategy['rollingUpdate'] ?? {}) as Obj;
    const maxSurge = scaled(rolling['maxSurge'], desired, '25%', true);
    maxUnavailable = scaled(rolling['maxUnavailable'], desired, '25%', false);
    if (maxSurge === 0 && maxUnavailable === 0) maxUnavailable = 1;
    // Scale up: new pods, at most replicas + maxSurge pods in all.
    const room = Math.min(desired - fresh.length, desired + maxSurge - fresh.length - old.length);
    for (let n = 0; n < room; n++) fresh.push(createPod(store, deployment, template, hash));
    for (const pod of fresh.slice(desired)) store.delete('pods', namespace, pod.metadata.name!);
    fresh.splice(desired);
    // Scale down: old pods, as long as replicas - maxUnavailable pods stay available.
    const minAvailable = desired - maxUnavailable;
    const freshUnavailable = fresh.filter((p) => !podReady(p)).length;
    let total = fresh.length + old.length;
    for (const pod of old.filter((p) => !podReady(p))) {
      if (total - minAvailable - freshUnavailable <= 0) break;
      remove(pod);
      total--;
    }
    let available = [...fresh, ...old].filter(podReady).length;
    for (const pod of [...old]) {
      if (available - minAvailable <= 0) break;
      remove(pod);
      available--;
    }
  }
  writeStatus(store, deployment, { desired, fresh, old, maxUnavailable, rsName: `${deployment.metadata.name}-${hash}` });
}

function createPod(store: ObjectStore, deployment: KubeObject, template: Obj, hash: string): KubeObject {
  const meta = (template['metadata'] ?? {}) as Obj;
  const namespace = deployment.metadata.namespace!;
  return store.create('pods', namespace, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `${deployment.metadata.name}-${hash}-${randomBytes(3).toString('hex').slice(0, 5)}`,
      namespace,
      labels: { ...((meta['labels'] ?? {}) as Record<string, string>), 'pod-template-hash': hash },
      ...(meta['annotations'] ? { annotations: meta['annotations'] as Record<string, string> } : {}),
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name!, uid: deployment.metadata.uid!, controller: true }],
    },
    spec: structuredClone((template['spec'] ?? {}) as Obj),
  });
}

function writeStatus(
  store: ObjectStore,
  deployment: KubeObject,
  s: { desired: number; fresh: KubeObject[]; old: KubeObject[]; maxUnavailable: number; rsName: string },
): void {
  const pods = [...s.fresh, ...s.old];
  const ready = pods.filter(podReady).length;
  const complete = s.old.length === 0 && s.fresh.length === s.desired && s.fresh.every(podReady);
  const previous = ((deployment['status'] as Obj | undefined)?.['conditions'] ?? []) as DeploymentCondition[];
  const condition = (type: string, next: Pick<DeploymentCondition, 'status' | 'reason' | 'message'>): DeploymentCondition => {
    const before = previous.find((c) => c.type === type);
    // An unchanged condition keeps its times: a status write that changes nothing is no change.
    if (before && before.status === next.status && before.reason === next.reason && before.message === next.message) return before;
    const time = timestamp();
    return { type, ...next, lastUpdateTime: time, lastTransitionTime: before && before.status === next.status ? before.lastTransitionTime : time };
  };
  const status: Obj = {
    observedGeneration: deployment.metadata.generation,
    replicas: pods.length,
    updatedReplicas: s.fresh.length,
    readyReplicas: ready,
    availableReplicas: ready,
    conditions: [
      condition(
        'Available',
        ready >= s.desired - s.maxUnavailable
          ? { status: 'True', reason: 'MinimumReplicasAvailable', message: 'Deployment has minimum availability.' }
          : { status: 'False', reason: 'MinimumReplicasUnavailable', message: 'Deployment does not have minimum availability.' },
      ),
      condition(
        'Progressing',
        complete
          ? { status: 'True', reason: 'NewReplicaSetAvailable', message: `ReplicaSet "${s.rsName}" has successfully progressed.` }
          : { status: 'True', reason: 'ReplicaSetUpdated', message: `ReplicaSet "${s.rsName}" is progressing.` },
      ),
    ],
  };
  if (pods.length > ready) status['unavailableReplicas'] = pods.length - ready;
  store.replace('apps/deployments', deployment.metadata.namespace, deployment.metadata.name!, { ...deployment, status }, { subresource: 'status' });
}
