/**
 * The export runner on a real Postgres and the local S3 server: exports run to COMPLETED with
 * their files read back by DuckDB, storage failures fail fast or are retried with their errors
 * recorded per attempt, claims respect the tenant limit and leases, and a worker process killed
 * with SIGKILL mid-export is replaced by another that finishes with every row exactly once.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { DeleteBucketCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { ManualClock } from '@berth/clock';
import { createDatabase, migrate, type Database } from '@berth/db';
import { LeaseLostError, NO_TAKEOVER } from '@berth/lease';
import { silentLogger } from '@berth/log';
import { parseMetrics, sampleSum, scrape } from '@berth/metrics';
import { SecretBox } from '@berth/secret-box';
import { createTestBucket, createTestDatabase, spawnTestChild, testS3, until, type TestChild, type TestDatabase } from '@berth/testing';
import { Destinations } from '../destinations/destinations.js';
import { exportWorkerMigrationsDir } from '../index.js';
import { TRACE_STORE_SCHEMA, TraceStore, type TraceTables } from '../traces/trace-store.js';
import { readExport } from '../writer/__tests__/exported.js';
import { Exports } from './exports.js';
import { ExportRunner, type ExportRunnerOptions } from './runner.js';
import { ExportStore } from './store.js';
import type { BulkExportTables } from './tables.js';

const s3 = testS3();
const secretKey = SecretBox.generateKey();
const tenant = randomUUID();
let testDb: TestDatabase;
let database: Database<TraceTables>;
let traces: TraceStore;
let store: ExportStore;
let destinations: Destinations;
let exports: Exports;
let session: string;
let bucket: string;
let destinationId: string;

const location = (b: string, endpoint = s3.endpoint) => ({ bucket_name: b, prefix: 'runs-out', endpoint_url: endpoint, region: s3.region });
const credentials = { access_key_id: s3.accessKeyId, secret_access_key: s3.secretAccessKey };

function runner(options: Partial<ExportRunnerOptions> = {}): ExportRunner {
  return new ExportRunner({ store, databaseUrl: testDb.url, destinations, traces, logger: silentLogger(), retryBaseMs: 10, ...options });
}

/** Ticks `r` until the export is final. */
async function runToEnd(r: ExportRunner, exportId: string, t = tenant) {
  return until(
    `export ${exportId} to finish`,
    async () => {
      await r.tick();
      await r.idle();
      const row = await store.get(t, exportId);
      return ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMEDOUT'].includes(row.status) ? row : undefined;
    },
    60_000,
    20,
  );
}

async function addRuns(count: number, day: string, inputBytes = 200): Promise<string[]> {
  const ids: string[] = [];
  for (let done = 0; done < count; done += 1000) {
    const batch = Array.from({ length: Math.min(1000, count - done) }, (_, i) => {
      const id = randomUUID();
      ids.push(id);
      const ms = Math.floor(((done + i) / count) * 86_000_000);
      return {
        op: 'create' as const,
        id,
        session_id: session,
        name: 'agent',
        run_type: i % 2 ? 'llm' : 'chain',
        start_time: new Date(Date.parse(`${day}T00:00:00Z`) + ms).toISOString(),
        inputs: { q: 'x'.repeat(inputBytes) },
      };
    });
    const result = await traces.upsertRuns(tenant, batch);
    expect(result.rejected).toEqual([]);
  }
  return ids;
}

beforeAll(async () => {
  testDb = await createTestDatabase('ew_runner');
  await migrate({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA, directory: exportWorkerMigrationsDir });
  database = createDatabase<TraceTables>({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA });
  const db = database.db.withTables<BulkExportTables>();
  traces = new TraceStore(database);
  store = new ExportStore(db);
  destinations = new Destinations(db, new SecretBox(secretKey), { logger: silentLogger(), clientOptions: { allowPrivateEndpoints: true } });
  exports = new Exports(db, store, traces);
  session = (await traces.createSession(tenant, { name: 'agent' })).id;
  bucket = await createTestBucket('runner');
  destinationId = (await destinations.create(tenant, { destination_type: 's3', display_name: 'd', config: location(bucket), credentials })).id;
});
afterAll(async () => {
  await database?.close();
  await testDb?.drop();
});

