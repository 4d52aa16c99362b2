/**
 * A simulated kubelet for pods created through the API (the sandbox manager's, not the
 * Deployment controller's, which arrive with a status): after `delayMs` a `Pending` pod becomes
 * `Running` and Ready, or, when the test said its image fails, stays not ready with a waiting
 * reason and the logs the test gave. When the test lists the images that exist (`images`), a pod
 * with any other image fails to pull as on a real node: `ErrImagePull` with the registry's
 * answer, then `ImagePullBackOff`.
 */
import { createHash } from 'node:crypto';
import type { PodLogs } from './pod-logs.js';
import type { ObjectStore, StoreEvent } from './store.js';
import { timestamp, type KubeObject } from './types.js';

export interface PodFailure {
  /**
   * Why the container waits.
   * @default 'CrashLoopBackOff'
   */
  reason?: string;
  message?: string;
  /** What the container printed, served at `pods/{name}/log`. */
  logs?: string;
}

export interface PodControllerOptions {
  /**
   * How long a pod stays `Pending`.
   * @default 30
   */
  delayMs?: number;
  /** The images that can be pulled; unset, every image can. */
  images?: string[];
  /**
   * How long a failed pull shows `ErrImagePull` before `ImagePullBackOff`.
   * @default 1000
   */
  pullBackOffMs?: number;
}

type Obj = Record<string, unknown>;

export class PodController {
  /** How long a pod stays `Pending`. */
  delayMs: number;
  /** The images that can be pulled (undefined: all). */
  images: Set<string> | undefined;
  /** How long a failed pull shows `ErrImagePull` before `ImagePullBackOff`. */
  pullBackOffMs: number;
  readonly #failures = new Map<string, PodFailure>();
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #store: ObjectStore;
  readonly #logs: PodLogs;
  readonly #unsubscribe: () => void;
  #nextIp = 1;

  constructor(store: ObjectStore, logs: PodLogs, options: PodControllerOptions = {}) {
    this.#store = store;
    this.#logs = logs;
    this.delayMs = options.delayMs ?? 30;
    this.images = options.images ? new Set(options.images) : undefined;
    this.pullBackOffMs = options.pullBackOffMs ?? 1000;
    this.#unsubscribe = store.subscribe((event) => this.#onChange(event));
  }

  /** Pods with a container running `image` never get ready, this way. */
  failImage(image: string, failure: PodFailure = {}): void {
    this.#failures.set(image, failure);
  }

  resetOutcomes(): void {
    this.#failures.clear();
  }

  close(): void {
    this.#unsubscribe();
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }

  #onChange(event: StoreEvent): void {
    if (event.type !== 'ADDED' || event.resource.group !== '' || event.resource.resource !== 'pods') return;
    const status = (event.object['status'] ?? {}) as Obj;
    // Pods that arrive with container statuses are someone else's simulation; pods bound to a
    // node, that node's kubelet's.
    if (status['phase'] !== 'Pending' || status['containerStatuses'] !== undefined || boundToNode(event.object)) return;
    const { namespace, name, uid } = event.object.metadata;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      this.#start(namespace!, name!, uid!);
    }, this.delayMs);
    this.#timers.add(timer);
  }

  #start(namespace: string, name: string, uid: string): void {
    const pod = this.#store.find('pods', namespace, name);
    if (!pod || pod.metadata.uid !== uid || boundToNode(pod)) return;
    const containers = ((pod['spec'] as Obj | undefined)?.['containers'] ?? []) as Obj[];
    const failure = containers.map((c) => this.#failureOf(String(c['image']))).find((f) => f !== undefined);
    const started = timestamp();
    const crash = failure !== undefined && (failure.reason ?? 'CrashLoopBackOff') === 'CrashLoopBackOff';
    const ready = failure === undefined;
    const status: Obj = {
      phase: failure && !crash ? 'Pending' : 'Running',
      conditions: [
        { type: 'Initialized', status: 'True' },
        { type: 'Ready', status: ready ? 'True' : 'False', ...(ready ? {} : { reason: 'ContainersNotReady' }) },
        { type: 'ContainersReady', status: ready ? 'True' : 'False' },
        { type: 'PodScheduled', status: 'True' },
      ],
      hostIP: '10.0.0.1',
      podIP: `10.244.1.${(this.#nextIp++ % 250) + 1}`,
      startTime: started,
      containerStatuses: containers.map((c) => ({
        name: c['name'],
        image: c['image'],
        // What a runtime reports once pulled: the reference with the image's content digest.
        ...(failure?.reason === 'ErrImagePull' ? {} : { imageID: `${String(c['image']).split('@')[0]}@${imageDigest(String(c['image']))}` }),
        ready,
        started: ready,
        restartCount: crash ? 4 : 0,
        state: failure
          ? { waiting: { reason: failure.reason ?? 'CrashLoopBackOff', ...(failure.message ? { message: failure.message } : {}) } }
          : { running: { startedAt: started } },
      })),
    };
    this.#store.replace('pods', namespace, name, { ...pod, status } as KubeObject, { subresource: 'status' });
    if (failure?.logs !== undefined) this.#logs.set(namespace, name, failure.logs);
    if (failure?.reason === 'ErrImagePull') {
      // The kubelet retries, then backs off, which is what the pod shows from then on.
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        const current = this.#store.find('pods', namespace, name);
        if (!current || current.metadata.uid !== uid) return;
        const backOff = structuredClone(current['status']) as Obj;
        for (const s of (backOff['containerStatuses'] ?? []) as Obj[]) {
          const waiting = (s['state'] as Obj)['waiting'] as Obj | undefined;
          if (waiting?.['reason'] === 'ErrImagePull')
            s['state'] = { waiting: { reason: 'ImagePullBackOff', message: `Back-off pulling image "${String(s['image'])}"` } };
        }
        this.#store.replace('pods', namespace, name, { ...current, status: backOff } as KubeObject, { subresource: 'status' });
      }, this.pullBackOffMs);
      this.#timers.add(timer);
    }
  }

  #failureOf(image: string): PodFailure | undefined {
    const failure = this.#failures.get(image);
    if (failure || !this.images || this.images.has(image)) return failure;
    return {
      reason: 'ErrImagePull',
      message: `rpc error: code = NotFound desc = failed to pull and unpack image "${image}": failed to resolve reference "${image}": ${image}: not found`,
    };
  }
}

/** Whether a kubelet (kubelet.ts) took the pod. */
function boundToNode(pod: KubeObject): boolean {
  return typeof (pod['spec'] as Obj | undefined)?.['nodeName'] === 'string';
}

/** A stable made-up content digest of an image reference. */
function imageDigest(image: string): string {
  return `sha256:${createHash('sha256').update(image).digest('hex')}`;
}
