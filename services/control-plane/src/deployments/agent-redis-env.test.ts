/**
 * What the control plane hands agent servers about Redis (here: the Secret of the kubernetes
 * deployer, on the in-repo fake Kubernetes API): with REDIS_URL the deployment's own Redis user,
 * never the platform's URL; a lost user is re-created on a timer; deleting the deployment deletes
 * the user. A platform Redis user without ACL permission stops the start with what to grant, unless
 * BERTH_AGENT_REDIS=off, where agent servers get no REDIS_URL at all.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { FakeKube } from '@berth/fake-kube';
import { silentLogger } from '@berth/log';
import { SecretBox } from '@berth/secret-box';
import { createTestDatabase, testRedisUrl, until, type TestDatabase } from '@berth/testing';
import { loadControlPlaneConfig } from '../env.js';
import { start, type RunningControlPlane } from '../index.js';
import type { DeploymentsConfig } from '../config.js';
import { testControlPlaneConfig } from '../__tests__/test-config.js';
import { AgentRedis, AgentRedisSetupError } from './agent-redis.js';
import { agentSchema } from './agent-databases.js';

const tenant = randomUUID();
const secretKey = SecretBox.generateKey();
const noAcl = { user: `berth_test_noacl_${randomBytes(4).toString('hex')}`, password: randomBytes(16).toString('hex') };
let db: TestDatabase;
let work: string;
let fake: FakeKube;
let admin: Redis;
let plane: RunningControlPlane | undefined;

beforeAll(async () => {
  db = await createTestDatabase('cp_agent_redis_env');
  work = await mkdtemp(join(tmpdir(), 'berth-agent-redis-env-'));
  fake = await FakeKube.start({ namespaces: ['berth'], rollouts: { delayMs: 20 } });
  admin = new Redis(testRedisUrl());
  // A platform user that may do everything but administer Redis (ACL among it).
  await admin.call('ACL', 'SETUSER', noAcl.user, 'reset', 'on', `>${noAcl.password}`, '~*', '&*', '+@all', '-@admin');
}, 60_000);

afterAll(async () => {
  await plane?.close();
  await admin.call('ACL', 'DELUSER', noAcl.user);
  admin.disconnect();
  await fake?.close();
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

function startPlane(settings: Partial<DeploymentsConfig>): Promise<RunningControlPlane> {
  return start(
    testControlPlaneConfig(db.url, join(work, 'artifacts'), { secretKey, deployer: { kind: 'kubernetes', server: fake.url, namespace: 'berth' }, ...settings }),
    silentLogger(),
  );
}

function noAclUrl(): string {
  const url = new URL(testRedisUrl());
  url.username = noAcl.user;
  url.password = noAcl.password;
  return url.toString();
}

async function deploy(running: RunningControlPlane): Promise<{ id: string; env: Record<string, string> }> {
  const { id } = await running.deployments!.create({
    tenantId: tenant,
    name: `agent-${randomBytes(3).toString('hex')}`,
    source: 'external_docker',
    sourceRevisionConfig: { image_uri: 'registry.test/agent:1' },
    secrets: [],
  });
  const secret = await until(
    'the deployment’s Secret',
    () =>
      fake.store
        .list('secrets', 'berth')
        .map((s) =>
          Object.fromEntries(
            Object.entries((s as unknown as { data: Record<string, string> }).data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
          ),
        )
        .find((env) => env.BERTH_AGENT_SCHEMA === agentSchema(id)),
    30_000,
  );
  return { id, env: secret };
}

it('gives agent servers the deployment’s own Redis user, re-creates it when Redis lost it and deletes it with the deployment', async () => {
  plane = await startPlane({ redisUrl: testRedisUrl(), agentRedisResyncMs: 200 });
  const { id, env } = await deploy(plane);
  const url = new URL(env.REDIS_URL!);
  expect(url.username).toBe(AgentRedis.user(id));
  expect(url.password).toBe(new SecretBox(secretKey).derive(`agent-redis/${id}`));
  expect(env.REDIS_URL).not.toBe(testRedisUrl());
  expect(Object.values(env)).not.toContain(testRedisUrl());
  const asAgent = new Redis(env.REDIS_URL!, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  asAgent.on('error', () => undefined);
  try {
    expect(await asAgent.ping()).toBe('PONG');
    await expect(asAgent.get('berth:control-plane:control-plane-revisions:id')).rejects.toThrow(/NOPERM/);
  } finally {
    asAgent.disconnect();
  }

  await admin.call('ACL', 'DELUSER', AgentRedis.user(id)); // what a restart without an ACL file does
  await until('the user back', async () => (await admin.call('ACL', 'GETUSER', AgentRedis.user(id))) !== null, 10_000);

  await plane.deployments!.delete(tenant, id);
  await until('the user gone', async () => (await admin.call('ACL', 'GETUSER', AgentRedis.user(id))) === null, 20_000);
  await plane.close();
  plane = undefined;
}, 90_000);

it('refuses to start when its Redis user may not manage ACL users, saying what to grant', async () => {
  const refused = await startPlane({ redisUrl: noAclUrl() }).then(
    (running) => {
      plane = running;
      return undefined;
    },
    (error: unknown) => error,
  );
  expect(refused).toBeInstanceOf(AgentRedisSetupError);
  expect((refused as Error).message).toMatch(/NOPERM.*\+acl.*BERTH_AGENT_REDIS=off/s);
}, 60_000);

it('with BERTH_AGENT_REDIS=off starts on that user, and agent servers get no REDIS_URL', async () => {
  plane = await startPlane({ redisUrl: noAclUrl(), agentRedis: 'off' });
  const { env } = await deploy(plane);
  expect(Object.keys(env)).not.toContain('REDIS_URL');
  expect(env.DATABASE_URL).toBeDefined();
}, 60_000);

it('reads BERTH_AGENT_REDIS: acl by default with REDIS_URL, off on request, anything else refused', () => {
  const env = { DATABASE_URL: db.url, BERTH_SECRET_KEY: secretKey, REDIS_URL: 'redis://redis.test:6379' };
  expect(loadControlPlaneConfig(env).deployments).toMatchObject({ redisUrl: 'redis://redis.test:6379', agentRedis: 'acl' });
  expect(loadControlPlaneConfig({ ...env, BERTH_AGENT_REDIS: 'off' }).deployments?.agentRedis).toBe('off');
  expect(() => loadControlPlaneConfig({ ...env, BERTH_AGENT_REDIS: 'yes' })).toThrow(/BERTH_AGENT_REDIS/);
});
