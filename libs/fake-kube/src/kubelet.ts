/**
 * A kubelet whose containers are what the test runs (host processes, typically): it binds the
 * pods it is given (a label selector) to its node, gives each a pod IP of its own on loopback
 * (127.42.x.y by default: a process of the pod listens there on its container ports, as in a pod's
 * network namespace, or on ports the runtime maps them to), starts it through the test's {@link PodRuntime}, and probes it as upstream's
 * kubelet does: the startup probe until it passes, then the readiness probe (HTTP GET), writing the
 * pod's Ready condition. A pod deleted gracefully (the store keeps it, terminating) is stopped as
 * upstream stops it: the preStop hook (a sleep), then SIGTERM, then SIGKILL once its grace period is
 * over; then the pod goes. Liveness probes and restarts are not simulated: a container that exits
 * leaves its pod not ready.
 *
 * Pod time is scaled by `secondMs`: probe periods, the preStop sleep and the grace period are in
 * seconds of the pod spec, each lasting `secondMs` here.
 */
import { request } from 'node:http';
import type { ObjectStore, StoreEvent } from './store.js';
import { matches, parseSelector } from './selectors.js';
import { timestamp, type KubeObject } from './types.js';

/** A pod's containers as the runtime runs them. */
export interface RunningPod {
  /** Asks the containers to stop (SIGTERM). */
  terminate(): void;
  /** Stops them at once (SIGKILL). */
  kill(): void;
  /** Resolves once they ended. */
  readonly exited: Promise<void>;
  /**
   * Where a container port listens on this machine, when not on the pod IP at that port (a
   * runtime sharing the machine with other tests may give each its own free port): container port →
   * port on the pod IP. Probes go there.
   */
  readonly ports?: ReadonlyMap<number, number>;
}

/** Runs pods: what a container runtime does for the kubelet. */
export interface PodRuntime {
  /** Starts the pod's containers, listening on `podIp`. */
  start(pod: KubeObject, podIp: string): Promise<RunningPod>;
}

export interface KubeletOptions {
  /** Runs the pods' containers. */
  runtime: PodRuntime;
  /** The pods this kubelet runs (a label selector); other pods are left to the simulated kubelet. */
  selector: string;
  /**
   * The node's name, written to the pods it runs (`spec.nodeName`).
   * @default 'fake-node'
   */
  nodeName?: string;
  /**
   * How long one second of the pod spec (probe periods, preStop sleeps, grace periods) lasts here.
   * @default 1000
   */
  secondMs?: number;
  /**
   * The pod IPs given out, in turn.
   * @default 127.42.0.1, 127.42.0.2, …
   */
  podIps?: () => string;
}

type Obj = Record<string, unknown>;

interface Probe {
  httpGet?: { path?: string; port: number | string };
  initialDelaySeconds?: number;
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
  successThreshold?: number;
}

interface Container {
  name: string;
  ports?: Array<{ name?: string; containerPort: number }>;
  startupProbe?: Probe;
  readinessProbe?: Probe;
  lifecycle?: { preStop?: { sleep?: { seconds: number }; exec?: { command?: string[] } } };
}

interface Managed {
  namespace: string;
  name: string;
  uid: string;
  ip: string;
  running?: RunningPod;
  /** Settles once the runtime started the pod (or failed to). */
  started?: Promise<void>;
  timers: Set<NodeJS.Timeout>;
  terminating: boolean;
  ready: boolean;
}

/** The seconds a preStop hook sleeps: `sleep: {seconds}` or `exec: [sleep, N]`; 0 for none. */
function preStopSeconds(container: Container): number {
  const hook = container.lifecycle?.preStop;
  if (hook?.sleep) return hook.sleep.seconds;
  const command = hook?.exec?.command ?? [];
  if (command.length === 2 && /(^|\/)sleep$/.test(command[0]!) && /^\d+(\.\d+)?$/.test(command[1]!)) return Number(command[1]);
  return 0;
}

export class Kubelet {
  readonly #store: ObjectStore;
  readonly #runtime: PodRuntime;
  readonly #selector: ReturnType<typeof parseSelector>;
  readonly #nodeName: string;
  readonly #secondMs: number;
  readonly #podIps: () => string;
  readonly #pods = new Map<string, Managed>();
  readonly #unsubscribe: () => void;
  #closed = false;

