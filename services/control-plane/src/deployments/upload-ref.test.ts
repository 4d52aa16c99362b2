/**
 * A revision names the upload it is built from by reference (`source_tarball_path`, the object_path
 * an upload answers): only a finished upload of the same deployment satisfies it, whatever text a
 * caller sends or whichever upload id it knows; and revisions written before the upload id had a
 * column of its own (migration 0007) still hold their uploads. Real control plane and Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDatabase, migrate } from '@berth/db';
import { ConflictError, NotFoundError, RequestValidationError } from '@berth/errors';
import { silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import pg from 'pg';
import { testControlPlaneConfig } from '../__tests__/test-config.js';
import { CONTROL_PLANE_SCHEMA, controlPlaneMigrationsDir, start, type RunningControlPlane } from '../index.js';
import type { ControlPlaneTables } from '../tables.js';
import type { Deployments } from './service.js';
import { DeploymentStore } from './store.js';

const tenant = randomUUID();
let db: TestDatabase;
let work: string;
let plane: RunningControlPlane;
let deployments: Deployments;

beforeAll(async () => {
  db = await createTestDatabase('cp_upload_ref');
  work = await mkdtemp(join(tmpdir(), 'berth-upload-ref-'));
  plane = await start(testControlPlaneConfig(db.url, join(work, 'artifacts')), silentLogger());
  deployments = plane.deployments!;
}, 60_000);

afterAll(async () => {
  await plane?.close();
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

async function finishedUpload(deploymentId: string, tenantId: string = tenant): Promise<{ uploadId: string; objectPath: string }> {
  const { uploadId, objectPath } = await deployments.upload({ tenantId, deploymentId, data: Buffer.from('not a tarball'), last: true });
  return { uploadId, objectPath: objectPath! };
}

describe("a revision's upload reference", () => {
  it('is satisfied only by a finished upload of the same deployment', async () => {
    const mine = await deployments.create({ tenantId: tenant, name: 'mine', source: 'internal_source', secrets: [] });
    const other = await deployments.create({ tenantId: randomUUID(), name: 'other', source: 'internal_source', secrets: [] });
    await finishedUpload(mine.id);
    const theirs = await finishedUpload(other.id, other.tenant_id);
    for (const path of [
      // Another deployment's real upload.
      theirs.objectPath,
      // Their upload id under this deployment's prefix.
      `uploads/${mine.id}/${theirs.uploadId}.tar.gz`,
      // Dashes where the hex digits go: a pattern of [0-9a-f-]{36} took it, and Postgres failed on the uuid (a 500).
      `uploads/${mine.id}/${'-'.repeat(36)}.tar.gz`,
      `uploads/${mine.id}/../${theirs.uploadId}.tar.gz`,
    ]) {
      await expect(deployments.update({ tenantId: tenant, deploymentId: mine.id, sourceRevisionConfig: { source_tarball_path: path } })).rejects.toBeInstanceOf(
        RequestValidationError,
      );
    }
    await expect(deployments.update({ tenantId: tenant, deploymentId: mine.id, sourceRevisionConfig: { source_tarball_path: 42 } })).rejects.toMatchObject({
      issues: [expect.objectContaining({ loc: ['body', 'source_revision_config', 'source_tarball_path'] })],
    });
  });

  it("cannot be made from another deployment's upload id by finishing it as this deployment's", async () => {
    const mine = await deployments.create({ tenantId: tenant, name: 'waiting', source: 'internal_source', secrets: [] });
    const other = await deployments.create({ tenantId: randomUUID(), name: 'victim', source: 'internal_source', secrets: [] });
    const started = await deployments.upload({ tenantId: other.tenant_id, deploymentId: other.id, data: Buffer.from('their code'), last: false });
    await expect(
      deployments.upload({ tenantId: tenant, deploymentId: mine.id, uploadId: started.uploadId, data: Buffer.alloc(0), last: true }),
    ).rejects.toBeInstanceOf(NotFoundError);
    await expect(
      deployments.upload({ tenantId: tenant, deploymentId: mine.id, uploadId: 'not-a-uuid', data: Buffer.alloc(0), last: true }),
    ).rejects.toBeInstanceOf(NotFoundError);
    expect((await deployments.revision(tenant, mine.id, mine.latest_revision_id!)).status).toBe('AWAITING_SOURCE');
  });
});

describe('revisions written before migration 0007', () => {
  it('still hold their uploads: the sweep keeps them and the build finds them by id; a new revision holds one by id', async () => {
    const old = await createTestDatabase('cp_upload_ref_old');
    const before = await mkdtemp(join(tmpdir(), 'berth-migrations-'));
    const client = new pg.Client({ connectionString: old.url });
    const database = createDatabase<ControlPlaneTables>({ connectionString: old.url, schema: CONTROL_PLANE_SCHEMA, log: silentLogger() });
    try {
      await mkdir(before, { recursive: true });
      for (const file of (await readdir(controlPlaneMigrationsDir)).filter((name) => name < '0007'))
        await copyFile(join(controlPlaneMigrationsDir, file), join(before, file));
      await migrate({ connectionString: old.url, schema: CONTROL_PLANE_SCHEMA, directory: before, log: silentLogger() });

      const [deploymentId, uploadId, revisionId] = [randomUUID(), randomUUID(), randomUUID()];
      await client.connect();
      await client.query(`SET search_path TO ${CONTROL_PLANE_SCHEMA}`);
      await client.query(
        `INSERT INTO deployments (id, tenant_id, name, source, source_config, deployment_type, session_id) VALUES ($1, $2, 'old', 'internal_source', '{}', 'dev', $3)`,
        [deploymentId, tenant, randomUUID()],
      );
      await client.query(`INSERT INTO source_uploads (id, deployment_id, complete, created_at) VALUES ($1, $2, true, now() - interval '1 day')`, [
        uploadId,
        deploymentId,
      ]);
      await client.query(`INSERT INTO source_upload_chunks (upload_id, seq, data) VALUES ($1, 0, 'the project')`, [uploadId]);
      const config = { langgraph_config_path: 'langgraph.json', source_tarball_path: `uploads/${deploymentId}/${uploadId}.tar.gz` };
      await client.query(
        `INSERT INTO revisions (id, deployment_id, status, source, source_revision_config) VALUES ($1, $2, 'DEPLOYED', 'internal_source', $3)`,
        [revisionId, deploymentId, JSON.stringify(config)],
      );

      await migrate({ connectionString: old.url, schema: CONTROL_PLANE_SCHEMA, directory: controlPlaneMigrationsDir, log: silentLogger() });
      const store = new DeploymentStore(database.db);
      expect(await store.sweepUploads({ unfinishedSeconds: 0, unusedSeconds: 0 })).toBe(0);
      const revision = await store.revisionById(revisionId);
      expect(revision).toMatchObject({ source_upload_id: uploadId, source_revision_config: config });
      const chunks: string[] = [];
      for await (const chunk of store.uploadChunks(revision!.source_upload_id!)) chunks.push(chunk.toString());
      expect(chunks).toEqual(['the project']);

      // An upload swept after a caller checked it cannot be named by a new revision (a 409, not a 500).
      const gone = {
        id: randomUUID(),
        status: 'QUEUED' as const,
        source: 'internal_source' as const,
        source_revision_config: {},
        source_upload_id: randomUUID(),
      };
      await expect(store.update(tenant, deploymentId, { revision: gone })).rejects.toBeInstanceOf(ConflictError);

      // Deleting the deployment still takes its revisions and uploads with it.
      await store.remove(deploymentId);
      expect((await client.query('SELECT count(*)::int AS n FROM source_uploads')).rows[0].n).toBe(0);
    } finally {
      await client.end();
      await database.close();
      await old.drop();
      await rm(before, { recursive: true, force: true });
    }
  });
});
