import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ConflictError, NotFoundError, PermissionDeniedError, UnauthenticatedError } from '@berth/errors';
import { createDatabase, migrate, type Database } from '@berth/db';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { authMigrationsDir, AuthStore, authenticateHeaders, assertTenantAdmin, type AuthTables } from './index.js';

let testDb: TestDatabase;
let database: Database<AuthTables>;
let store: AuthStore;

beforeAll(async () => {
  testDb = await createTestDatabase('auth');
  await migrate({ connectionString: testDb.url, schema: 'gateway', directory: authMigrationsDir });
  database = createDatabase<AuthTables>({ connectionString: testDb.url, schema: 'gateway' });
  store = new AuthStore(database.db);
});
afterAll(async () => {
  await database.close();
  await testDb.drop();
});

describe('AuthStore', () => {
  it('stores only a digest of each key and recognises the key it showed once', async () => {
    const tenant = await store.createTenant({ name: 'acme' });
    const { key, record } = await store.createApiKey({ tenantId: tenant.id, name: 'ci', role: 'admin' });
    expect(key.startsWith(record.prefix)).toBe(true);
    const stored = await database.pool.query('SELECT * FROM api_keys WHERE id = $1', [record.id]);
    expect(JSON.stringify(stored.rows)).not.toContain(key.slice(record.prefix.length));
    const principal = await store.verifyApiKey(key);
    expect(principal).toEqual({
      tenantId: tenant.id,
      role: 'admin',
      platformAdmin: false,
      credential: { type: 'api_key', id: record.id, prefix: record.prefix },
    });
    expect(await store.verifyApiKey(key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A'))).toBeUndefined();
  });

  it('refuses a revoked key, its tokens, and a second revoke', async () => {
    const tenant = await store.createTenant({ name: 'revokers' });
    const { key, record } = await store.createApiKey({ tenantId: tenant.id, name: 'temp' });
    const { token } = await store.issueAccessToken({ apiKeyId: record.id, tenantId: tenant.id, ttlSeconds: 600 });
    expect(await store.verifyAccessToken(token)).toMatchObject({ tenantId: tenant.id, role: 'member' });
    const revoked = await store.revokeApiKey(tenant.id, record.id);
    expect(revoked.revoked_at).toBeInstanceOf(Date);
    expect(await store.verifyApiKey(key)).toBeUndefined();
    expect(await store.verifyAccessToken(token)).toBeUndefined();
    await expect(store.revokeApiKey(tenant.id, record.id)).rejects.toBeInstanceOf(ConflictError);
    const other = await store.createTenant({ name: 'other' });
    await expect(store.revokeApiKey(other.id, record.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('refuses expired keys and tokens', async () => {
    const tenant = await store.createTenant({ name: 'expiring' });
    const { key } = await store.createApiKey({ tenantId: tenant.id, name: 'old', expiresAt: new Date(Date.now() - 1000) });
    expect(await store.verifyApiKey(key)).toBeUndefined();
    const live = await store.createApiKey({ tenantId: tenant.id, name: 'live' });
    const { token } = await store.issueAccessToken({ apiKeyId: live.record.id, tenantId: tenant.id, ttlSeconds: 1 });
    await database.pool.query("UPDATE access_tokens SET expires_at = now() - interval '1 second'");
    expect(await store.verifyAccessToken(token)).toBeUndefined();
  });

  it('bootstraps one system tenant whose admin keys are platform admins', async () => {
    const first = await store.bootstrap();
    const second = await store.bootstrap();
    expect(second.tenant.id).toBe(first.tenant.id);
    expect(second.key).not.toBe(first.key);
    expect(await store.verifyApiKey(first.key)).toMatchObject({ platformAdmin: true, role: 'admin' });
  });
});

describe('authenticateHeaders', () => {
  it('accepts X-Api-Key or a bearer token, and checks X-Tenant-Id', async () => {
    const tenant = await store.createTenant({ name: 'headers' });
    const { key, record } = await store.createApiKey({ tenantId: tenant.id, name: 'k' });
    expect(await authenticateHeaders(store, { 'x-api-key': key })).toMatchObject({ tenantId: tenant.id });
    expect(await authenticateHeaders(store, { 'x-api-key': key, 'x-tenant-id': tenant.id.toUpperCase() })).toMatchObject({
      tenantId: tenant.id,
    });
    const other = await store.createTenant({ name: 'elsewhere' });
    await expect(authenticateHeaders(store, { 'x-api-key': key, 'x-tenant-id': other.id })).rejects.toBeInstanceOf(PermissionDeniedError);
    const { token } = await store.issueAccessToken({ apiKeyId: record.id, tenantId: tenant.id, ttlSeconds: 60 });
    expect(await authenticateHeaders(store, { authorization: `Bearer ${token}` })).toMatchObject({
      credential: { type: 'access_token' },
    });
    await expect(authenticateHeaders(store, {})).rejects.toBeInstanceOf(UnauthenticatedError);
    await expect(authenticateHeaders(store, { authorization: 'Basic abc' })).rejects.toThrow(/Bearer/);
    await expect(authenticateHeaders(store, { 'x-api-key': 'brt_key_nope' })).rejects.toThrow('Invalid API key');
  });

  it('lets only admins of the tenant, or platform admins, administer it', async () => {
    const tenant = await store.createTenant({ name: 'admins' });
    const member = (await store.verifyApiKey((await store.createApiKey({ tenantId: tenant.id, name: 'm' })).key))!;
    const admin = (await store.verifyApiKey((await store.createApiKey({ tenantId: tenant.id, name: 'a', role: 'admin' })).key))!;
    const platform = (await store.verifyApiKey((await store.bootstrap()).key))!;
    expect(() => assertTenantAdmin(member, tenant.id)).toThrow(PermissionDeniedError);
    expect(() => assertTenantAdmin(admin, tenant.id)).not.toThrow();
    expect(() => assertTenantAdmin(admin, platform.tenantId)).toThrow(PermissionDeniedError);
    expect(() => assertTenantAdmin(platform, tenant.id)).not.toThrow();
  });
});