function oneTime(start: string, end: string, extra: Record<string, unknown> = {}, destination = destinationId) {
  return exports.create(tenant, {
    bulk_export_destination_id: destination,
    session_id: session,
    start_time: new Date(start),
    end_time: new Date(end),
    format_version: 'v2_beta',
    ...extra,
  });
}

describe('a one-time export', () => {
  it('runs every day partition to COMPLETED, with its files in the bucket as DuckDB reads them', async () => {
    const ids = [...(await addRuns(1500, '2026-02-01')), ...(await addRuns(700, '2026-02-02'))];
    const exp = await oneTime('2026-02-01T00:00:00Z', '2026-02-03T00:00:00Z', { export_fields: ['id', 'name', 'start_time'] });
    const metricsBefore = parseMetrics((await scrape()).body);
    const done = await runToEnd(runner({ fileRows: 1000 }), exp.id);
    expect(done).toMatchObject({ status: 'COMPLETED', finished_at: expect.any(Date) });
    const runs = await store.runs(exp.id);
    expect(runs.map((r) => [r.status, r.metadata.checkpoint?.rows_written, r.metadata.checkpoint?.exported_files.length])).toEqual([
      ['COMPLETED', 1500, 2],
      ['COMPLETED', 700, 1],
    ]);
    const client = s3.client();
    const read = await readExport(
      client,
      bucket,
      'runs-out',
      `SELECT count(*) AS n, count(DISTINCT id) AS d, min(day) AS first_day, max(day) AS last_day FROM {runs} WHERE export_id = '${exp.id}'`,
    );
    const columns = await readExport(client, bucket, 'runs-out', `SELECT * FROM {runs} WHERE export_id = '${exp.id}' LIMIT 1`);
    // The metrics count what was written: every row, and the bytes of the export's files as stored.
    const { Contents: objects = [] } = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
    const stored = objects.filter((o) => o.Key!.includes(exp.id)).reduce((sum, o) => sum + o.Size!, 0);
    client.destroy();
    const metrics = parseMetrics((await scrape()).body);
    const moved = (name: string) => sampleSum(metrics, name) - sampleSum(metricsBefore, name);
    expect(moved('berth_export_rows_written_total')).toBe(2200);
    // One attempt per day partition, both completed.
    const attempts = (labels: Record<string, string>) =>
      sampleSum(metrics, 'berth_export_run_attempts_total', labels) - sampleSum(metricsBefore, 'berth_export_run_attempts_total', labels);
    expect([attempts({ outcome: 'completed' }), attempts({ outcome: 'failed' }), attempts({ outcome: 'retrying' })]).toEqual([2, 0, 0]);
    expect(moved('berth_export_bytes_written_total')).toBe(stored);
    expect(stored).toBeGreaterThan(0);
    expect(read.rows[0]).toEqual({ n: BigInt(ids.length), d: BigInt(ids.length), first_day: '01', last_day: '02' });
    expect(Object.keys(columns.types)).toEqual(expect.arrayContaining(['id', 'name', 'start_time']));
    expect(Object.keys(columns.types)).not.toContain('inputs');
  });

  it('fails at once, saying why, when its bucket is gone', async () => {
    const doomed = await createTestBucket('doomed');
    const destination = await destinations.create(tenant, { destination_type: 's3', display_name: 'd', config: location(doomed), credentials });
    const client = s3.client();
    await client.send(new DeleteBucketCommand({ Bucket: doomed }));
    client.destroy();
    const exp = await oneTime('2026-02-01T00:00:00Z', '2026-02-02T00:00:00Z', {}, destination.id);
    const before = parseMetrics((await scrape()).body);
    const done = await runToEnd(runner(), exp.id);
    expect(done.status).toBe('FAILED');
    expect(done.status_message).toMatch(/bucket "doomed-\w+" does not exist/);
    // Counted as the tenant's destination failing, which the operator's alert leaves out.
    const after = parseMetrics((await scrape()).body);
    const failed = (m: typeof after, cause: string) => sampleSum(m, 'berth_export_run_attempts_total', { outcome: 'failed', cause });
    expect([failed(after, 'destination') - failed(before, 'destination'), failed(after, 'storage') - failed(before, 'storage')]).toEqual([1, 0]);
    const [run] = await store.runs(exp.id);
    expect(run).toMatchObject({ status: 'FAILED', retry_number: 0, errors: { retry_0: expect.stringMatching(/does not exist/) } });
  });

  it('retries transient storage failures with their errors per attempt, and fails after the last retry', async () => {
    // A storage that took the destination check, then answers every request 503 SlowDown.
    let slow = false;
    const flaky = http.createServer((req, res) => {
      req.resume();
      if (!slow) {
        res.writeHead(200, { etag: '"1"' }).end();
        return;
      }
      res.writeHead(503, { 'content-type': 'application/xml' }).end('<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>');
    });
    await new Promise<void>((resolve) => flaky.listen(0, '127.0.0.1', resolve));
    try {
      const endpoint = `http://127.0.0.1:${(flaky.address() as AddressInfo).port}`;
      const destination = await destinations.create(tenant, { destination_type: 's3', display_name: 'd', config: location('flaky', endpoint), credentials });
      slow = true;
      const exp = await oneTime('2026-02-01T00:00:00Z', '2026-02-02T00:00:00Z', {}, destination.id);
      const before = parseMetrics((await scrape()).body);
      // Retry n waits retryBaseMs · 2^n by the runner's clock: no attempt before it, one as it ends.
      const clock = new ManualClock(Date.now());
      const r = runner({ clock, maxRetries: 2, retryBaseMs: 1000 });
      const attempt = async () => {
        await r.tick();
        await r.idle();
        return (await store.runs(exp.id))[0]!;
      };
      for (const [waitMs, attempts] of [
        [0, 1],
        [999, 1],
        [1, 2],
        [1999, 2],
        [1, 3],
      ] as const) {
        await clock.advance(waitMs);
        expect(Object.keys((await attempt()).errors)).toHaveLength(attempts);
      }
      const done = await store.get(tenant, exp.id);
      expect(done.status).toBe('FAILED');
      expect(done.status_message).toMatch(/^gave up after 3 attempts: the storage at http:\/\/127\.0\.0\.1:\d+ failed this time/);
      const [run] = await store.runs(exp.id);
      expect(run!.retry_number).toBe(2);
      expect(Object.keys(run!.errors).sort()).toEqual(['retry_0', 'retry_1', 'retry_2']);
      expect(run!.errors.retry_0).toMatch(/failed this time/);
      // Two attempts retried, then the storage's failure given up on: what BerthExportsFailing counts.
      const after = parseMetrics((await scrape()).body);
      const moved = (labels: Record<string, string>) =>
        sampleSum(after, 'berth_export_run_attempts_total', labels) - sampleSum(before, 'berth_export_run_attempts_total', labels);
      expect([moved({ outcome: 'retrying', cause: 'storage' }), moved({ outcome: 'failed', cause: 'storage' }), moved({ outcome: 'completed' })]).toEqual([
        2, 1, 0,
      ]);
    } finally {
      flaky.close();
    }
  });
});

