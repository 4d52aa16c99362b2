/**
 * The revision lifecycle drives every status change: the store's one `move` applies a move only
 * from a state the table allows (refusing the others with IllegalTransitionError, and changing
 * nothing), the database accepts exactly the table's states, the wire enum names them too, and
 * migration 0004 turns the old "QUEUED, waiting for the project upload" rows into AWAITING_SOURCE.
 * Real Postgres, the control plane's migrations.
 */
import { beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate } from '@berth/db';
import { NotFoundError } from '@berth/errors';
import { IllegalTransitionError } from '@berth/lifecycle';
import { RevisionStatus as WireRevisionStatus } from '@berth/proto';
import { createTestDatabase } from '@berth/testing';
import pg from 'pg';
import { CONTROL_PLANE_SCHEMA, controlPlaneMigrationsDir, migrateControlPlane } from '../index.js';
import { revisionLifecycle, revisionStatusWire, type RevisionStatus } from './revision-lifecycle.js';
import type { DeploymentStore } from './store.js';
import { createDeployment, useDeploymentStore } from '../__tests__/deployment-store.js';

const fixture = useDeploymentStore('cp_lifecycle');
let store: DeploymentStore;
const tenant = randomUUID();

beforeAll(() => {
  store = fixture.store;
});

/** A deployment whose first revision starts in `status`; answers the deployment and revision ids. */
const deploymentWith = (status: RevisionStatus) => createDeployment(store, tenant, status);

async function statusOf(revisionId: string): Promise<{ status: string; status_message: string }> {
  const row = await store.revisionById(revisionId);
  return { status: row!.status, status_message: row!.status_message };
}

/** Walks a revision along `path` with `move` (each step legal by the table). */
async function walk(revisionId: string, path: RevisionStatus[]): Promise<void> {
  for (const to of path) await store.move({ revisionId }, to);
}

describe('the revision lifecycle table', () => {
  it('names the same states as the wire enum and as the database accepts', async () => {
    expect(revisionStatusWire.states).toEqual(revisionLifecycle.states);
    expect(revisionStatusWire.encode('AWAITING_SOURCE')).toBe(WireRevisionStatus.AWAITING_SOURCE);
    const { rows } = await fixture.database.pool.query<{ def: string }>(
      `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'revisions_status_check' AND connamespace = $1::regnamespace`,
      [CONTROL_PLANE_SCHEMA],
    );
    const accepted = [...rows[0]!.def.matchAll(/'([A-Z_]+)'/g)].map((m) => m[1]);
    expect([...accepted].sort()).toEqual([...revisionLifecycle.states].sort());
  });

  it('starts a revision only in an initial state', async () => {
    await expect(deploymentWith('BUILDING')).rejects.toThrow(IllegalTransitionError);
    await expect(deploymentWith('BUILDING')).rejects.toThrow(/cannot start as BUILDING/);
  });
});

