/**
 * The sandboxes API answered by the gateway alone: authentication (HTTP and the WebSocket
 * upgrade), every malformed request a 422 naming the field (unsupported LangSmith features
 * included, never ignored), and a 503 with Retry-After saying what to do while no sandbox-manager
 * is configured or while it is unreachable — the rest of the gateway unaffected.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import WebSocket from 'ws';
import { start, type RunningGateway } from '../../index.js';
import { testGatewayConfig } from '../../__tests__/test-config.js';

type Json = Record<string, any>;

let testDb: TestDatabase;
/** No sandbox-manager configured. */
let gateway: RunningGateway;
/** A sandbox-manager address nothing listens on. */
let unreachable: RunningGateway;
let key: string;

const SANDBOX_ID = '0193a6c4-7b1e-7c3d-8e9f-0123456789ab';

async function call(base: string, path: string, init: { method?: string; json?: unknown; headers?: Record<string, string>; body?: string } = {}) {
  const res = await fetch(`${base}/api/v2/sandboxes${path}`, {
    method: init.method ?? (init.json === undefined && init.body === undefined ? 'GET' : 'POST'),
    headers: { 'x-api-key': key, ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}), ...init.headers },
    body: init.json !== undefined ? JSON.stringify(init.json) : init.body,
  });
  const text = await res.text();
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (text ? JSON.parse(text) : undefined) as Json };
}

/** The HTTP status a WebSocket upgrade is refused with (101 when it opened). */
function upgradeStatus(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url.replace(/^http/, 'ws'), { headers });
    ws.on('open', () => {
      ws.close();
      resolve({ status: 101, body: '' });
    });
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.on('error', reject);
  });
}

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

const template = { name: 'py', image: 'python:3.12-slim', resources: { cpu: '500m', memory: '512Mi', storage: '2Gi' } };

beforeAll(async () => {
  testDb = await createTestDatabase('gw_sbx_req');
  const config = testGatewayConfig(testDb.url, '127.0.0.1:1');
  gateway = await start(config, silentLogger());
  unreachable = await start(
    { ...config, migrate: false, services: { ...config.services, 'sandbox-manager': `127.0.0.1:${await closedPort()}` } },
    silentLogger(),
  );
  const tenant = await gateway.store.createTenant({ name: 'sbx' });
  key = (await gateway.store.createApiKey({ tenantId: tenant.id, name: 'sbx', role: 'member' })).key;
}, 60_000);
afterAll(async () => {
  await gateway?.close();
  await unreachable?.close();
  await testDb?.drop();
});

describe('authentication', () => {
  it('answers 401 without a key or with a wrong one, before anything else', async () => {
    for (const headers of [{ 'x-api-key': '' }, { 'x-api-key': 'brt_wrong' }]) {
      expect((await call(gateway.url, '/templates', { json: template, headers })).status).toBe(401);
      expect((await call(gateway.url, '/boxes', { headers })).status).toBe(401);
      expect((await call(gateway.url, `/dataplane/${SANDBOX_ID}/execute`, { json: { command: 'true' }, headers })).status).toBe(401);
    }
  });

  it('takes the key header in any case (X-API-Key, as the registries client spells it)', async () => {
    const res = await fetch(`${gateway.url}/api/v2/sandboxes/registries`, { headers: { 'X-API-Key': key } });
    expect(res.status).toBe(503); // past authentication
  });

  it('refuses a WebSocket upgrade without a valid key with HTTP 401, and one at an unknown path with 404', async () => {
    const url = `${gateway.url}/api/v2/sandboxes/dataplane/${SANDBOX_ID}/execute/ws`;
    expect((await upgradeStatus(url, {})).status).toBe(401);
    expect((await upgradeStatus(url, { 'x-api-key': 'brt_wrong' })).status).toBe(401);
    expect((await upgradeStatus(`${gateway.url}/api/v2/sandboxes/dataplane/${SANDBOX_ID}/other/ws`, { 'x-api-key': key })).status).toBe(404);
  });

  it('answers a plain GET of the WebSocket endpoint with 426', async () => {
    const res = await call(gateway.url, `/dataplane/${SANDBOX_ID}/execute/ws`);
    expect(res.status).toBe(426);
  });
});

