/**
 * Uploads are not kept forever: a finished upload that no revision uses is deleted, chunks and
 * all, once its time (UNUSED_UPLOAD_TTL_SECONDS; 1 s here) is up, while the upload a revision
 * builds from and an unfinished one (swept after an hour) stay. Real control plane and Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RequestValidationError } from '@berth/errors';
import { silentLogger } from '@berth/log';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import pg from 'pg';
import { testControlPlaneConfig } from '../__tests__/test-config.js';
import { loadControlPlaneConfig } from '../env.js';
import { CONTROL_PLANE_SCHEMA, start, type RunningControlPlane } from '../index.js';
import type { Deployments } from './service.js';

const tenant = randomUUID();
let db: TestDatabase;
let work: string;
let plane: RunningControlPlane;
let deployments: Deployments;
let client: pg.Client;

beforeAll(async () => {
  db = await createTestDatabase('cp_upload_sweep');
  work = await mkdtemp(join(tmpdir(), 'berth-upload-sweep-'));
  plane = await start(testControlPlaneConfig(db.url, join(work, 'artifacts'), { unusedUploadTtlSeconds: 1 }), silentLogger());
  deployments = plane.deployments!;
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
}, 60_000);

afterAll(async () => {
  await client?.end();
  await plane?.close();
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

/** One upload in two chunks; `finish: false` leaves it unfinished. */
async function upload(deploymentId: string, finish = true): Promise<{ uploadId: string; objectPath?: string; revisionId?: string }> {
  const first = await deployments.upload({ tenantId: tenant, deploymentId, data: Buffer.from('first chunk'), last: false });
  if (!finish) return first;
  return deployments.upload({ tenantId: tenant, deploymentId, uploadId: first.uploadId, data: Buffer.from('last chunk'), last: true });
}

async function stored(uploadId: string): Promise<{ uploads: number; chunks: number }> {
  const { rows } = await client.query<{ uploads: number; chunks: number }>(
    `SELECT (SELECT count(*)::int FROM ${CONTROL_PLANE_SCHEMA}.source_uploads WHERE id = $1) AS uploads,
            (SELECT count(*)::int FROM ${CONTROL_PLANE_SCHEMA}.source_upload_chunks WHERE upload_id = $1) AS chunks`,
    [uploadId],
  );
  return rows[0]!;
}

describe('upload sweeping', () => {
  it('deletes a finished upload no revision uses after its TTL; keeps the used one and unfinished ones', async () => {
    const created = await deployments.create({ tenantId: tenant, name: 'sweep', source: 'internal_source', secrets: [] });
    // The first upload is attached to the revision waiting for it (its build fails: no project; that does not matter).
    const used = await upload(created.id);
    expect(used.revisionId).toBe(created.latest_revision_id);
    const unused = await upload(created.id);
    expect(unused.revisionId).toBeUndefined();
    const unfinished = await upload(created.id, false);
    expect(await stored(unused.uploadId)).toEqual({ uploads: 1, chunks: 2 });

    await until('the unused upload to be swept', async () => ((await stored(unused.uploadId)).uploads === 0 ? true : undefined), 10_000, 200);
    expect(await stored(unused.uploadId)).toEqual({ uploads: 0, chunks: 0 });
    expect(await stored(used.uploadId)).toEqual({ uploads: 1, chunks: 2 });
    expect(await stored(unfinished.uploadId)).toEqual({ uploads: 1, chunks: 1 });

    // What the user sees: the swept upload can no longer make a revision.
    await expect(
      deployments.update({ tenantId: tenant, deploymentId: created.id, sourceRevisionConfig: { source_tarball_path: unused.objectPath! } }),
    ).rejects.toBeInstanceOf(RequestValidationError);
  }, 30_000);

  it('takes its TTL from UNUSED_UPLOAD_TTL_SECONDS, one hour by default', () => {
    const env = { DATABASE_URL: db.url, BERTH_SECRET_KEY: 'k' };
    expect(loadControlPlaneConfig(env).deployments?.unusedUploadTtlSeconds).toBe(3600);
    expect(loadControlPlaneConfig({ ...env, UNUSED_UPLOAD_TTL_SECONDS: '120' }).deployments?.unusedUploadTtlSeconds).toBe(120);
    expect(() => loadControlPlaneConfig({ ...env, UNUSED_UPLOAD_TTL_SECONDS: '0' })).toThrow(/UNUSED_UPLOAD_TTL_SECONDS/);
  });
});
