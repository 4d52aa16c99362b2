/**
 * The sandboxes API against a real sandbox-manager (its own Postgres schema) on a platform where
 * no sandbox can run (no driver): what needs no engine works — registries and volumes by name,
 * tenant isolation, 404s and 409s, empty listings through the `langsmith/sandbox` client — and
 * everything that would start or pull something answers 503 with Retry-After and the manager's
 * own words on enabling sandboxes, through the REST routes, the data plane and the client.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { silentLogger } from '@berth/log';
import { start as startSandboxManager, type RunningSandboxManager } from '@berth/sandbox-manager';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { SandboxClient } from 'langsmith/sandbox';
import WebSocket from 'ws';
import { start, type RunningGateway } from '../../index.js';
import { testGatewayConfig } from '../../__tests__/test-config.js';

type Json = Record<string, any>;

let testDb: TestDatabase;
let manager: RunningSandboxManager;
let gateway: RunningGateway;
let keyA: string;
let keyB: string;

const UNKNOWN_ID = '0193a6c4-7b1e-7c3d-8e9f-0123456789ab';

async function call(path: string, init: { method?: string; json?: unknown; key?: string } = {}) {
  const res = await fetch(`${gateway.url}/api/v2/sandboxes${path}`, {
    method: init.method ?? (init.json === undefined ? 'GET' : 'POST'),
    headers: { 'x-api-key': init.key ?? keyA, ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
  });
  const text = await res.text();
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (text ? JSON.parse(text) : undefined) as Json };
}

beforeAll(async () => {
  testDb = await createTestDatabase('gw_sbx_mgr');
  manager = await startSandboxManager(
    {
      databaseUrl: testDb.url,
      secretKey: Buffer.alloc(32, 7).toString('base64'),
      grpcHost: '127.0.0.1',
      grpcPort: 0,
      logLevel: 'silent',
      sandboxes: { background: false },
    },
    silentLogger(),
  );
  const config = testGatewayConfig(testDb.url, '127.0.0.1:1');
  gateway = await start({ ...config, services: { ...config.services, 'sandbox-manager': manager.address } }, silentLogger());
  for (const [name, set] of [
    ['a', (k: string) => (keyA = k)],
    ['b', (k: string) => (keyB = k)],
  ] as const) {
    const tenant = await gateway.store.createTenant({ name });
    set((await gateway.store.createApiKey({ tenantId: tenant.id, name, role: 'member' })).key);
  }
}, 60_000);
afterAll(async () => {
  await gateway?.close();
  await manager?.close();
  await testDb?.drop();
});

describe('registries and volumes', () => {
  it('stores a registry without ever returning its password; a duplicate is 409, another tenant’s a 404', async () => {
    const created = await call('/registries', { json: { name: 'private', server: '127.0.0.1:5000', username: 'bot', password: 's3cret', insecure: true } });
    expect(created).toMatchObject({ status: 201, body: { name: 'private', server: '127.0.0.1:5000', username: 'bot', insecure: true } });
    expect(JSON.stringify(created.body)).not.toContain('s3cret');
    expect((await call('/registries/private')).body).toEqual(created.body);
    expect((await call('/registries')).body).toEqual({ registries: [created.body] });
    expect((await call('/registries', { json: { name: 'private', server: 'r.example.com', username: 'x', password: 'y' } })).status).toBe(409);
    expect((await call('/registries/private', { key: keyB })).status).toBe(404);
    expect((await call('/registries', { key: keyB })).body).toEqual({ registries: [] });
    expect((await call('/registries/private', { method: 'DELETE', key: keyB })).status).toBe(404);
    expect((await call('/registries/private', { method: 'DELETE' })).status).toBe(204);
    expect((await call('/registries/private')).status).toBe(404);
  });

  it('keeps volumes per tenant', async () => {
    const created = await call('/volumes', { json: { name: 'data', size: '1Gi' } });
    expect(created).toMatchObject({ status: 201, body: { name: 'data', size: '1Gi' } });
    expect((await call('/volumes/data', { key: keyB })).status).toBe(404);
    expect((await call('/volumes', { json: { name: 'data', size: '2Gi' } })).status).toBe(409);
    expect((await call('/volumes/data', { method: 'DELETE' })).status).toBe(204);
  });
});

describe('while sandboxes cannot run here', () => {
  it('answers 503 with Retry-After and the manager’s words on enabling them', async () => {
    for (const [path, json] of [
      ['/templates', { name: 'py', image: 'python:3.12-slim', resources: { cpu: '500m' } }],
      ['/snapshots', { name: 's', docker_image: 'busybox', fs_capacity_bytes: 1 << 30 }],
      ['/boxes', { snapshot_name: 's' }],
    ] as const) {
      const res = await call(path, { json });
      expect({ path, ...res }).toEqual({ path, status: 503, retryAfter: '5', body: { detail: expect.stringMatching(/container engine/) } });
    }
  });

  it('lists nothing and 404s unknown names', async () => {
    expect((await call('/templates')).body).toEqual({ templates: [] });
    expect((await call('/templates/py')).status).toBe(404);
    expect((await call('/boxes')).body).toEqual({ sandboxes: [], items: [], next_cursor: null, offset: 0 });
    expect((await call('/boxes/nope/status')).status).toBe(404);
    expect((await call(`/snapshots/${UNKNOWN_ID}`)).status).toBe(404);
    expect((await call('/pools')).body).toEqual({ pools: [] });
  });

  it('answers the data plane of an unknown sandbox with typed 404s, and its WebSocket upgrade with an HTTP 404', async () => {
    const exec = await call(`/dataplane/${UNKNOWN_ID}/execute`, { json: { command: 'echo hi' } });
    expect(exec).toMatchObject({ status: 404, body: { detail: { error: 'NotFound', message: expect.any(String) } } });
    const read = await call(`/dataplane/${UNKNOWN_ID}/download?path=/etc/hostname`);
    expect(read).toMatchObject({ status: 404, body: { detail: { error: 'FileNotFound' } } });
    const status = await new Promise<number>((resolve, reject) => {
      const ws = new WebSocket(`${gateway.url.replace('http', 'ws')}/api/v2/sandboxes/dataplane/${UNKNOWN_ID}/execute/ws`, { headers: { 'x-api-key': keyA } });
      ws.on('open', () => resolve(101));
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('error', reject);
    });
    expect(status).toBe(404);
  });

  it('is what the langsmith SandboxClient sees', async () => {
    const client = new SandboxClient({ apiEndpoint: `${gateway.url}/api/v2/sandboxes`, apiKey: keyA });
    expect(await client.listSnapshots()).toEqual([]);
    expect(await client.listSandboxes()).toEqual([]);
    await expect(client.getSandbox('nope')).rejects.toMatchObject({ name: 'LangSmithResourceNotFoundError' });
    await expect(client.getSnapshot(UNKNOWN_ID)).rejects.toMatchObject({ name: 'LangSmithResourceNotFoundError' });
    await expect(client.createSnapshot('s', 'busybox', 1 << 30)).rejects.toThrow(/container engine/);
    await expect(client.createSandbox(UNKNOWN_ID, { timeout: 5 })).rejects.toThrow(/container engine/);
    const wrongKey = new SandboxClient({ apiEndpoint: `${gateway.url}/api/v2/sandboxes`, apiKey: 'brt_wrong' });
    await expect(wrongKey.listSandboxes()).rejects.toMatchObject({ name: 'LangSmithSandboxAuthenticationError' });
  });
});
