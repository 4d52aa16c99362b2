/**
 * The fake API server: node:http on 127.0.0.1, the real REST paths (`/api/v1/...`,
 * `/apis/{group}/{version}/...`), discovery, and `Status` objects for failures, so that
 * `@kubernetes/client-node` and helm work against it unchanged. Every request served is recorded.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { discoveryDocument } from './discovery.js';
import { DeploymentController, type DeploymentControllerOptions } from './deployment-controller.js';
import { KubeApiError } from './errors.js';
import { PodController, type PodControllerOptions } from './pod-controller.js';
import { PodExec, type PodExecOptions } from './pod-exec.js';
import { PodLogs } from './pod-logs.js';
import { decodeProtobuf, PROTOBUF_CONTENT_TYPE } from './protobuf.js';
import { builtinResources } from './resources.js';
import { ObjectStore } from './store.js';
import { rejectUpgrade } from './websocket.js';
import { apiVersionOf, type KubeObject, type ResourceType } from './types.js';

export interface FakeKubeOptions {
  /**
   * Namespaces that exist from the start (others must be created, as on a real cluster).
   * @default ['default', 'kube-system']
   */
  namespaces?: string[];
  /** A bearer token every request must carry; unset, any caller is let in. */
  token?: string;
  /**
   * The resources served.
   * @default builtinResources() (namespaces, secrets, configmaps, services, pods, serviceaccounts, persistentvolumeclaims, apps/v1 deployments, networking.k8s.io/v1 networkpolicies and ingresses, rbac roles and rolebindings, policy/v1 poddisruptionbudgets, batch/v1 jobs)
   */
  resources?: ResourceType[];
  /** The simulated Deployment controller's settings. */
  rollouts?: DeploymentControllerOptions;
  /** The simulated kubelet's settings (pods created through the API). */
  pods?: PodControllerOptions;
  /** Where `pods/exec` runs commands (host processes in a scratch folder per pod: see `PodExec`). */
  exec?: PodExecOptions;
}

/** A request the fake answered, for assertions on what a client sent. */
export interface RecordedRequest {
  method: string;
  /** The path without the query string. */
  path: string;
  query: Record<string, string>;
  contentType: string | undefined;
  /** The parsed JSON body, if any. */
  body: unknown;
  status: number;
}

interface Route {
  type: ResourceType;
  namespace: string | undefined;
  name: string | undefined;
  subresource: string | undefined;
}

class Reply {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly contentType = 'application/json',
  ) {}
}

const MAX_BODY = 3 * 1024 * 1024;

export class FakeKube {
  readonly store: ObjectStore;
  readonly rollouts: DeploymentController;
  readonly pods: PodController;
  readonly podLogs: PodLogs;
  /** The fake container runtime behind `pods/{name}/exec`. */
  readonly exec: PodExec;
  readonly requests: RecordedRequest[] = [];
  readonly #server: Server;
  readonly #token: string | undefined;
  #url = '';

  private constructor(options: FakeKubeOptions) {
    this.store = new ObjectStore(options.resources ?? builtinResources());
    this.podLogs = new PodLogs(this.store);
    this.rollouts = new DeploymentController(this.store, this.podLogs, options.rollouts);
    this.pods = new PodController(this.store, this.podLogs, options.pods);
    this.exec = new PodExec(this.store, options.exec);
    this.#token = options.token;
    for (const ns of options.namespaces ?? ['default', 'kube-system']) {
      this.store.create('namespaces', undefined, { metadata: { name: ns } });
    }
    this.#server = createServer((req, res) => void this.#handle(req, res));
    this.#server.on('upgrade', (req: IncomingMessage, socket: Duplex) => this.#upgrade(req, socket));
  }

  /** Starts a fake API server on 127.0.0.1 and a free port. */
  static async start(options: FakeKubeOptions = {}): Promise<FakeKube> {
    const fake = new FakeKube(options);
    await new Promise<void>((resolve, reject) => {
      fake.#server.once('error', reject);
      fake.#server.listen(0, '127.0.0.1', () => resolve());
    });
    fake.#url = `http://127.0.0.1:${(fake.#server.address() as AddressInfo).port}`;
    return fake;
  }

  /** `http://127.0.0.1:<port>`. */
  get url(): string {
    return this.#url;
  }