describe('validation', () => {
  const invalid = async (path: string, json: unknown, method = 'POST') => {
    const res = await call(gateway.url, path, { json, method });
    expect(res.status).toBe(422);
    return res.body.detail as { loc: (string | number)[]; msg: string; type: string }[];
  };

  it('names a malformed quantity, a missing image and an unknown field of a template', async () => {
    expect(await invalid('/templates', { ...template, resources: { cpu: 'lots' } })).toEqual([
      { loc: ['body', 'resources', 'cpu'], msg: expect.stringMatching(/"lots" is not a quantity.*500m/), type: 'value_error' },
    ]);
    expect(await invalid('/templates', { name: 'py' })).toEqual([{ loc: ['body', 'image'], msg: 'Field required', type: 'missing' }]);
    expect(await invalid('/templates', { ...template, colour: 'blue' })).toEqual([
      { loc: ['body', 'colour'], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' },
    ]);
    expect(await invalid('/templates', { ...template, volumes: [{ volume_name: 'data', mount_path: 'data' }] })).toEqual([
      expect.objectContaining({ loc: ['body', 'volumes', 0, 'mount_path'], msg: 'mount_path must be an absolute path' }),
    ]);
    expect(await invalid('/templates/py', { resources: { memory: '1Gb' } }, 'PATCH')).toEqual([
      expect.objectContaining({ loc: ['body', 'resources', 'memory'] }),
    ]);
    expect(await invalid('/volumes', { name: 'data', size: '10 GB' })).toEqual([expect.objectContaining({ loc: ['body', 'size'] })]);
    expect(await invalid('/pools', { name: 'p', template_name: 'py', replicas: 101 })).toEqual([expect.objectContaining({ loc: ['body', 'replicas'] })]);
  });

  it('refuses LangSmith features Berth does not have, naming the field', async () => {
    const cases: [Json, (string | number)[]][] = [
      [{ mount_config: { mounts: [] } }, ['body', 'mount_config']],
      [{ access_delegation: { mode: 'INHERIT' } }, ['body', 'access_delegation']],
      [{ persistent: true }, ['body', 'persistent']],
      [{ preserve_memory_on_stop: true }, ['body', 'preserve_memory_on_stop']],
      [{ restore_memory: true }, ['body', 'restore_memory']],
      [
        { proxy_config: { rules: [{ name: 'aws', type: 'aws', match_hosts: ['*.amazonaws.com'], aws: { role_arn: 'x' } }] } },
        ['body', 'proxy_config', 'rules', 0, 'type'],
      ],
      [
        { proxy_config: { rules: [{ name: 'x', match_hosts: ['a.com'], headers: [{ name: 'Authorization', type: 'workspace_secret', value: '{KEY}' }] }] } },
        ['body', 'proxy_config', 'rules', 0, 'headers', 0, 'type'],
      ],
      [{ proxy_config: { rules: [], callbacks: [{ url: 'https://x' }] } }, ['body', 'proxy_config', 'callbacks']],
    ];
    for (const [extra, loc] of cases) {
      const detail = await invalid('/boxes', { snapshot_id: SANDBOX_ID, ...extra });
      expect({ extra, detail }).toEqual({
        extra,
        detail: expect.arrayContaining([expect.objectContaining({ loc, msg: expect.stringMatching(/not supported by Berth/) })]),
      });
    }
  });

  it('accepts what the client sends for flags left off and empty rule lists', async () => {
    const res = await call(gateway.url, '/boxes', {
      json: { snapshot_id: SANDBOX_ID, wait_for_ready: false, persistent: false, proxy_config: { rules: [], access_control: { allow_list: ['example.com'] } } },
    });
    expect(res.status).toBe(503); // valid: it got as far as the (missing) sandbox-manager
  });

  it('checks TTLs like the client (0 or multiples of 60) and allows one source only', async () => {
    expect(await invalid('/boxes', { snapshot_id: SANDBOX_ID, idle_ttl_seconds: 90 })).toEqual([
      expect.objectContaining({ loc: ['body', 'idle_ttl_seconds'], msg: 'idle_ttl_seconds must be 0 or a multiple of 60' }),
    ]);
    expect(await invalid('/boxes', { snapshot_id: SANDBOX_ID, ttl_seconds: -60 })).toEqual([expect.objectContaining({ loc: ['body', 'ttl_seconds'] })]);
    expect(await invalid('/boxes', { snapshot_id: SANDBOX_ID, template_name: 'py' })).toEqual([expect.objectContaining({ loc: ['body', 'template_name'] })]);
    expect(await invalid('/snapshots', { name: 's', docker_image: 'busybox' })).toEqual([
      { loc: ['body', 'fs_capacity_bytes'], msg: 'Field required', type: 'missing' },
    ]);
  });

  it('takes stop and start with an empty JSON body or none, and refuses fields there', async () => {
    expect((await call(gateway.url, '/boxes/b1/stop', { json: {} })).status).toBe(503);
    expect((await call(gateway.url, '/boxes/b1/start', { method: 'POST' })).status).toBe(503);
    expect(await invalid('/boxes/b1/start', { force: true })).toEqual([expect.objectContaining({ loc: ['body', 'force'] })]);
  });

  it('checks data-plane requests before calling the manager', async () => {
    expect(await invalid(`/dataplane/${SANDBOX_ID}/execute`, { command: 'ls', env: { A: '1' }, run_config: { work_dir: '/' } })).toEqual([
      expect.objectContaining({ loc: ['body', 'run_config'] }),
    ]);
    expect(await invalid(`/dataplane/${SANDBOX_ID}/execute`, { cmd: 'ls' })).toEqual(
      expect.arrayContaining([expect.objectContaining({ loc: ['body', 'command'] }), expect.objectContaining({ loc: ['body', 'cmd'] })]),
    );
    const notMultipart = await call(gateway.url, `/dataplane/${SANDBOX_ID}/upload?path=/a`, { body: 'x', headers: { 'content-type': 'text/plain' } });
    expect(notMultipart).toMatchObject({ status: 415, body: { detail: { error: 'WriteError', message: expect.stringMatching(/multipart\/form-data/) } } });
    const form = new FormData();
    form.append('other', new Blob(['x']), 'file');
    const res = await fetch(`${gateway.url}/api/v2/sandboxes/dataplane/${SANDBOX_ID}/upload?path=/a`, {
      method: 'POST',
      headers: { 'x-api-key': key },
      body: form,
    });
    expect({ status: res.status, body: await res.json() }).toEqual({ status: 422, body: { detail: [expect.objectContaining({ loc: ['body', 'file'] })] } });
  });
});

describe('without a sandbox-manager', () => {
  it('answers 503 with Retry-After and how to enable sandboxes; the rest of the gateway works', async () => {
    for (const [path, json] of [
      ['/templates', template],
      ['/boxes', undefined],
    ] as const) {
      const res = await call(gateway.url, path, json === undefined ? {} : { json });
      expect({ path, ...res }).toEqual({ path, status: 503, retryAfter: '5', body: { detail: expect.stringMatching(/SANDBOX_MANAGER_GRPC_ADDRESS/) } });
    }
    const me = await fetch(`${gateway.url}/v1/me`, { headers: { 'x-api-key': key } });
    expect(me.status).toBe(200);
  });

  it('answers the data plane in the typed form the client reads', async () => {
    const unavailable = {
      status: 503,
      retryAfter: '5',
      body: { detail: { error: 'Unavailable', message: expect.stringMatching(/SANDBOX_MANAGER_GRPC_ADDRESS/) } },
    };
    expect(await call(gateway.url, `/dataplane/${SANDBOX_ID}/download?path=/etc/hostname`)).toEqual(unavailable);
    expect(await call(gateway.url, `/dataplane/${SANDBOX_ID}/execute`, { json: { command: 'true' } })).toEqual(unavailable);
    const form = new FormData();
    form.append('file', new Blob(['hello']), 'file');
    const res = await fetch(`${gateway.url}/api/v2/sandboxes/dataplane/${SANDBOX_ID}/upload?path=/a`, {
      method: 'POST',
      headers: { 'x-api-key': key },
      body: form,
    });
    expect({ status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() }).toEqual(unavailable);
  });

  it('refuses the WebSocket upgrade with a 503 the client retries', async () => {
    const res = await upgradeStatus(`${gateway.url}/api/v2/sandboxes/dataplane/${SANDBOX_ID}/execute/ws`, { 'x-api-key': key });
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body)).toEqual({ detail: expect.stringMatching(/not enabled/) });
  });

  it('answers 503 with Retry-After while a configured sandbox-manager is unreachable', async () => {
    const tenant = await unreachable.store.createTenant({ name: 'sbx2' });
    const otherKey = (await unreachable.store.createApiKey({ tenantId: tenant.id, name: 'k', role: 'member' })).key;
    const res = await fetch(`${unreachable.url}/api/v2/sandboxes/templates`, { headers: { 'x-api-key': otherKey } });
    expect({ status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() }).toEqual({
      status: 503,
      retryAfter: '5',
      body: { detail: 'an internal service is unavailable, retry shortly' },
    });
  });
});
