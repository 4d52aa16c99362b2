/**
 * Retention on a real Postgres with a clock the test moves: runs of a base-tier project go when
 * their 14 days are up — a day whose runs all expired loses its whole partition, a day that keeps
 * an extended-tier project's runs loses only the expired ones — with their feedback and share
 * links; per-tenant settings change the days and the default tier; and an export whose range
 * reaches back past the retention says so.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { ManualClock } from '@berth/clock';
import { createDatabase, migrate, sql, type Database } from '@berth/db';
import { silentLogger } from '@berth/log';
import { SecretBox } from '@berth/secret-box';
import { createTestBucket, createTestDatabase, testS3, type TestDatabase } from '@berth/testing';
import { Destinations } from '../destinations/destinations.js';
import { Exports } from '../exports/exports.js';
import { ExportStore } from '../exports/store.js';
import type { BulkExportTables } from '../exports/tables.js';
import { exportWorkerMigrationsDir } from '../index.js';
import { FeedbackStore } from './feedback-store.js';
import { RetentionPolicy, RetentionSweeper, type RetentionConfig } from './retention.js';
import { TraceShares } from './trace-shares.js';
import { TRACE_STORE_SCHEMA, TraceStore, type TraceTables } from './trace-store.js';

let testDb: TestDatabase;
let database: Database<TraceTables>;
let store: TraceStore;

beforeAll(async () => {
  testDb = await createTestDatabase('ew_retention');
  await migrate({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA, directory: exportWorkerMigrationsDir });
  database = createDatabase<TraceTables>({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA });
  store = new TraceStore(database);
});
afterAll(async () => {
  await database?.close();
  await testDb?.drop();
});

function sweeper(clock: ManualClock, config: RetentionConfig = {}) {
  return new RetentionSweeper({
    db: database.db,
    policy: new RetentionPolicy(config),
    logger: silentLogger(),
    clock,
    batchSize: 2,
    onDropped: (days) => store.forgetPartitions(days),
  });
}

/** Stores one root run of `session` per start time; answers their ids. */
async function runs(tenant: string, session: string, ...starts: string[]): Promise<string[]> {
  const ids = starts.map(() => randomUUID());
  const result = await store.upsertRuns(
    tenant,
    starts.map((start, i) => ({ op: 'create' as const, id: ids[i]!, session_id: session, name: 'agent', run_type: 'chain', start_time: start })),
  );
  expect(result.rejected).toEqual([]);
  return ids;
}

async function partitions(): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`SELECT relname AS name FROM pg_class
    WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r' AND relname ~ '^runs_[0-9]{8}$' ORDER BY 1`.execute(database.db);
  return rows.map((r) => r.name);
}

const exists = (tenant: string, id: string) =>
  store.getRun(tenant, id).then(
    () => true,
    (error: { code?: string }) => (error.code === 'not_found' ? false : Promise.reject(error)),
  );

