/**
 * A tenant cannot create more deployments than the platform allows (each holds a database, agent
 * servers and builds), not even with many creates at once; other tenants are not affected, and a
 * deleted deployment frees its place. Real Postgres; the refusal is RESOURCE_EXHAUSTED over gRPC
 * (the gateway's 429).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ResourceExhaustedError, httpStatusOf } from '@berth/errors';
import { silentLogger } from '@berth/log';
import { DeploymentService } from '@berth/proto';
import { createRpcClient } from '@berth/rpc';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { testControlPlaneConfig } from '../__tests__/test-config.js';
import { start, type RunningControlPlane } from '../index.js';
import type { Deployments } from './service.js';

const LIMIT = 3;
let db: TestDatabase;
let work: string;
let plane: RunningControlPlane;
let deployments: Deployments;

beforeAll(async () => {
  db = await createTestDatabase('cp_deploy_quota');
  work = await mkdtemp(join(tmpdir(), 'berth-deploy-quota-'));
  plane = await start(testControlPlaneConfig(db.url, join(work, 'artifacts'), { maxDeploymentsPerTenant: LIMIT }), silentLogger());
  deployments = plane.deployments!;
}, 60_000);

afterAll(async () => {
  await plane?.close();
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

// internal_source: the first revision waits for its upload, so nothing is built.
const create = (tenantId: string, name: string) => deployments.create({ tenantId, name, source: 'internal_source', secrets: [] });

describe('deployments per tenant', () => {
  it('refuses creates past the limit, even many at once, saying what the limit is', async () => {
    const tenant = randomUUID();
    const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => create(tenant, `burst-${i}`)));
    const created = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as Error);
    expect(created).toHaveLength(LIMIT);
    expect(refused).toHaveLength(8 - LIMIT);
    for (const error of refused) {
      expect(error).toBeInstanceOf(ResourceExhaustedError);
      expect(error.message).toMatch(/3 deployments, the most this platform allows per tenant \(3\)/);
    }
    expect(httpStatusOf('resource_exhausted')).toBe(429);
    expect((await deployments.list(tenant, { limit: 100, offset: 0 })).resources).toHaveLength(LIMIT);

    // Over gRPC, as the gateway calls it.
    const client = createRpcClient(DeploymentService, plane.address);
    try {
      await expect(client.createDeployment({ tenantId: tenant, name: 'one-more', source: 'internal_source' })).rejects.toBeInstanceOf(ResourceExhaustedError);
    } finally {
      client.close();
    }
  });

  it('counts each tenant on its own, and a deleted deployment frees its place', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    const made = [];
    for (let i = 0; i < LIMIT; i += 1) made.push(await create(a, `a-${i}`));
    await expect(create(a, 'a-extra')).rejects.toBeInstanceOf(ResourceExhaustedError);
    // Another tenant is not held back by the first one's deployments.
    await expect(create(b, 'b-0')).resolves.toMatchObject({ name: 'b-0' });

    await deployments.delete(a, made[0]!.id);
    await expect(create(a, 'a-extra')).resolves.toMatchObject({ name: 'a-extra' });
  });
});
