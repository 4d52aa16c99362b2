/**
 * Export runs on @berth/lease, on real Postgres and the local S3 server with the lease clock moved
 * by hand: the lease contract (claim, renew, expiry, takeover only of a dead owner's run or after
 * the hold, the fence on a stale holder's writes), and a started runner that is woken — by the
 * notification of a new export, by the expiry of a dead worker's lease — instead of polling; and a
 * started export-worker whose one clock moves its scheduler, its exports and its runner together.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { ManualClock } from '@berth/clock';
import { createDatabase, migrate, type Database } from '@berth/db';
import { leaseContract, LeaseLostError, NO_TAKEOVER, type LeaseContractHarness } from '@berth/lease';
import { silentLogger } from '@berth/log';
import { SecretBox } from '@berth/secret-box';
import { createTestBucket, createTestDatabase, testS3, until, type TestDatabase } from '@berth/testing';
import { Destinations } from '../destinations/destinations.js';
import { exportWorkerMigrationsDir, start } from '../index.js';
import { TRACE_STORE_SCHEMA, TraceStore, type TraceTables } from '../traces/trace-store.js';
import { emptyCheckpoint } from '../writer/export-partition.js';
import { Exports } from './exports.js';
import { ExportRunner } from './runner.js';
import { ExportStore } from './store.js';
import type { BulkExportTables } from './tables.js';

const s3 = testS3();
const tenant = randomUUID();
let testDb: TestDatabase;
let database: Database<TraceTables>;
let traces: TraceStore;
let store: ExportStore;
let destinations: Destinations;
let exports: Exports;
let session: string;
let destinationId: string;

beforeAll(async () => {
  testDb = await createTestDatabase('ew_leases');
  await migrate({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA, directory: exportWorkerMigrationsDir });
  database = createDatabase<TraceTables>({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA });
  const db = database.db.withTables<BulkExportTables>();
  traces = new TraceStore(database);
  store = new ExportStore(db);
  destinations = new Destinations(db, new SecretBox(SecretBox.generateKey()), { logger: silentLogger(), clientOptions: { allowPrivateEndpoints: true } });
  exports = new Exports(db, store, traces);
  session = (await traces.createSession(tenant, { name: 'agent' })).id;
  const bucket = await createTestBucket('leases');
  destinationId = (
    await destinations.create(tenant, {
      destination_type: 's3',
      display_name: 'd',
      config: { bucket_name: bucket, prefix: 'out', endpoint_url: s3.endpoint, region: s3.region },
      credentials: { access_key_id: s3.accessKeyId, secret_access_key: s3.secretAccessKey },
    })
  ).id;
});
afterAll(async () => {
  await database?.close();
  await testDb?.drop();
});

/** A one-day export of an empty day: its one run, CREATED. */
async function oneDay(): Promise<{ exportId: string; runId: string }> {
  const exp = await exports.create(tenant, {
    bulk_export_destination_id: destinationId,
    session_id: session,
    start_time: new Date('2026-05-01T00:00:00Z'),
    end_time: new Date('2026-05-02T00:00:00Z'),
    format_version: 'v2_beta',
  });
  return { exportId: exp.id, runId: (await store.runs(exp.id))[0]!.id };
}

/** Ends every export still open: a contract case or test leaves nothing another's claim could take. */
async function closeAll(): Promise<void> {
  for (const exp of await store.list(tenant, { limit: 1000, offset: 0 })) {
    if (exp.status === 'CREATED' || exp.status === 'RUNNING') await store.cancel(tenant, exp.id, new Date());
  }
}

describe('export runs: the lease contract', () => {
  const clock = new ManualClock(Date.now());
  const now = () => new Date(clock.now());
  const harness: LeaseContractHarness = {
    clock,
    async create() {
      await closeAll();
      return (await oneDay()).runId;
    },
    rows: {
      async claim(id, owner, { leaseMs, takeover }) {
        const claimed = await store.claim(owner, now(), leaseMs, 100, takeover);
        if (claimed && claimed.run.id !== id) throw new Error(`claimed run ${claimed.run.id}, another than the contract's ${id}`);
        return claimed && { owner, token: claimed.run.lease_token };
      },
      renew: (id, holder, { leaseMs }) => store.renew(id, holder, now(), leaseMs),
      async write(id, holder) {
        try {
          await store.saveCheckpoint(id, holder, emptyCheckpoint(), now());
          return true;
        } catch (error) {
          if (error instanceof LeaseLostError) return false;
          throw error;
        }
      },
    },
    get connectionString() {
      return testDb.url;
    },
    log: silentLogger(),
  };
  for (const c of leaseContract(() => harness)) it(c.name, () => c.run());
});

