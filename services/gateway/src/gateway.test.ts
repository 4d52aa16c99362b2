import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { silentLogger } from '@berth/log';
import { startGrpcService, type RunningGrpcService } from '@berth/rpc';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { freePort } from '@berth/local-stack';
import { start, type RunningGateway } from './index.js';
import { testGatewayConfig } from './__tests__/test-config.js';

let testDb: TestDatabase;
let gateway: RunningGateway;
let service: RunningGrpcService;
let platformKey: string;
let systemTenant: string;

type Json = Record<string, unknown> & { detail?: unknown };

async function call(path: string, init: { method?: string; headers?: Record<string, string>; json?: unknown; raw?: string } = {}) {
  const res = await fetch(`${gateway.url}${path}`, {
    method: init.method ?? 'GET',
    headers: { ...(init.json !== undefined || init.raw ? { 'content-type': 'application/json' } : {}), ...init.headers },
    body: init.raw ?? (init.json !== undefined ? JSON.stringify(init.json) : undefined),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json };
}
const withKey = (key: string, extra: Record<string, string> = {}) => ({ 'X-Api-Key': key, ...extra });

beforeAll(async () => {
  testDb = await createTestDatabase('gw');
  service = await startGrpcService({ name: 'berth.test.v1', host: '127.0.0.1', port: 0, logger: silentLogger() });
  gateway = await start(testGatewayConfig(testDb.url, service.address), silentLogger());
  const boot = await gateway.store.bootstrap();
  platformKey = boot.key;
  systemTenant = boot.tenant.id;
});
afterAll(async () => {
  await gateway.close();
  await service.close();
  await testDb.drop();
});

describe('authentication', () => {
  it('answers 401 JSON without credentials or with a bad key, 200 with a good one', async () => {
    expect(await call('/v1/me')).toEqual({ status: 401, body: { detail: expect.stringContaining('Missing credentials') } });
    expect(await call('/v1/me', { headers: withKey('brt_key_notarealkeynotarealkeynotarealk') })).toEqual({
      status: 401,
      body: { detail: 'Invalid API key' },
    });
    const me = await call('/v1/me', { headers: { 'x-api-key': platformKey } });
    expect(me).toMatchObject({ status: 200, body: { tenant_id: systemTenant, role: 'admin', platform_admin: true } });
  });

  it('answers 403 when the key is used for another tenant', async () => {
    const other = await call('/v1/tenants', { method: 'POST', headers: withKey(platformKey), json: { name: 'other' } });
    const res = await call('/v1/me', { headers: withKey(platformKey, { 'X-Tenant-Id': (other.body.tenant as Json).tenant_id as string }) });
    expect(res.status).toBe(403);
    expect(res.body.detail).toMatch(/not valid for the tenant/);
    expect((await call('/v1/me', { headers: withKey(platformKey, { 'X-Tenant-Id': systemTenant }) })).status).toBe(200);
  });

  it('issues bearer tokens that act for the key until it is revoked', async () => {
    const tenant = await call('/v1/tenants', { method: 'POST', headers: withKey(platformKey), json: { name: 'bearer' } });
    const tenantId = (tenant.body.tenant as Json).tenant_id as string;
    const created = await call(`/v1/tenants/${tenantId}/api-keys`, { method: 'POST', headers: withKey(platformKey), json: { name: 'cli' } });
    const key = created.body.key as string;
    const minted = await call('/v1/auth/tokens', { method: 'POST', headers: withKey(key), json: { expires_in: 600 } });
    expect(minted).toMatchObject({ status: 201, body: { token_type: 'bearer', expires_in: 600 } });
    const bearer = { Authorization: `Bearer ${minted.body.access_token as string}` };
    expect(await call('/v1/me', { headers: bearer })).toMatchObject({ status: 200, body: { tenant_id: tenantId, credential: { type: 'access_token' } } });
    expect((await call('/v1/me', { headers: { ...bearer, 'X-Tenant-Id': systemTenant } })).status).toBe(403);
    expect((await call('/v1/auth/tokens', { method: 'POST', headers: bearer })).status).toBe(403);
    await call(`/v1/tenants/${tenantId}/api-keys/${created.body.id as string}`, { method: 'DELETE', headers: withKey(platformKey) });
    expect((await call('/v1/me', { headers: bearer })).status).toBe(401);
  });
});

describe('request validation', () => {
  it('answers a malformed body with 422 in the HTTPValidationError shape', async () => {
    const res = await call('/v1/tenants', { method: 'POST', headers: withKey(platformKey), json: { name: '', colour: 'red' } });
    expect(res.status).toBe(422);
    expect(res.body.detail).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ loc: ['body', 'name'], type: 'too_short' }),
        { loc: ['body', 'colour'], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' },
      ]),
    );
    const broken = await call('/v1/tenants', { method: 'POST', headers: withKey(platformKey), raw: '{"name":' });
    expect(broken.status).toBe(422);
    expect(broken.body.detail).toEqual([expect.objectContaining({ loc: ['body'], type: 'json_invalid' })]);
    const badPath = await call('/v1/tenants/not-a-uuid/api-keys', { headers: withKey(platformKey) });
    expect(badPath.status).toBe(422);
    expect(badPath.body.detail).toEqual([expect.objectContaining({ loc: ['path', 'tenant_id'] })]);
  });
});

