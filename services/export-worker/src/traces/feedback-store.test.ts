/**
 * Feedback in the trace store on a real Postgres: each run's feedback_stats kept exact under
 * concurrent writers (and the per-run quota with them); feedback waiting for its run limited and
 * swept; the stats written by a bulk export into the Parquet `feedback_stats` column, read back
 * with DuckDB as a user would.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createDatabase, migrate, type Database } from '@berth/db';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { exportRuns } from '../exports/__tests__/export-runs.js';
import { exportWorkerMigrationsDir } from '../index.js';
import { FeedbackStore } from './feedback-store.js';
import { TRACE_STORE_SCHEMA, TraceStore, type TraceTables } from './trace-store.js';

let testDb: TestDatabase;
let database: Database<TraceTables>;
let traces: TraceStore;
let feedback: FeedbackStore;
const tenant = randomUUID();
let session: string;

beforeAll(async () => {
  testDb = await createTestDatabase('ew_feedback');
  await migrate({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA, directory: exportWorkerMigrationsDir });
  database = createDatabase<TraceTables>({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA });
  traces = new TraceStore(database);
  feedback = new FeedbackStore(database.db, { maxPerRun: 30 });
  session = (await traces.createSession(tenant, { name: 'agent' })).id;
});
afterAll(async () => {
  await database?.close();
  await testDb?.drop();
});

async function addRun(name: string, start: string): Promise<string> {
  const id = randomUUID();
  const result = await traces.upsertRuns(tenant, [{ op: 'create', id, session_id: session, name, run_type: 'chain', start_time: start }]);
  expect(result.rejected).toEqual([]);
  return id;
}

describe('feedback_stats', () => {
  it('count every feedback when many writers give feedback on one run at once, and the quota holds', async () => {
    const runId = await addRun('busy', '2026-04-01T10:00:00Z');
    const outcomes = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) => feedback.create(tenant, undefined, { run_id: runId, key: i % 2 ? 'even' : 'odd', score: i % 2 })),
    );
    const refused = outcomes.filter((o) => o.status === 'rejected');
    expect(refused).toHaveLength(10);
    expect(refused.map((o) => (o as PromiseRejectedResult).reason.code)).toEqual(Array(10).fill('resource_exhausted'));
    const run = await traces.getRun(tenant, runId);
    const stats = run.feedback_stats as Record<string, { n: number }>;
    expect(stats.even!.n + stats.odd!.n).toBe(30);
  });
});

describe('feedback waiting for its run', () => {
  it('is limited per tenant (429 saying why), and swept when its run never comes', async () => {
    const other = randomUUID();
    const store = new FeedbackStore(database.db, { maxPendingPerTenant: 2 });
    for (let i = 0; i < 2; i++) await store.create(other, undefined, { run_id: randomUUID(), key: 'early' });
    await expect(store.create(other, undefined, { run_id: randomUUID(), key: 'early' })).rejects.toMatchObject({
      code: 'resource_exhausted',
      message: '2 feedback already wait for runs that have not arrived; send the runs first (or wait for them to be stored)',
    });
    // Another tenant has its own allowance.
    await expect(store.create(tenant, undefined, { run_id: randomUUID(), key: 'early' })).resolves.toMatchObject({ trace_id: null });
    expect(await store.sweepPending(3_600_000)).toBe(0);
    expect(await store.sweepPending(0)).toBe(3);
    await expect(store.create(other, undefined, { run_id: randomUUID(), key: 'early' })).resolves.toMatchObject({ session_id: null });
  });
});

describe('a bulk export', () => {
  it('writes each run’s feedback_stats into its Parquet feedback_stats column', async () => {
    const rated = await addRun('rated', '2026-04-02T10:00:00Z');
    await addRun('unrated', '2026-04-02T11:00:00Z');
    await feedback.create(tenant, undefined, { run_id: rated, key: 'correctness', score: 1 });
    await feedback.create(tenant, undefined, { run_id: rated, key: 'correctness', score: 0 });
    await feedback.create(tenant, undefined, { run_id: rated, key: 'label', value: 'spam' });

    const read = await exportRuns(
      { database, databaseUrl: testDb.url, traces, tenant, session, start: new Date('2026-04-02T00:00:00Z'), end: new Date('2026-04-03T00:00:00Z') },
      'SELECT name, feedback_stats FROM {runs} ORDER BY name',
    );
    expect(read.rows.map((r) => [r.name, r.feedback_stats === null ? null : JSON.parse(r.feedback_stats as string)])).toEqual([
      [
        'rated',
        {
          correctness: { n: 2, avg: 0.5, stdev: 0.5, values: {} },
          label: { n: 1, avg: null, stdev: null, values: { spam: 1 } },
        },
      ],
      ['unrated', null],
    ]);
  });
});