  constructor(store: ObjectStore, options: KubeletOptions) {
    this.#store = store;
    this.#runtime = options.runtime;
    this.#selector = parseSelector(options.selector);
    this.#nodeName = options.nodeName ?? 'fake-node';
    this.#secondMs = options.secondMs ?? 1000;
    let next = 0;
    this.#podIps =
      options.podIps ??
      (() => {
        next++;
        return `127.42.${Math.floor(next / 250)}.${(next % 250) + 1}`;
      });
    this.#unsubscribe = store.subscribe((event) => this.#onChange(event));
  }

  /** Stops every pod it runs at once (SIGKILL) and waits for them to end. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#unsubscribe();
    for (const pod of this.#pods.values()) for (const t of pod.timers) clearTimeout(t);
    await Promise.all(
      [...this.#pods.values()].map(async (pod) => {
        pod.running?.kill();
        await pod.running?.exited;
      }),
    );
    this.#pods.clear();
  }

  #onChange(event: StoreEvent): void {
    if (event.resource.group !== '' || event.resource.resource !== 'pods') return;
    const pod = event.object;
    const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const managed = this.#pods.get(key);
    if (event.type === 'ADDED' && !managed && typeof (pod['spec'] as Obj)['nodeName'] !== 'string' && matches(this.#selector, pod.metadata.labels ?? {})) {
      const entry: Managed = {
        namespace: pod.metadata.namespace!,
        name: pod.metadata.name!,
        uid: pod.metadata.uid!,
        ip: this.#podIps(),
        timers: new Set(),
        terminating: false,
        ready: false,
      };
      this.#pods.set(key, entry);
      entry.started = new Promise((resolve) =>
        setImmediate(() => {
          this.#start(entry).then(resolve, (error: unknown) => {
            resolve();
            // A pod deleted meanwhile takes its status writes with it; anything else is a bug to see.
            if (this.#pod(entry)) throw error;
          });
        }),
      );
    } else if (managed && managed.uid === pod.metadata.uid && event.type === 'DELETED' && !managed.terminating) {
      // Removed at once (a grace period of 0): its containers are killed.
      managed.terminating = true;
      for (const t of managed.timers) clearTimeout(t);
      this.#pods.delete(key);
      void managed.started?.then(() => managed.running?.kill());
    } else if (
      managed &&
      managed.uid === pod.metadata.uid &&
      event.type === 'MODIFIED' &&
      pod.metadata.deletionTimestamp !== undefined &&
      !managed.terminating
    ) {
      managed.terminating = true;
      void this.#stop(managed, pod);
    }
  }

  #pod(entry: Managed): KubeObject | undefined {
    const pod = this.#store.find('pods', entry.namespace, entry.name);
    return pod && pod.metadata.uid === entry.uid ? pod : undefined;
  }

  #containers(pod: KubeObject): Container[] {
    return ((pod['spec'] as Obj)['containers'] ?? []) as Container[];
  }

  async #start(entry: Managed): Promise<void> {
    const pod = this.#pod(entry);
    if (!pod || this.#closed) return;
    // Bound to this node: the scheduler's part, then the kubelet's.
    this.#store.replace('pods', entry.namespace, entry.name, { ...pod, spec: { ...(pod['spec'] as Obj), nodeName: this.#nodeName } });
    const started = timestamp();
    this.#writeStatus(entry, (status, containers) => {
      status['phase'] = 'Running';
      status['hostIP'] = '127.0.0.1';
      status['podIP'] = entry.ip;
      status['podIPs'] = [{ ip: entry.ip }];
      status['startTime'] = started;
      status['containerStatuses'] = containers.map((c) => ({
        name: c.name,
        ready: false,
        started: false,
        restartCount: 0,
        state: { running: { startedAt: started } },
      }));
    });
    try {
      entry.running = await this.#runtime.start(pod, entry.ip);
    } catch (error) {
      this.#writeStatus(entry, (status) => {
        status['containerStatuses'] = this.#containers(pod).map((c) => ({
          name: c.name,
          ready: false,
          started: false,
          restartCount: 0,
          state: { waiting: { reason: 'RunContainerError', message: String(error) } },
        }));
      });
      return;
    }
    void entry.running.exited.then(() => {
      if (entry.terminating) return;
      for (const t of entry.timers) clearTimeout(t);
      this.#setReady(entry, false, { terminated: { exitCode: 1, reason: 'Error', finishedAt: timestamp() } });
    });
    // One probe schedule per pod: that of its first container with a readiness probe.
    const container = this.#containers(pod).find((c) => c.readinessProbe) ?? this.#containers(pod)[0]!;
    this.#probe(entry, container, container.startupProbe, () => this.#probe(entry, container, container.readinessProbe, undefined));
  }

  /**
   * Runs `probe` on its period. A startup probe (`then` given) stops at its first success and
   * hands over to `then`; the readiness probe runs until the pod stops, setting Ready.
   */
  #probe(entry: Managed, container: Container, probe: Probe | undefined, then: (() => void) | undefined): void {
    if (!probe) {
      if (then) then();
      else this.#setReady(entry, true);
      return;
    }
    const period = (probe.periodSeconds ?? 10) * this.#secondMs;
    let failures = 0;
    let successes = 0;
    const run = async () => {
      if (this.#closed || entry.terminating) return;
      const ok = await this.#httpGet(entry, container, probe);
      if (this.#closed || entry.terminating) return;
      if (ok) {
        failures = 0;
        successes++;
        if (then) return then();
        if (successes >= (probe.successThreshold ?? 1)) this.#setReady(entry, true);
      } else {
        successes = 0;
        failures++;
        if (!then && failures >= (probe.failureThreshold ?? 3)) this.#setReady(entry, false);
      }
      this.#after(entry, period, run);
    };
    this.#after(entry, (probe.initialDelaySeconds ?? 0) * this.#secondMs, run);
  }

  #after(entry: Managed, ms: number, fn: () => Promise<void> | void): void {
    const timer = setTimeout(() => {
      entry.timers.delete(timer);
      void fn();
    }, ms);
    entry.timers.add(timer);
  }