describe('retention', () => {
  it("drops a day whose runs all expired, deletes a base project's expired runs from a day that keeps extended ones, and keeps the rest", async () => {
    const tenant = randomUUID();
    const base = (await store.createSession(tenant, { name: 'base', trace_tier: 'shortlived' })).id;
    const extended = (await store.createSession(tenant, { name: 'extended', trace_tier: 'longlived' })).id;
    const [oldA, oldB] = await runs(tenant, base, '2025-03-01T08:00:00Z', '2025-03-01T20:00:00Z');
    // Three expired runs in a day that keeps one: deleted in batches of two.
    const mixedBase = await runs(tenant, base, '2025-03-02T01:00:00Z', '2025-03-02T02:00:00Z', '2025-03-02T12:00:00Z');
    const [mixedExtended, extendedAlone] = await runs(tenant, extended, '2025-03-02T13:00:00Z', '2025-03-03T10:00:00Z');
    const [recent] = await runs(tenant, base, '2025-03-10T12:00:00Z');
    expect((await store.getRun(tenant, oldA!)).trace_tier).toBe('shortlived');
    expect((await store.getRun(tenant, mixedExtended!)).trace_tier).toBe('longlived');
    // What goes with a run: its feedback and the share link of its trace.
    const feedback = new FeedbackStore(database.db);
    await feedback.create(tenant, undefined, { run_id: oldA, key: 'correct', score: 1 });
    const shares = new TraceShares(database.db, new SecretBox(SecretBox.generateKey()));
    await shares.share(tenant, { sessionId: base, kind: 'trace', subject: oldA! });

    const clock = new ManualClock(Date.parse('2025-03-14T00:00:00Z'));
    const sweep = sweeper(clock);
    expect(await sweep.sweep()).toEqual({ droppedDays: [], deletedRuns: 0 }); // 13 days: nothing expired yet
    expect(await partitions()).toEqual(expect.arrayContaining(['runs_20250301', 'runs_20250302']));

    await clock.advance(Date.parse('2025-03-16T18:00:00Z') - clock.now());
    expect(await sweep.sweep()).toEqual({ droppedDays: ['2025-03-01'], deletedRuns: 3 });
    const left = await partitions();
    expect(left).not.toContain('runs_20250301');
    expect(left).toEqual(expect.arrayContaining(['runs_20250302', 'runs_20250303', 'runs_20250310']));
    // Expired runs read as missing ones; the rest are there.
    expect(await exists(tenant, oldA!)).toBe(false);
    expect(await exists(tenant, oldB!)).toBe(false);
    for (const id of mixedBase) expect(await exists(tenant, id)).toBe(false);
    for (const id of [mixedExtended, extendedAlone, recent]) expect(await exists(tenant, id!)).toBe(true);
    const { rows: left_ } = await sql<{ keys: string; feedback: string; shares: string }>`SELECT
      (SELECT count(*) FROM run_keys WHERE id = ANY(${[oldA, oldB, ...mixedBase]}::uuid[])) AS keys,
      (SELECT count(*) FROM feedback WHERE tenant_id = ${tenant}::uuid) AS feedback,
      (SELECT count(*) FROM trace_shares WHERE tenant_id = ${tenant}::uuid) AS shares`.execute(database.db);
    expect(left_[0]).toEqual({ keys: '0', feedback: '0', shares: '0' });

    // A late run of a dropped day makes its partition again (and goes at the next sweep).
    const [late] = await runs(tenant, base, '2025-03-01T09:00:00Z');
    expect(await exists(tenant, late!)).toBe(true);
    expect(await sweep.sweep()).toEqual({ droppedDays: ['2025-03-01'], deletedRuns: 0 });

    // The extended project's runs stay until their 400 days are up; then their days go whole.
    await clock.advance(Date.parse('2026-04-20T00:00:00Z') - clock.now());
    expect(await sweep.sweep()).toEqual({ droppedDays: ['2025-03-02', '2025-03-03', '2025-03-10'], deletedRuns: 0 });
    expect(await exists(tenant, mixedExtended!)).toBe(false);
  });

  it("a project's new tier applies to the traces that arrive after it changed", async () => {
    const tenant = randomUUID();
    const project = (await store.createSession(tenant, { name: 'changes', trace_tier: 'shortlived' })).id;
    const [before] = await runs(tenant, project, '2025-05-01T12:00:00Z');
    await store.updateSession(tenant, project, { trace_tier: 'longlived' });
    const [after] = await runs(tenant, project, '2025-05-01T13:00:00Z');
    expect((await store.getRun(tenant, before!)).trace_tier).toBe('shortlived');
    expect((await store.getRun(tenant, after!)).trace_tier).toBe('longlived');
    const report = await sweeper(new ManualClock(Date.parse('2025-05-20T00:00:00Z'))).sweep();
    expect(report).toEqual({ droppedDays: [], deletedRuns: 1 });
    expect(await exists(tenant, before!)).toBe(false);
    expect(await exists(tenant, after!)).toBe(true);
  });

  it("per-tenant settings: one tenant's base tier is 3 days, another's projects default to the extended tier", async () => {
    const short = randomUUID();
    const keeps = randomUUID();
    const plain = randomUUID();
    // Projects without a tier (made before tiers, or by a writer that sets none) have their tenant's default.
    const [shortRun] = await runs(short, (await store.createSession(short, { name: 'p' })).id, '2025-07-01T12:00:00Z');
    const [keptRun] = await runs(keeps, (await store.createSession(keeps, { name: 'p' })).id, '2025-07-01T12:00:00Z');
    const [plainRun] = await runs(plain, (await store.createSession(plain, { name: 'p' })).id, '2025-07-01T12:00:00Z');
    const config: RetentionConfig = { tenants: { [short]: { baseDays: 3 }, [keeps]: { defaultTier: 'longlived' } } };
    const clock = new ManualClock(Date.parse('2025-07-05T00:00:00Z'));
    const sweep = sweeper(clock, config);
    expect(await sweep.sweep()).toEqual({ droppedDays: [], deletedRuns: 1 });
    expect([await exists(short, shortRun!), await exists(keeps, keptRun!), await exists(plain, plainRun!)]).toEqual([false, true, true]);
    await clock.advance(Date.parse('2025-07-16T00:00:00Z') - clock.now());
    expect(await sweep.sweep()).toEqual({ droppedDays: [], deletedRuns: 1 });
    expect([await exists(keeps, keptRun!), await exists(plain, plainRun!)]).toEqual([true, false]);
    // A project ingest makes by name gets its tenant's default tier, and its runs carry it.
    const policy = new RetentionPolicy(config);
    const ingestStore = new TraceStore(database, { defaultTier: (t) => policy.settings(t).defaultTier });
    const { session } = await ingestStore.ensureSession(keeps, { name: 'made-by-ingest' });
    expect(session.trace_tier).toBe('longlived');
    const [run] = await runs(keeps, session.id, '2025-07-15T12:00:00Z');
    expect((await store.getRun(keeps, run!)).trace_tier).toBe('longlived');
    expect((await ingestStore.ensureSession(short, { name: 'made-by-ingest' })).session.trace_tier).toBe('shortlived');
  });

  it("another replica's store makes a dropped day's partition again rather than trust that it saw it before", async () => {
    const tenant = randomUUID();
    const replica = new TraceStore(database, { droppableAfterDays: 14 });
    const project = (await replica.createSession(tenant, { name: 'replica', trace_tier: 'shortlived' })).id;
    const write = (start: string) =>
      replica.upsertRuns(tenant, [{ op: 'create', id: randomUUID(), session_id: project, name: 'agent', run_type: 'chain', start_time: start }]);
    expect((await write('2025-01-10T12:00:00Z')).stored).toHaveLength(1);
    // Another process's sweeper drops the day; this store is not told.
    expect((await sweeper(new ManualClock(Date.parse('2025-02-01T00:00:00Z'))).sweep()).droppedDays).toEqual(['2025-01-10']);
    expect((await write('2025-01-10T13:00:00Z')).stored).toHaveLength(1);
  });
});

