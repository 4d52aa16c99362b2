// The broker contract against Postgres (the embedded default), on a fresh database of the shared
// test cluster, in a non-default schema; plus what is particular to this adapter.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ManualClock } from '@berth/clock';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import pg from 'pg';
import { describeBrokerContract } from './contract/broker-contract.js';
import { drain, newRunId, waitingForWakeUp } from './contract/harness.js';
import { PostgresEventBroker } from './postgres-broker.js';

const SCHEMA = 'broker_test';

describeBrokerContract('postgres', async () => {
  const db = await createTestDatabase('broker');
  return {
    create: (options) => new PostgresEventBroker({ connectionString: db.url, schema: SCHEMA, ...options }),
    teardown: () => db.drop(),
  };
});

describe('PostgresEventBroker', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('broker');
  });
  afterAll(async () => {
    await db.drop();
  });

  it('listens on ONE connection per instance, however many subscriptions and control handlers', async () => {
    const broker = new PostgresEventBroker({ connectionString: db.url });
    try {
      expect(await broker.migrate()).toEqual([1]);
      expect(await broker.migrate()).toEqual([1]); // memoized
      const subs = Array.from({ length: 20 }, () => broker.subscribe(newRunId(), { from: 'start' }));
      await Promise.all(subs.map((s) => s.ready));
      await broker.onControl(newRunId(), () => undefined);
      const admin = new pg.Client({ connectionString: db.url });
      await admin.connect();
      try {
        const { rows } = await admin.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'berth-broker-broker-listen'",
        );
        expect(rows[0]?.n).toBe(1);
        const tables = await admin.query<{ table_name: string }>(
          "SELECT table_name FROM information_schema.tables WHERE table_schema = 'broker' ORDER BY table_name",
        );
        expect(tables.rows.map((r) => r.table_name)).toEqual(['berth_migrations', 'run_events', 'run_streams']);
      } finally {
        await admin.end();
      }
    } finally {
      await broker.close();
    }
  });

  it('re-establishes a lost LISTEN connection and catches its subscribers up', async () => {
    // The subscriber's clock stands still: its safety re-read never runs, so only the reconnect's catch-up can deliver.
    const clock = new ManualClock();
    const [broker, publisher] = [new PostgresEventBroker({ connectionString: db.url, clock }), new PostgresEventBroker({ connectionString: db.url })];
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    try {
      const run = newRunId();
      const sub = broker.subscribe(run, { from: 'start' });
      await sub.ready;
      const reading = drain(sub);
      await waitingForWakeUp(clock);
      const killed = await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'berth-broker-broker-listen'",
      );
      expect(killed.rowCount).toBe(1);
      await publisher.publish(run, 'values', 'while nobody listened');
      await publisher.end(run);
      expect(await reading).toEqual([{ id: '0', event: 'values', data: 'while nobody listened' }]);
      const control: unknown[] = [];
      await broker.onControl(run, (m) => control.push(m));
      await publisher.sendControl(run, { action: 'interrupt' });
      await until('the control message', () => (control.length ? true : undefined));
      expect(control).toEqual([{ action: 'interrupt' }]);
    } finally {
      await admin.end();
      await Promise.all([broker.close(), publisher.close()]);
    }
  });
});
