/**
 * A loopback HTTP server that answers the gateway routes the CLI calls with fixed resources and
 * records each request (method, URL, credential), so tests see what a command actually sent.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  /** Path and query. */
  url: string;
  apiKey: string | undefined;
}

export const TENANT_ID = '7b0c9a52-5a43-4b55-9a53-6a3f4a1e0c11';
export const DEPLOYMENT_ID = '0f9d3c52-1d6e-4b1c-8f3a-2c4b5d6e7f80';
export const REVISION_ID = '5e4d3c2b-1a09-4f8e-9d7c-6b5a4f3e2d1c';
export const NEW_DEPLOYMENT_ID = '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d';
export const KEY_ID = '3c2b1a09-8f7e-4d6c-9b5a-4f3e2d1c0b9a';
/** A line as an agent server's pino logger writes it. */
export const PINO_LINE = JSON.stringify({ level: 30, time: '2025-03-04T12:01:02.000Z', service: 'agent-server', port: 1234, msg: 'server listening' });

function deployment(id: string, name: string) {
  return {
    id,
    tenant_id: TENANT_ID,
    name,
    source: 'internal_source',
    source_config: { deployment_type: 'dev' },
    source_revision_config: {},
    status: 'READY',
    latest_revision_id: REVISION_ID,
    active_revision_id: REVISION_ID,
    secrets: [],
    deployment_url: `http://gateway.invalid/d/${id}`,
    created_at: '2025-03-04T12:00:00.000Z',
    updated_at: '2025-03-04T12:00:00.000Z',
  };
}

const apiKey = {
  id: KEY_ID,
  tenant_id: TENANT_ID,
  name: 'ci',
  role: 'member',
  prefix: 'brt_key_abcd',
  created_at: '2025-03-04T12:00:00.000Z',
  last_used_at: null,
  expires_at: null,
  revoked_at: null,
};
const tenant = { tenant_id: TENANT_ID, name: 'acme', is_system: false, created_at: '2025-03-04T12:00:00.000Z' };

/** Answers like a gateway whose tenant has the deployment `my-custom` (and those `berth deploy` creates). */
class Routes {
  private readonly deployments = [deployment(DEPLOYMENT_ID, 'my-custom')];

  /** Status and JSON body (undefined: none). */
  answer(method: string, url: URL): [number, unknown] {
    const path = url.pathname;
    const byId = /^\/v2\/deployments\/([^/]+)(\/[a-z]+)?$/.exec(path);
    if (byId) return this.deployment(method, byId[1]!, byId[2] ?? '');
    const route = `${method} ${path.replaceAll(TENANT_ID, ':tenant').replaceAll(KEY_ID, ':key')}`;
    switch (route) {
      case 'GET /v2/deployments': {
        const contains = url.searchParams.get('name_contains') ?? '';
        return [200, { resources: this.deployments.filter((d) => d.name.includes(contains)), offset: this.deployments.length }];
      }
      case 'POST /v2/deployments': {
        const created = deployment(NEW_DEPLOYMENT_ID, 'fresh');
        this.deployments.push(created);
        return [201, created];
      }
      case 'GET /v1/me':
        return [200, { tenant_id: TENANT_ID, tenant_name: 'acme', role: 'admin' }];
      case 'GET /v1/tenants/:tenant/api-keys':
        return [200, [apiKey]];
      case 'POST /v1/tenants/:tenant/api-keys':
        return [201, { ...apiKey, key: 'brt_key_abcdefghijklmnopqrstuvwxyz012345' }];
      case 'DELETE /v1/tenants/:tenant/api-keys/:key':
        return [200, { ...apiKey, revoked_at: '2025-03-04T12:02:00.000Z' }];
      case 'GET /v1/tenants':
        return [200, { resources: [tenant], offset: 1 }];
      case 'POST /v1/tenants':
        return [201, { tenant, api_key: { id: KEY_ID, key: 'brt_key_abcdefghijklmnopqrstuvwxyz012345' } }];
      case 'POST /v2/auth/login':
        return [200, { auth_id: 'a1', url: `${url.origin}/login/a1`, expires_at: new Date(Date.now() + 60_000).toISOString() }];
      case 'GET /v2/auth/wait/a1':
        return [200, { status: 'not_found', token: null }];
      case 'GET /readyz':
        return [200, { status: 'ok', checks: { postgres: { status: 'ok' } } }];
      default:
        return [404, { detail: `no route ${route}` }];
    }
  }

  private deployment(method: string, id: string, sub: string): [number, unknown] {
    const found = this.deployments.find((d) => d.id === id);
    if (!found) return [404, { detail: `Deployment ID ${id} not found.` }];
    switch (`${method} ${sub}`) {
      case 'GET ':
      case 'PATCH ':
        return [200, found];
      case 'DELETE ':
        return [204, undefined];
      case 'GET /revisions':
        return [200, { resources: [revision(id)], offset: 1 }];
      case 'GET /logs':
        return [
          200,
          {
            logs: [{ id: 1, timestamp: '2025-03-04T12:01:02.000Z', level: 'info', message: PINO_LINE, type: 'deploy' }],
            next_offset: 1,
            revision_id: REVISION_ID,
          },
        ];
      case 'POST /upload':
        return [200, { object_path: 'uploads/fresh.tgz', revision_id: REVISION_ID }];
      default:
        return [404, { detail: `no route ${method} ${sub}` }];
    }
  }
}

function revision(deploymentId: string) {
  const at = '2025-03-04T12:00:00.000Z';
  return {
    id: REVISION_ID,
    deployment_id: deploymentId,
    status: 'DEPLOYED',
    source: 'internal_source',
    source_revision_config: {},
    status_message: '',
    created_at: at,
    updated_at: at,
  };
}

export class RecordingGateway {
  readonly requests: RecordedRequest[] = [];
  private server: Server | undefined;
  private routes = new Routes();
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Read the body (an upload) to its end before answering.
    for await (const chunk of req) void chunk;
    const url = new URL(req.url ?? '/', this.url);
    const key = req.headers['x-api-key'];
    this.requests.push({ method: req.method ?? '', url: `${url.pathname}${url.search}`, apiKey: typeof key === 'string' ? key : undefined });
    const [status, body] = this.routes.answer(req.method ?? '', url);
    res.writeHead(status, body === undefined ? {} : { 'content-type': 'application/json' });
    res.end(body === undefined ? undefined : JSON.stringify(body));
  }

  /** Forgets the requests recorded so far and the deployments created. */
  reset(): void {
    this.requests.length = 0;
    this.routes = new Routes();
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}