  #httpGet(entry: Managed, container: Container, probe: Probe): Promise<boolean> {
    const get = probe.httpGet;
    if (!get) return Promise.resolve(true);
    const port = typeof get.port === 'number' ? get.port : container.ports?.find((p) => p.name === get.port)?.containerPort;
    if (port === undefined) return Promise.resolve(false);
    return new Promise((resolve) => {
      const req = request(
        {
          host: entry.ip,
          port: entry.running?.ports?.get(port) ?? port,
          path: get.path ?? '/',
          timeout: (probe.timeoutSeconds ?? 1) * this.#secondMs,
          agent: false,
        },
        (res) => {
          res.resume();
          // As upstream: any status from 200 to 399 passes.
          resolve((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 400);
        },
      );
      req.on('timeout', () => req.destroy());
      req.on('error', () => resolve(false));
      req.end();
    });
  }

  #setReady(entry: Managed, ready: boolean, state?: Obj): void {
    if (entry.ready === ready && !state) return;
    entry.ready = ready;
    this.#writeStatus(entry, (status) => {
      const flag = ready ? 'True' : 'False';
      status['conditions'] = [
        { type: 'Initialized', status: 'True' },
        { type: 'Ready', status: flag, ...(ready ? {} : { reason: 'ContainersNotReady' }) },
        { type: 'ContainersReady', status: flag },
        { type: 'PodScheduled', status: 'True' },
      ];
      for (const c of (status['containerStatuses'] ?? []) as Obj[]) {
        c['ready'] = ready;
        c['started'] = ready || c['started'] === true;
        if (state) c['state'] = state;
      }
    });
  }

  #writeStatus(entry: Managed, change: (status: Obj, containers: Container[]) => void): void {
    const pod = this.#pod(entry);
    if (!pod) return;
    const status = structuredClone((pod['status'] ?? {}) as Obj);
    change(status, this.#containers(pod));
    this.#store.replace('pods', entry.namespace, entry.name, { ...pod, status }, { subresource: 'status' });
  }

  /** Stops a pod deleted gracefully: preStop sleep, SIGTERM, SIGKILL at the end of the grace period; then removes it. */
  async #stop(entry: Managed, pod: KubeObject): Promise<void> {
    for (const t of entry.timers) clearTimeout(t);
    const graceMs = (pod.metadata.deletionGracePeriodSeconds ?? 30) * this.#secondMs;
    const deadline = Date.now() + graceMs;
    // A pod deleted while its runtime starts it is stopped once started.
    await entry.started;
    const sleep = (ms: number) => new Promise<void>((resolve) => this.#after(entry, Math.max(0, ms), resolve));
    const preStop = Math.max(...this.#containers(pod).map(preStopSeconds), 0) * this.#secondMs;
    if (entry.running) {
      await sleep(Math.min(preStop, graceMs));
      entry.running.terminate();
      const ended = await Promise.race([entry.running.exited.then(() => true), sleep(deadline - Date.now()).then(() => false)]);
      if (!ended) {
        entry.running.kill();
        await entry.running.exited;
      }
    }
    this.#pods.delete(`${entry.namespace}/${entry.name}`);
    if (!this.#closed && this.#pod(entry)) this.#store.delete('pods', entry.namespace, entry.name, { gracePeriodSeconds: 0 });
  }
}