  /**
   * Arguments for client-node's `KubeConfig.loadFromOptions` that point at this server (plain
   * data, so this package does not depend on client-node).
   */
  kubeConfigOptions(namespace = 'default'): {
    clusters: Array<{ name: string; server: string; skipTLSVerify: boolean }>;
    users: Array<{ name: string; token?: string }>;
    contexts: Array<{ name: string; cluster: string; user: string; namespace: string }>;
    currentContext: string;
  } {
    return {
      clusters: [{ name: 'fake-kube', server: this.#url, skipTLSVerify: true }],
      users: [{ name: 'fake-kube', ...(this.#token ? { token: this.#token } : {}) }],
      contexts: [{ name: 'fake-kube', cluster: 'fake-kube', user: 'fake-kube', namespace }],
      currentContext: 'fake-kube',
    };
  }

  /** Recorded requests that match, e.g. `requestsTo('PUT', /deployments\/web$/)`. */
  requestsTo(method: string, path: RegExp | string): RecordedRequest[] {
    return this.requests.filter((r) => r.method === method && (typeof path === 'string' ? r.path === path : path.test(r.path)));
  }

  clearRequests(): void {
    this.requests.length = 0;
  }

  async close(): Promise<void> {
    this.rollouts.close();
    this.pods.close();
    this.podLogs.close();
    this.exec.close();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake-kube');
    const query = Object.fromEntries(url.searchParams);
    const contentType = req.headers['content-type']?.split(';')[0]?.trim();
    let body: unknown;
    let reply: Reply;
    try {
      const raw = await readBody(req);
      if (raw.length > 0 && contentType === PROTOBUF_CONTENT_TYPE) body = decodeProtobuf(raw);
      else if (raw.length > 0) {
        try {
          // Server-side apply bodies (application/apply-patch+yaml) are JSON too from every client we serve.
          body = JSON.parse(raw.toString('utf8'));
        } catch {
          throw KubeApiError.badRequest('the request body is not valid JSON');
        }
      }
      if (this.#token !== undefined && req.headers.authorization !== `Bearer ${this.#token}`) {
        throw new KubeApiError(401, 'Unauthorized', 'Unauthorized');
      }
      reply = this.#dispatch(req.method ?? 'GET', url.pathname, url.searchParams, contentType, body);
    } catch (error) {
      const failure = error instanceof KubeApiError ? error : new KubeApiError(500, 'InternalError', `fake-kube: ${String(error)}`);
      reply = new Reply(failure.code, failure.toStatus());
    }
    this.requests.push({ method: req.method ?? 'GET', path: url.pathname, query, contentType, body, status: reply.status });
    const text = reply.contentType === 'application/json' ? JSON.stringify(reply.body) : String(reply.body);
    res.writeHead(reply.status, { 'content-type': reply.contentType, 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  /** WebSocket upgrades: only `pods/{name}/exec` is served this way. */
  #upgrade(req: IncomingMessage, socket: Duplex): void {
    const url = new URL(req.url ?? '/', 'http://fake-kube');
    const exec = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/exec$/.exec(url.pathname);
    let status: number;
    if (this.#token !== undefined && req.headers.authorization !== `Bearer ${this.#token}`) {
      status = 401;
      rejectUpgrade(socket, 401, JSON.stringify(new KubeApiError(401, 'Unauthorized', 'Unauthorized').toStatus()));
    } else if (!exec) {
      status = 404;
      rejectUpgrade(socket, 404, JSON.stringify(KubeApiError.routeNotFound().toStatus()));
    } else {
      status = this.exec.handle(req, socket, decodeURIComponent(exec[1]!), decodeURIComponent(exec[2]!), url.searchParams);
    }
    const query: Record<string, string> = {};
    for (const [k, v] of url.searchParams) query[k] = k in query ? `${query[k]} ${v}` : v;
    this.requests.push({ method: 'GET', path: url.pathname, query, contentType: undefined, body: undefined, status });
  }

  #dispatch(method: string, path: string, params: URLSearchParams, contentType: string | undefined, body: unknown): Reply {
    const segments = path
      .split('/')
      .filter((s) => s.length > 0)
      .map(decodeURIComponent);
    if (method === 'GET') {
      const discovery = discoveryDocument(this.store, this.#url.slice('http://'.length), segments);
      if (discovery !== undefined) return new Reply(200, discovery);
    }
    const route = this.#route(segments);
    const dryRun = params.get('dryRun') === 'All';
    const labelSelector = params.get('labelSelector') ?? undefined;
    const fieldSelector = params.get('fieldSelector') ?? undefined;
    const { type, namespace, name, subresource } = route;

    if (subresource === 'log') {
      if (method !== 'GET' || !(type.group === '' && type.resource === 'pods')) throw KubeApiError.routeNotFound();
      this.store.get(type, namespace, name!);
      let text = this.podLogs.get(namespace!, name!);
      const tail = params.get('tailLines');
      if (tail !== null) {
        const lines = text.split('\n');
        if (lines[lines.length - 1] === '') lines.pop();
        text = lines.slice(-Number(tail)).join('\n') + (lines.length > 0 ? '\n' : '');
      }
      return new Reply(200, text, 'text/plain');
    }
    if (subresource === 'exec' && type.group === '' && type.resource === 'pods') throw KubeApiError.badRequest('Upgrade request required');
    if (subresource !== undefined && (subresource !== 'status' || !type.statusSubresource)) throw KubeApiError.routeNotFound();
    const write = { dryRun, ...(subresource === 'status' ? { subresource: 'status' as const } : {}) };

    if (name === undefined) {
      if (method === 'GET') {
        if (params.get('watch') === 'true' || params.get('watch') === '1') {
          throw new KubeApiError(405, 'MethodNotAllowed', 'fake-kube does not serve watches; poll with list instead');
        }
        const items = this.store.list(type, namespace, { labelSelector, fieldSelector }).map(({ apiVersion: _a, kind: _k, ...item }) => item);
        return new Reply(200, { kind: `${type.kind}List`, apiVersion: apiVersionOf(type), metadata: { resourceVersion: this.store.resourceVersion }, items });
      }
      if (method === 'POST' && (namespace !== undefined || !type.namespaced)) {
        return new Reply(dryRun ? 200 : 201, this.store.create(type, namespace, asObject(body), write));
      }
      if (method === 'DELETE' && (namespace !== undefined || !type.namespaced)) {
        const items = this.store.deleteCollection(type, namespace, { labelSelector, fieldSelector, dryRun });
        return new Reply(200, { kind: `${type.kind}List`, apiVersion: apiVersionOf(type), metadata: { resourceVersion: this.store.resourceVersion }, items });
      }
      throw new KubeApiError(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`);
    }

    switch (method) {
      case 'GET':
        return new Reply(200, this.store.get(type, namespace, name));
      case 'PUT':
        return new Reply(200, this.store.replace(type, namespace, name, asObject(body), write));
      case 'PATCH':
        if (contentType === 'application/apply-patch+yaml') {
          const fieldManager = params.get('fieldManager');
          if (!fieldManager) throw KubeApiError.badRequest('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch');
          const existed = this.store.find(type, namespace, name) !== undefined;
          return new Reply(existed || dryRun ? 200 : 201, this.store.apply(type, namespace, name, body, { ...write, fieldManager }));
        }
        return new Reply(200, this.store.patch(type, namespace, name, contentType ?? '', body, write));
      case 'DELETE': {
        if (subresource !== undefined) break;
        // DeleteOptions come as the query or as the body (client-node sends the body).
        const grace = params.get('gracePeriodSeconds') ?? (body as { gracePeriodSeconds?: unknown } | undefined)?.gracePeriodSeconds;
        const deleted = this.store.delete(type, namespace, name, {
          ...write,
          ...(grace !== undefined && grace !== null ? { gracePeriodSeconds: Number(grace) } : {}),
        });
        if (type.deleteReturnsObject) return new Reply(200, deleted);
        const details = { name, ...(type.group ? { group: type.group } : {}), kind: type.resource, uid: deleted.metadata.uid };
        return new Reply(200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details });
      }
    }
    throw new KubeApiError(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`);
  }

  /** `/api/v1/[namespaces/{ns}/]{resource}[/{name}[/{subresource}]]`, and the `/apis/{group}/{version}` twin. */
  #route(segments: string[]): Route {
    let group: string;
    let version: string | undefined;
    let rest: string[];
    if (segments[0] === 'api') {
      group = '';
      version = segments[1];
      rest = segments.slice(2);
    } else if (segments[0] === 'apis') {
      group = segments[1] ?? '';
      version = segments[2];
      rest = segments.slice(3);
    } else {
      throw KubeApiError.routeNotFound();
    }
    if (version === undefined || rest.length === 0) throw KubeApiError.routeNotFound();
    const namespaced = rest[0] === 'namespaces' && rest.length >= 3 ? this.store.lookup(group, version, rest[2]!) : undefined;
    if (namespaced?.namespaced && rest.length <= 5) {
      return { type: namespaced, namespace: rest[1], name: rest[3], subresource: rest[4] };
    }
    const type = this.store.lookup(group, version, rest[0]!);
    if (!type || rest.length > 3) throw KubeApiError.routeNotFound();
    return { type, namespace: undefined, name: rest[1], subresource: rest[2] };
  }
}

function asObject(body: unknown): KubeObject {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw KubeApiError.badRequest('the request body must be a JSON object');
  return body as KubeObject;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) throw new KubeApiError(413, 'RequestEntityTooLarge', 'the request is too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