describe('exports over expired days', () => {
  it('say that the runs before the retention are not exported; an export within it says nothing', async () => {
    const s3 = testS3();
    const tenant = randomUUID();
    const db = database.db.withTables<BulkExportTables>();
    const destinations = new Destinations(db, new SecretBox(SecretBox.generateKey()), {
      logger: silentLogger(),
      clientOptions: { allowPrivateEndpoints: true },
    });
    const destination = await destinations.create(tenant, {
      destination_type: 's3',
      display_name: 'd',
      config: { bucket_name: await createTestBucket('retention'), prefix: 'out', endpoint_url: s3.endpoint, region: s3.region },
      credentials: { access_key_id: s3.accessKeyId, secret_access_key: s3.secretAccessKey },
    });
    const clock = new ManualClock(Date.parse('2025-09-30T00:00:00Z'));
    const exports = new Exports(db, new ExportStore(db), store, { clock, retention: new RetentionPolicy() });
    const base = (await store.createSession(tenant, { name: 'base', trace_tier: 'shortlived' })).id;
    const extended = (await store.createSession(tenant, { name: 'extended', trace_tier: 'longlived' })).id;
    const exportOf = (session: string, start: string) =>
      exports.create(tenant, {
        bulk_export_destination_id: destination.id,
        session_id: session,
        start_time: new Date(start),
        end_time: new Date('2025-09-29T00:00:00Z'),
        format_version: 'v2_beta',
      });
    expect((await exportOf(base, '2025-09-01T00:00:00Z')).status_message).toBe(
      "runs that started before 2025-09-16T00:00:00.000Z are past the project's retention (14 days) and are not exported",
    );
    expect((await exportOf(base, '2025-09-20T00:00:00Z')).status_message).toBe('');
    expect((await exportOf(extended, '2025-09-01T00:00:00Z')).status_message).toBe('');
  });
});
