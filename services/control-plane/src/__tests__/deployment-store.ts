/**
 * A migrated control-plane database with a DeploymentStore on it, for the tests of one file: made
 * before them and dropped after them. Plus a deployment with one revision, made through the store.
 */
import { afterAll, beforeAll } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createDatabase, type Database } from '@berth/db';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { CONTROL_PLANE_SCHEMA, migrateControlPlane } from '../index.js';
import type { RevisionStatus } from '../deployments/revision-lifecycle.js';
import { DeploymentStore } from '../deployments/store.js';
import type { DeploymentTables } from '../deployments/tables.js';

export interface StoreFixture {
  testDb: TestDatabase;
  database: Database<DeploymentTables>;
  store: DeploymentStore;
}

/** Registers the setup and teardown; the fields are there once the file's tests run. */
export function useDeploymentStore(name: string): StoreFixture {
  const fixture = {} as StoreFixture;
  beforeAll(async () => {
    fixture.testDb = await createTestDatabase(name);
    await migrateControlPlane(fixture.testDb.url);
    fixture.database = createDatabase<DeploymentTables>({ connectionString: fixture.testDb.url, schema: CONTROL_PLANE_SCHEMA });
    fixture.store = new DeploymentStore(fixture.database.db);
  });
  afterAll(async () => {
    await fixture.database?.close();
    await fixture.testDb?.drop();
  });
  return fixture;
}

/** A deployment of `tenantId` whose first revision starts in `status`; answers the deployment and revision ids. */
export async function createDeployment(
  store: DeploymentStore,
  tenantId: string,
  status: RevisionStatus = 'QUEUED',
): Promise<{ deploymentId: string; revisionId: string }> {
  const deploymentId = randomUUID();
  const revisionId = randomUUID();
  await store.create(
    {
      id: deploymentId,
      tenant_id: tenantId,
      name: `d-${deploymentId.slice(0, 8)}`,
      source: 'internal_source',
      source_config: {},
      deployment_type: 'dev',
      session_id: randomUUID(),
    },
    { id: revisionId, status, source: 'internal_source', source_revision_config: {} },
    [],
    Buffer.from('a sealed webhook secret'),
  );
  return { deploymentId, revisionId };
}