describe('tenants and API keys', () => {
  it('lets the platform admin create tenants whose admin key manages that tenant only', async () => {
    const created = await call('/v1/tenants', { method: 'POST', headers: withKey(platformKey), json: { name: 'acme' } });
    expect(created.status).toBe(201);
    const tenantId = (created.body.tenant as Json).tenant_id as string;
    const adminKey = (created.body.api_key as Json).key as string;
    expect((created.body.api_key as Json).role).toBe('admin');

    const member = await call(`/v1/tenants/${tenantId}/api-keys`, { method: 'POST', headers: withKey(adminKey), json: { name: 'bot' } });
    expect(member).toMatchObject({ status: 201, body: { name: 'bot', role: 'member', tenant_id: tenantId } });
    const memberKey = member.body.key as string;
    expect(memberKey.startsWith(member.body.prefix as string)).toBe(true);

    const list = await call(`/v1/tenants/${tenantId}/api-keys`, { headers: withKey(adminKey) });
    expect((list.body as unknown as Json[]).map((k) => k.name).sort()).toEqual(['admin', 'bot']);
    expect(JSON.stringify(list.body)).not.toContain(memberKey);

    expect((await call('/v1/tenants', { headers: withKey(adminKey) })).status).toBe(403);
    expect((await call(`/v1/tenants/${systemTenant}/api-keys`, { headers: withKey(adminKey) })).status).toBe(403);
    expect((await call(`/v1/tenants/${tenantId}/api-keys`, { headers: withKey(memberKey) })).status).toBe(403);
    expect((await call(`/v1/tenants/${tenantId}`, { headers: withKey(memberKey) })).status).toBe(200);

    const tenants = await call('/v1/tenants?limit=100', { headers: withKey(platformKey) });
    expect((tenants.body.resources as Json[]).map((t) => t.tenant_id)).toContain(tenantId);
  });

  it('revokes keys: the key stops working, a second revoke is 409, an unknown key 404', async () => {
    const created = await call(`/v1/tenants/${systemTenant}/api-keys`, { method: 'POST', headers: withKey(platformKey), json: { name: 'temp' } });
    const key = created.body.key as string;
    expect((await call('/v1/me', { headers: withKey(key) })).status).toBe(200);
    const revoked = await call(`/v1/tenants/${systemTenant}/api-keys/${created.body.id as string}`, { method: 'DELETE', headers: withKey(platformKey) });
    expect(revoked.status).toBe(200);
    expect(revoked.body.revoked_at).toEqual(expect.any(String));
    expect((await call('/v1/me', { headers: withKey(key) })).status).toBe(401);
    const again = await call(`/v1/tenants/${systemTenant}/api-keys/${created.body.id as string}`, { method: 'DELETE', headers: withKey(platformKey) });
    expect(again).toMatchObject({ status: 409, body: { detail: expect.stringContaining('already revoked') } });
    const unknown = await call(`/v1/tenants/${systemTenant}/api-keys/00000000-0000-4000-8000-000000000000`, {
      method: 'DELETE',
      headers: withKey(platformKey),
    });
    expect(unknown).toEqual({ status: 404, body: { detail: 'API key 00000000-0000-4000-8000-000000000000 not found' } });
  });
});

describe('health and docs', () => {
  it('is ready while Postgres and every service answer, and says which one fails', async () => {
    expect(await call('/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await call('/readyz')).toEqual({
      status: 200,
      body: {
        status: 'ok',
        checks: { postgres: { status: 'ok' }, queue: { status: 'ok', detail: 'redis' }, 'control-plane': { status: 'ok' } },
        instance_id: gateway.instanceId,
      },
    });
    await service.close();
    const res = await call('/readyz');
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ status: 'failing', checks: { postgres: { status: 'ok' }, 'control-plane': { status: 'failing' } } });
  });

  it('publishes an OpenAPI document generated from the request schemas, and a docs page', async () => {
    const doc = await call('/openapi.json');
    const paths = doc.body.paths as Record<string, Record<string, Json>>;
    expect(Object.keys(paths)).toEqual(
      expect.arrayContaining(['/v1/tenants', '/v1/tenants/{tenant_id}/api-keys', '/v1/tenants/{tenant_id}/api-keys/{key_id}', '/v1/auth/tokens', '/readyz']),
    );
    expect(paths['/v1/tenants']!.post!.requestBody).toMatchObject({
      content: { 'application/json': { schema: { required: ['name'], additionalProperties: false } } },
    });
    const page = await fetch(`${gateway.url}/docs`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('swagger-ui');
  });
});

describe('queue backend selection', () => {
  it('checks Postgres as the queue backend by default and reports an unreachable Redis', async () => {
    const byDefault = await start(
      { databaseUrl: testDb.url, host: '127.0.0.1', port: 0, logLevel: 'silent', queue: { kind: 'postgres', connectionString: testDb.url }, services: {} },
      silentLogger(),
    );
    const down = await start(
      {
        databaseUrl: testDb.url,
        host: '127.0.0.1',
        port: 0,
        logLevel: 'silent',
        queue: { kind: 'redis', url: `redis://127.0.0.1:${await freePort()}` },
        services: {},
      },
      silentLogger(),
    );
    try {
      const ok = await fetch(`${byDefault.url}/readyz`);
      expect(await ok.json()).toMatchObject({ status: 'ok', checks: { queue: { status: 'ok', detail: 'postgres' } } });
      const failing = await fetch(`${down.url}/readyz`);
      expect(failing.status).toBe(503);
      expect(await failing.json()).toMatchObject({
        checks: { queue: { status: 'failing', detail: 'does not answer' } },
      });
    } finally {
      await byDefault.close();
      await down.close();
    }
  });
});
