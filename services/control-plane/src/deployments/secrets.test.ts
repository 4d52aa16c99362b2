/**
 * A deployment's secrets one by name (SetSecret, DeleteSecret): set, replace and remove one while
 * the others stay; sealed at rest; no revision and no restart (the agent servers keep the
 * environment they started with), and the next revision's agent servers get exactly the new
 * environment (here: the deployment's Secret of the kubernetes deployer, on the in-repo fake
 * Kubernetes API); the per-deployment limit holds, also against a burst; another tenant's
 * deployment is NOT_FOUND.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NotFoundError, RequestValidationError, ResourceExhaustedError } from '@berth/errors';
import { FakeKube } from '@berth/fake-kube';
import { silentLogger } from '@berth/log';
import { DeploymentService } from '@berth/proto';
import { createRpcClient, type RpcClient } from '@berth/rpc';
import { SecretBox } from '@berth/secret-box';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { start, type RunningControlPlane } from '../index.js';
import { kubeAgentEnv } from '../__tests__/kube-agent-env.js';
import { storedSecrets } from '../__tests__/stored-secrets.js';
import { testControlPlaneConfig } from '../__tests__/test-config.js';
import type { Deployments } from './service.js';

const MAX = 4;
const tenant = randomUUID();
const secretKey = SecretBox.generateKey();
let db: TestDatabase;
let work: string;
let fake: FakeKube;
let plane: RunningControlPlane;
let deployments: Deployments;
let client: RpcClient<typeof DeploymentService>;

beforeAll(async () => {
  db = await createTestDatabase('cp_secrets');
  work = await mkdtemp(join(tmpdir(), 'berth-secrets-'));
  fake = await FakeKube.start({ namespaces: ['berth'], rollouts: { delayMs: 20 } });
  plane = await start(
    testControlPlaneConfig(db.url, join(work, 'artifacts'), {
      secretKey,
      deployer: { kind: 'kubernetes', server: fake.url, namespace: 'berth' },
      maxSecretsPerDeployment: MAX,
    }),
    silentLogger(),
  );
  deployments = plane.deployments!;
  client = createRpcClient(DeploymentService, plane.address);
}, 60_000);

afterAll(async () => {
  client?.close();
  await plane?.close();
  await fake?.close();
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

/** An image deployment: it deploys without a build. */
const create = (name: string, secrets: { name: string; value: string }[] = []) =>
  deployments.create({ tenantId: tenant, name, source: 'external_docker', sourceRevisionConfig: { image_uri: 'registry.test/agent:1' }, secrets });

const agentEnv = (revisionId: string) => kubeAgentEnv(fake, secretKey, revisionId);

const stored = (deploymentId: string) => storedSecrets(db.url, deploymentId);

const served = (deploymentId: string) =>
  until('a revision to serve', async () => (await deployments.get(tenant, deploymentId)).active_revision_id ?? undefined, 30_000);

