/**
 * A Service's endpoints, as upstream's EndpointSlice controller derives them (the pods its
 * selector matches that have an IP, each with `ready`, `serving` and `terminating`), and a
 * kube-proxy for one of its ports: a loopback TCP listener that sends each new connection to a
 * ready endpoint in turn, as a ClusterIP does. Like kube-proxy (and a load balancer following the
 * endpoints) it learns of changes late: it reads the endpoints every `syncMs`, so a pod that stopped
 * being ready, or began terminating, still gets connections for up to that long. A connection with
 * no ready endpoint, or to an endpoint that refuses it, is reset.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { podReady } from './rolling-update.js';
import { matches } from './selectors.js';
import type { ObjectStore } from './store.js';
import type { KubeObject } from './types.js';

/** One pod behind a Service port. */
export interface ServiceEndpoint {
  pod: string;
  ip: string;
  /** The pod's port the Service port targets. */
  port: number;
  /** Ready and not terminating: takes new connections. */
  ready: boolean;
  /** Ready, terminating or not. */
  serving: boolean;
  terminating: boolean;
}

type Obj = Record<string, unknown>;

/** The endpoints of port `port` (its name or number) of Service `service`. */
export function serviceEndpoints(store: ObjectStore, namespace: string, service: string, port: string | number): ServiceEndpoint[] {
  const svc = store.get('services', namespace, service);
  const spec = svc['spec'] as { selector?: Record<string, string>; ports?: Array<{ name?: string; port: number; targetPort?: number | string }> };
  const servicePort = spec.ports?.find((p) => p.name === port || p.port === port);
  if (!servicePort) throw new Error(`service ${namespace}/${service} has no port ${port}`);
  if (!spec.selector) return [];
  const selector = Object.entries(spec.selector).map(([key, value]) => ({ key, op: 'eq' as const, value }));
  return store
    .list('pods', namespace)
    .filter((pod) => matches(selector, pod.metadata.labels ?? {}))
    .flatMap((pod) => {
      const ip = (pod['status'] as Obj | undefined)?.['podIP'];
      const target = targetPort(pod, servicePort.targetPort ?? servicePort.port);
      if (typeof ip !== 'string' || target === undefined) return [];
      const terminating = pod.metadata.deletionTimestamp !== undefined;
      const serving = podReady(pod);
      return [{ pod: pod.metadata.name!, ip, port: target, ready: serving && !terminating, serving, terminating }];
    });
}

function targetPort(pod: KubeObject, target: number | string): number | undefined {
  if (typeof target === 'number') return target;
  const containers = ((pod['spec'] as Obj)['containers'] ?? []) as Array<{ ports?: Array<{ name?: string; containerPort: number }> }>;
  return containers.flatMap((c) => c.ports ?? []).find((p) => p.name === target)?.containerPort;
}

export interface ServiceProxyOptions {
  namespace: string;
  service: string;
  /** The Service port, by name or number. */
  port: string | number;
  /**
   * How often it reads the endpoints: changes reach it up to this late.
   * @default 1000
   */
  syncMs?: number;
  /**
   * Where this machine reaches an endpoint (a runtime may map container ports to ports of its own).
   * @default the endpoint's IP and port
   */
  reach?: (endpoint: ServiceEndpoint) => { host: string; port: number };
}

/** A connection the proxy made, for assertions on where traffic went. */
export interface ProxiedConnection {
  pod: string;
  at: number;
}

export class ServiceProxy {
  /** Every connection sent to a pod, in order. */
  readonly connections: ProxiedConnection[] = [];
  /** Connections reset because no endpoint was ready or the chosen one refused. */
  refused = 0;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly #timer: NodeJS.Timeout;
  #ready: ServiceEndpoint[] = [];
  #next = 0;

  private constructor(
    readonly store: ObjectStore,
    readonly options: ServiceProxyOptions,
  ) {
    this.#sync();
    this.#timer = setInterval(() => this.#sync(), options.syncMs ?? 1000);
    this.#server = createServer((socket) => this.#route(socket));
  }

  /** A proxy of the Service port on 127.0.0.1 and a free port. */
  static async start(store: ObjectStore, options: ServiceProxyOptions): Promise<ServiceProxy> {
    const proxy = new ServiceProxy(store, options);
    await new Promise<void>((resolve, reject) => {
      proxy.#server.once('error', reject);
      proxy.#server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  /** `127.0.0.1:<port>`: where the Service's clients connect. */
  get address(): string {
    return `127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** The endpoints it sends new connections to: the ready ones as of its last read. */
  get endpoints(): ServiceEndpoint[] {
    return [...this.#ready];
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #sync(): void {
    this.#ready = serviceEndpoints(this.store, this.options.namespace, this.options.service, this.options.port).filter((e) => e.ready);
  }

  #route(client: Socket): void {
    this.#sockets.add(client);
    client.once('close', () => this.#sockets.delete(client));
    const endpoint = this.#ready.length > 0 ? this.#ready[this.#next++ % this.#ready.length] : undefined;
    if (!endpoint) {
      this.refused++;
      client.resetAndDestroy();
      return;
    }
    client.pause();
    const upstream = connect(this.options.reach?.(endpoint) ?? { host: endpoint.ip, port: endpoint.port });
    this.#sockets.add(upstream);
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      this.connections.push({ pod: endpoint.pod, at: Date.now() });
      // Ends pass through (a half-close stays one); a reset of either side resets the other.
      client.pipe(upstream).pipe(client);
      client.resume();
    });
    upstream.on('error', () => {
      if (!connected) this.refused++;
      client.resetAndDestroy();
    });
    client.on('error', () => upstream.resetAndDestroy());
    upstream.once('close', () => this.#sockets.delete(upstream));
    client.once('close', () => upstream.destroy());
  }
}