describe('claims', () => {
  it('run at most the tenant limit of exports at once; the rest wait as CREATED', async () => {
    const t0 = new Date('2030-01-01T00:00:00Z');
    const a = await oneTime('2026-03-01T00:00:00Z', '2026-03-02T00:00:00Z');
    const b = await oneTime('2026-03-01T00:00:00Z', '2026-03-02T00:00:00Z');
    const first = await store.claim('w1', t0, 60_000, 1, NO_TAKEOVER);
    expect(first?.export.id).toBe(a.id);
    expect(await store.claim('w2', t0, 60_000, 1, NO_TAKEOVER)).toBeUndefined();
    expect((await store.get(tenant, b.id)).status).toBe('CREATED');
    await store.cancel(tenant, a.id, t0);
    expect((await store.claim('w2', t0, 60_000, 1, NO_TAKEOVER))?.export.id).toBe(b.id);
    await store.cancel(tenant, b.id, t0);
  });

  it('are taken over when their lease runs out, and the old holder can no longer save', async () => {
    const t0 = new Date('2030-01-01T00:00:00Z');
    const takeover = { allowed: true, holdMs: 60_000 };
    const exp = await oneTime('2026-03-05T00:00:00Z', '2026-03-06T00:00:00Z');
    const mine = await store.claim('w1', t0, 1000, 10, takeover);
    expect(mine?.export.id).toBe(exp.id);
    expect(await store.claim('w2', new Date(t0.getTime() + 500), 1000, 10, takeover)).toBeUndefined();
    // w1 holds no liveness session: it is dead, and its run is taken once the lease expired.
    const theirs = await store.claim('w2', new Date(t0.getTime() + 1500), 1000, 10, takeover);
    expect(theirs?.run.id).toBe(mine!.run.id);
    const checkpoint = { cursor: null, rows_written: 0, exported_files: [], pending_upload: null };
    await expect(store.saveCheckpoint(mine!.run.id, { owner: 'w1', token: mine!.run.lease_token }, checkpoint, t0)).rejects.toBeInstanceOf(LeaseLostError);
    await store.cancel(tenant, exp.id, t0);
    await expect(store.saveCheckpoint(mine!.run.id, { owner: 'w2', token: theirs!.run.lease_token }, checkpoint, t0)).rejects.toBeInstanceOf(LeaseLostError);
  });

  it('end as TIMEDOUT when an export is not finished in time', async () => {
    const exp = await oneTime('2026-03-07T00:00:00Z', '2026-03-08T00:00:00Z');
    const late = new Date(exp.created_at.getTime() + 72 * 3_600_000 + 1);
    await runner({ clock: new ManualClock(late) }).tick();
    expect(await store.get(tenant, exp.id)).toMatchObject({ status: 'TIMEDOUT', status_message: 'not finished within 72 h' });
    expect((await store.runs(exp.id)).map((r) => r.status)).toEqual(['TIMEDOUT']);
  });
});

