/**
 * `berth keys bootstrap` on a fresh database: the key it prints is an admin key of the one system
 * tenant, and a second run mints another key of the same tenant.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AuthStore, type AuthTables } from '@berth/auth';
import { createDatabase } from '@berth/db';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { keysBootstrap } from './commands/keys-bootstrap.js';
import { loadCliEnv } from './env.js';

let testDb: TestDatabase;
beforeAll(async () => {
  testDb = await createTestDatabase('cli_keys_bootstrap');
});
afterAll(async () => {
  await testDb?.drop();
});

describe('berth keys bootstrap', () => {
  it('mints admin keys of the system tenant straight in the platform database', async () => {
    const env = loadCliEnv({ DATABASE_URL: testDb.url, HOME: '/nonexistent' });
    const printed: string[] = [];
    const first = await keysBootstrap(env, {}, (line) => printed.push(line));
    const second = await keysBootstrap(env, { json: true }, (line) => printed.push(line));
    expect(printed).toEqual([first.api_key, JSON.stringify(second)]);
    expect(second.tenant_id).toBe(first.tenant_id);
    expect(second.api_key).not.toBe(first.api_key);
    const database = createDatabase<AuthTables>({ connectionString: testDb.url, schema: 'gateway', max: 1 });
    try {
      const principal = await new AuthStore(database.db).verifyApiKey(first.api_key);
      expect(principal).toMatchObject({ tenantId: first.tenant_id, role: 'admin', platformAdmin: true });
    } finally {
      await database.close();
    }
  });

  it('says it needs DATABASE_URL', async () => {
    await expect(keysBootstrap(loadCliEnv({ HOME: '/nonexistent' }), {}, () => undefined)).rejects.toThrow('keys bootstrap needs DATABASE_URL');
  });
});