describe('secrets by name', () => {
  it('sets, replaces and removes one secret; the running agent servers keep their environment, the next revision gets the new one', async () => {
    const created = await create('by-name', [
      { name: 'OPENAI_API_KEY', value: 'sk-first' },
      { name: 'MODE', value: 'fast' },
    ]);
    const first = await served(created.id);
    expect(await agentEnv(first)).toMatchObject({ OPENAI_API_KEY: 'sk-first', MODE: 'fast' });

    const replaced = await deployments.setSecret(tenant, created.id, 'OPENAI_API_KEY', 'sk-second');
    const added = await deployments.setSecret(tenant, created.id, 'REGION', 'eu-west-1');
    const removed = await deployments.deleteSecret(tenant, created.id, 'MODE');
    expect(replaced.secret_names).toEqual(['MODE', 'OPENAI_API_KEY']);
    expect(added.secret_names).toEqual(['MODE', 'OPENAI_API_KEY', 'REGION']);
    expect(removed.secret_names).toEqual(['OPENAI_API_KEY', 'REGION']);
    for (const answer of [replaced, added, removed]) {
      expect(JSON.stringify(answer)).not.toMatch(/sk-|eu-west-1|fast/);
      // No revision: what serves and what is latest are what they were.
      expect(answer).toMatchObject({ latest_revision_id: first, active_revision_id: first });
    }
    expect(removed.updated_at.getTime()).toBeGreaterThan(created.updated_at.getTime());
    expect((await deployments.revisions(tenant, created.id, { limit: 10, offset: 0 })).resources.map((r) => r.id)).toEqual([first]);
    // Nothing restarted: the agent servers' environment is the one they started with.
    expect(await agentEnv(first)).toMatchObject({ OPENAI_API_KEY: 'sk-first', MODE: 'fast' });

    // Sealed at rest, exactly as secrets given with the deployment are.
    const rows = await stored(created.id);
    expect([...rows.keys()].sort()).toEqual(['OPENAI_API_KEY', 'REGION']);
    const box = new SecretBox(secretKey);
    for (const [name, value] of [
      ['OPENAI_API_KEY', 'sk-second'],
      ['REGION', 'eu-west-1'],
    ] as const) {
      expect(rows.get(name)!.toString('latin1')).not.toContain(value);
      expect(box.open(rows.get(name)!)).toBe(value);
    }

    // The next revision (here a redeploy of the serving one) runs with exactly the new secrets.
    const next = (await deployments.redeploy(tenant, created.id, first)).latest_revision_id!;
    expect(next).not.toBe(first);
    const env = await agentEnv(next);
    expect(env).toMatchObject({ OPENAI_API_KEY: 'sk-second', REGION: 'eu-west-1' });
    expect(env).not.toHaveProperty('MODE');
  }, 90_000);

  it('refuses a name that is not an environment variable name, and a removal of a secret it does not have', async () => {
    const created = await create('names');
    for (const name of ['1ABC', 'A-B', 'A B', '', 'É', 'A'.repeat(256)]) {
      await expect(deployments.setSecret(tenant, created.id, name, 'x')).rejects.toBeInstanceOf(RequestValidationError);
    }
    await expect(deployments.setSecret(tenant, created.id, 'A'.repeat(255), 'x')).resolves.toMatchObject({ secret_names: ['A'.repeat(255)] });
    await expect(deployments.deleteSecret(tenant, created.id, 'NEVER_SET')).rejects.toThrow(
      new NotFoundError(`Deployment ID ${created.id} has no secret NEVER_SET.`),
    );
  });

  it(`holds a deployment to ${MAX} secrets: a new name past it is RESOURCE_EXHAUSTED, a longer list a 422, also against a burst`, async () => {
    const created = await create('limit', []);
    const burst = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => deployments.setSecret(tenant, created.id, `S${i}`, 'v')));
    expect(burst.filter((r) => r.status === 'fulfilled')).toHaveLength(MAX);
    for (const refused of burst.filter((r): r is PromiseRejectedResult => r.status === 'rejected')) {
      expect(refused.reason).toBeInstanceOf(ResourceExhaustedError);
      expect((refused.reason as Error).message).toMatch(new RegExp(`has ${MAX} secrets, the most this platform allows per deployment \\(${MAX}\\)`));
    }
    expect((await deployments.get(tenant, created.id)).secret_names).toHaveLength(MAX);
    // Replacing one that exists is no new secret.
    const name = (await deployments.get(tenant, created.id)).secret_names[0]!;
    await expect(deployments.setSecret(tenant, created.id, name, 'w')).resolves.toMatchObject({ secret_names: expect.arrayContaining([name]) });
    // A removal frees a place.
    await deployments.deleteSecret(tenant, created.id, name);
    await expect(deployments.setSecret(tenant, created.id, 'ANOTHER', 'v')).resolves.toBeDefined();

    const tooMany = Array.from({ length: MAX + 1 }, (_, i) => ({ name: `L${i}`, value: 'v' }));
    await expect(create('too-many', tooMany)).rejects.toThrow(
      new RequestValidationError([{ loc: ['body', 'secrets'], msg: `at most ${MAX} secrets per deployment on this platform`, type: 'value_error' }]),
    );
    await expect(deployments.update({ tenantId: tenant, deploymentId: created.id, secrets: tooMany })).rejects.toBeInstanceOf(RequestValidationError);
  });

  it('over gRPC: the deployment (names only) for the tenant, NOT_FOUND for another tenant, an unknown or malformed id', async () => {
    const created = await create('rpc');
    const set = await client.setSecret({ tenantId: tenant, deploymentId: created.id, name: 'TOKEN', value: 'tok-123' });
    expect(set.deployment?.secretNames).toEqual(['TOKEN']);
    expect(JSON.stringify(set, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).not.toContain('tok-123');
    const other = randomUUID();
    for (const [tenantId, deploymentId] of [
      [other, created.id],
      [tenant, randomUUID()],
      [tenant, 'not-a-uuid'],
    ]) {
      await expect(client.setSecret({ tenantId, deploymentId, name: 'TOKEN', value: 'stolen' })).rejects.toBeInstanceOf(NotFoundError);
      await expect(client.deleteSecret({ tenantId, deploymentId, name: 'TOKEN' })).rejects.toBeInstanceOf(NotFoundError);
    }
    await expect(client.setSecret({ tenantId: tenant, deploymentId: created.id, name: 'BAD-NAME', value: 'x' })).rejects.toBeInstanceOf(RequestValidationError);
    // Still the tenant's own value, untouched by the other tenant's calls.
    expect(new SecretBox(secretKey).open((await stored(created.id)).get('TOKEN')!)).toBe('tok-123');
    expect((await client.deleteSecret({ tenantId: tenant, deploymentId: created.id, name: 'TOKEN' })).deployment?.secretNames).toEqual([]);
  });
});