describe('a worker killed mid-export', () => {
  const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
  function startWorker(): TestChild {
    return spawnTestChild(process.execPath, [main], {
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: testDb.url,
        BERTH_SECRET_KEY: secretKey,
        GRPC_HOST: '127.0.0.1',
        GRPC_PORT: '0',
        LOG_LEVEL: 'warn',
        BULK_EXPORT_FILE_ROWS: '500',
        BULK_EXPORT_ALLOW_PRIVATE_ENDPOINTS: 'true',
        BULK_EXPORT_LEASE_SECONDS: '2',
      },
      stderr: 'inherit',
    });
  }

  it('is replaced by another that finishes the export with every row exactly once', async () => {
    const ids = await addRuns(10_000, '2026-04-01', 1000);
    const exp = await oneTime('2026-04-01T00:00:00Z', '2026-04-02T00:00:00Z');
    const first = startWorker();
    try {
      await until('the first file', async () => ((await store.runs(exp.id))[0]!.metadata.checkpoint?.exported_files.length ?? 0) >= 1 || undefined, 60_000, 20);
    } finally {
      first.child.kill('SIGKILL');
    }
    await first.stop();
    const before = (await store.runs(exp.id))[0]!;
    expect(before.status).toBe('RUNNING');
    expect(before.metadata.checkpoint!.rows_written).toBeLessThan(ids.length);

    const second = startWorker();
    try {
      const done = await until(
        'the export to complete',
        async () => {
          const row = await store.get(tenant, exp.id);
          return row.status === 'COMPLETED' || row.status === 'FAILED' ? row : undefined;
        },
        120_000,
        100,
      );
      expect(done.status).toBe('COMPLETED');
    } finally {
      await second.stop();
    }
    const [run] = await store.runs(exp.id);
    expect(run!.metadata.checkpoint!.rows_written).toBe(ids.length);
    const client = s3.client();
    const read = await readExport(client, bucket, 'runs-out', `SELECT count(*) AS n, count(DISTINCT id) AS d FROM {runs} WHERE export_id = '${exp.id}'`);
    client.destroy();
    expect(read.rows[0]).toEqual({ n: BigInt(ids.length), d: BigInt(ids.length) });
  }, 240_000);
});