describe('a started runner', () => {
  const runOf = async (exportId: string) => (await store.runs(exportId))[0]!;

  it('starts a new export at once, woken by its notification: its clock stands still and its safety poll is an hour away', async () => {
    await closeAll();
    const clock = new ManualClock(Date.now());
    const runner = new ExportRunner({ store, databaseUrl: testDb.url, destinations, traces, logger: silentLogger(), clock, pollMs: 3_600_000 });
    await runner.start();
    try {
      // The first pass found nothing: the runner sleeps (its timer, and its liveness session's probe).
      await until('the runner to sleep', async () => (clock.pending >= 2 ? true : undefined), 10_000);
      const { exportId } = await oneDay();
      const done = await until(
        'the export to complete',
        async () => {
          const row = await store.get(tenant, exportId);
          return row.status === 'COMPLETED' ? row : undefined;
        },
        20_000,
      );
      expect(done.status).toBe('COMPLETED');
    } finally {
      await runner.stop();
    }
  });

  it("takes a dead worker's run over when its lease expires, woken at that time, not before", async () => {
    await closeAll();
    const clock = new ManualClock(Date.now());
    const leaseMs = 10_000;
    const { exportId, runId } = await oneDay();
    // A worker (with no liveness session: dead) claimed the run and died.
    const dead = await store.claim('worker-dead', new Date(clock.now()), leaseMs, 100, NO_TAKEOVER);
    expect(dead?.run.id).toBe(runId);
    const expiresAt = clock.now() + leaseMs;
    const runner = new ExportRunner({ store, databaseUrl: testDb.url, destinations, traces, logger: silentLogger(), clock, leaseMs, pollMs: 3_600_000 });
    await runner.start();
    try {
      const takenAt = await until(
        'the run to be taken over',
        async () => {
          const row = await runOf(exportId);
          if (row.lease_owner === runner.owner || row.status === 'COMPLETED') return clock.now();
          await clock.advance(1000);
          return undefined;
        },
        30_000,
      );
      // Not before the lease expired; and long before the safety poll: the expiry woke it.
      expect(takenAt).toBeGreaterThan(expiresAt);
      expect(takenAt).toBeLessThan(expiresAt + 60_000);
      const done = await until(
        'the export to complete',
        async () => {
          const row = await store.get(tenant, exportId);
          return row.status === 'COMPLETED' ? row : undefined;
        },
        20_000,
      );
      expect(done.status).toBe('COMPLETED');
      expect((await runOf(exportId)).lease_token).toBe(2);
    } finally {
      await runner.stop();
    }
  });
});

describe('a started export-worker on one clock', () => {
  it('spawns a scheduled interval when that clock passes it, and runs it to COMPLETED with the times of that clock', async () => {
    await closeAll();
    const clock = new ManualClock(Date.parse('2026-05-10T12:00:00Z'));
    const worker = await start(
      {
        databaseUrl: testDb.url,
        secretKey: SecretBox.generateKey(),
        grpcHost: '127.0.0.1',
        grpcPort: 0,
        logLevel: 'silent',
        bulkExports: { clock, scheduleIntervalMs: 60_000, pollMs: 3_600_000, allowPrivateEndpoints: true },
      },
      silentLogger(),
    );
    try {
      const destination = await worker.bulkExports.destinations.create(tenant, {
        destination_type: 's3',
        display_name: 'hourly',
        config: { bucket_name: await createTestBucket('clock'), prefix: 'out', endpoint_url: s3.endpoint, region: s3.region },
        credentials: { access_key_id: s3.accessKeyId, secret_access_key: s3.secretAccessKey },
      });
      // Its first interval, [11:00, 12:00), is due 10 minutes after it ends: at 12:10 by this clock.
      const schedule = await worker.bulkExports.exports.create(tenant, {
        bulk_export_destination_id: destination.id,
        session_id: session,
        start_time: new Date('2026-05-10T11:00:00Z'),
        interval_hours: 1,
        format_version: 'v2_beta',
      });
      expect(schedule.created_at).toEqual(new Date('2026-05-10T12:00:00Z'));
      const spawnedOf = async () => (await store.list(tenant, { limit: 1000, offset: 0 })).filter((e) => e.source_bulk_export_id === schedule.id);
      // The scheduler's passes come from the clock: a pass after each minute it moves. None spawns before 12:10.
      const spawned = await until(
        'the first interval to be spawned',
        async () => {
          const found = await spawnedOf();
          if (found.length) return found;
          await clock.advance(60_000);
          return undefined;
        },
        30_000,
      );
      expect(spawned).toHaveLength(1);
      const [exp] = spawned;
      expect(exp!.created_at.getTime()).toBeGreaterThanOrEqual(Date.parse('2026-05-10T12:10:00Z'));
      // The runner, woken by the spawn's notification, claims and finishes it by the same clock.
      const done = await until(
        'the spawned export to complete',
        async () => {
          const row = await store.get(tenant, exp!.id);
          return row.status === 'COMPLETED' ? row : undefined;
        },
        20_000,
      );
      expect(done.start_time).toEqual(new Date('2026-05-10T11:00:00Z'));
      for (const at of [done.started_at!, done.finished_at!]) {
        expect(at.getTime()).toBeGreaterThanOrEqual(exp!.created_at.getTime());
        expect(at.getTime()).toBeLessThanOrEqual(clock.now());
      }
    } finally {
      await worker.close();
    }
  });
});