describe('DeploymentStore.move', () => {
  it('moves a revision along the pipeline, clearing the message of the state before', async () => {
    const { revisionId } = await deploymentWith('AWAITING_SOURCE');
    const moved = await store.move({ revisionId }, 'QUEUED', { source_revision_config: { source_tarball_path: 'uploads/x.tar.gz' } });
    expect(moved).toMatchObject({ id: revisionId, status: 'QUEUED', source_revision_config: { source_tarball_path: 'uploads/x.tar.gz' } });
    await walk(revisionId, ['AWAITING_BUILD', 'BUILDING']);
    // A resumed step moves into the state it is in.
    await store.move({ revisionId }, 'BUILDING');
    await store.move({ revisionId }, 'BUILD_FAILED', { status_message: 'npm ci failed' });
    expect(await statusOf(revisionId)).toEqual({ status: 'BUILD_FAILED', status_message: 'npm ci failed' });
  });

  it('refuses a move the table does not allow with IllegalTransitionError, and changes nothing', async () => {
    const { revisionId } = await deploymentWith('QUEUED');
    await walk(revisionId, ['AWAITING_BUILD', 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING', 'DEPLOYED']);
    const error = await store.move({ revisionId }, 'BUILDING', { status_message: 'again' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IllegalTransitionError);
    expect(error).toMatchObject({
      entity: 'revision',
      id: revisionId,
      from: 'DEPLOYED',
      to: 'BUILDING',
      message: `revision ${revisionId} is DEPLOYED: it cannot move to BUILDING`,
    });
    expect(await statusOf(revisionId)).toEqual({ status: 'DEPLOYED', status_message: '' });
    // A state nothing moves to is refused too (AWAITING_SOURCE is only ever a first state).
    const queued = await deploymentWith('QUEUED');
    await expect(store.move({ revisionId: queued.revisionId }, 'AWAITING_SOURCE')).rejects.toMatchObject({ from: 'QUEUED', to: 'AWAITING_SOURCE' });
    await expect(store.move({ revisionId: randomUUID() }, 'QUEUED')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('interrupts every unfinished revision of a deployment and leaves its finished ones as they are', async () => {
    const { deploymentId, revisionId: deployed } = await deploymentWith('QUEUED');
    await walk(deployed, ['AWAITING_BUILD', 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING', 'DEPLOYED']);
    const building = randomUUID();
    await store.update(tenant, deploymentId, { revision: { id: building, status: 'QUEUED', source: 'internal_source', source_revision_config: {} } });
    await walk(building, ['AWAITING_BUILD', 'BUILDING']);
    const next = randomUUID();
    const { interrupted } = await store.update(tenant, deploymentId, {
      revision: { id: next, status: 'QUEUED', source: 'internal_source', source_revision_config: {} },
    });
    expect(interrupted).toEqual([building]);
    expect(await statusOf(building)).toEqual({ status: 'INTERRUPTED', status_message: `replaced by revision ${next}` });
    expect((await statusOf(deployed)).status).toBe('DEPLOYED');
    // A step of the interrupted revision that comes late is refused.
    await expect(store.move({ revisionId: building }, 'AWAITING_DEPLOY')).rejects.toMatchObject({ from: 'INTERRUPTED' });
    expect(await store.markDeleting(tenant, deploymentId)).toBe(true);
    expect(await statusOf(next)).toEqual({ status: 'INTERRUPTED', status_message: 'the deployment was deleted' });
  });
});

describe('migration 0004', () => {
  it('turns a revision that waited for its upload as QUEUED + message into AWAITING_SOURCE', async () => {
    const old = await createTestDatabase('cp_lifecycle_0004');
    const dir = await mkdtemp(join(tmpdir(), 'berth-migrations-'));
    const client = new pg.Client({ connectionString: old.url });
    try {
      for (const file of (await readdir(controlPlaneMigrationsDir)).filter((f) => f < '0004'))
        await copyFile(join(controlPlaneMigrationsDir, file), join(dir, file));
      await migrate({ connectionString: old.url, schema: CONTROL_PLANE_SCHEMA, directory: dir });
      await client.connect();
      const deploymentId = randomUUID();
      await client.query(
        `INSERT INTO control_plane.deployments (id, tenant_id, name, source, source_config, deployment_type, session_id) VALUES ($1, $2, 'old', 'internal_source', '{}', 'dev', $3)`,
        [deploymentId, tenant, randomUUID()],
      );
      const insert = `INSERT INTO control_plane.revisions (id, deployment_id, status, source, source_revision_config, status_message) VALUES ($1, $2, $3, 'internal_source', '{}', $4)`;
      const [waiting, queued] = [randomUUID(), randomUUID()];
      await client.query(insert, [waiting, deploymentId, 'QUEUED', 'waiting for the project upload']);
      await client.query(insert, [queued, deploymentId, 'QUEUED', '']);
      await migrateControlPlane(old.url);
      const { rows } = await client.query<{ id: string; status: string; status_message: string }>(
        'SELECT id, status, status_message FROM control_plane.revisions',
      );
      expect(Object.fromEntries(rows.map((r) => [r.id, [r.status, r.status_message]]))).toEqual({
        [waiting]: ['AWAITING_SOURCE', ''],
        [queued]: ['QUEUED', ''],
      });
    } finally {
      await client.end();
      await old.drop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
