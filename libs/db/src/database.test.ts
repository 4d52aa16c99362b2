/**
 * Connection failures on the database paths are logged and surfaced, never swallowed: a pool that
 * loses an idle connection says so (and keeps working); a migration whose session dies is reported
 * as that migration's failure.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { captureLogger, createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { createPool, migrate, MigrationError } from './index.js';

let db: TestDatabase;
let admin: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase('db_paths');
  admin = new pg.Pool({ connectionString: db.url, max: 1 });
});
afterAll(async () => {
  await admin?.end();
  await db?.drop();
});

it('logs an idle connection the server ended, and serves the next query on a new one', async () => {
  const logs = captureLogger();
  const pool = createPool({ connectionString: db.url, schema: 'app', applicationName: 'berth-idle-test', log: logs.logger });
  try {
    await pool.query('SELECT 1');
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'berth-idle-test'");
    const lost = () => logs.lines().filter((l) => l.msg === 'idle Postgres connection lost; the pool replaces it');
    await until('the lost connection to be logged', () => lost().length > 0, 5_000, 20);
    expect(lost()).toMatchObject([{ level: 40, schema: 'app', pool: 'berth-idle-test', err: { message: expect.stringMatching(/terminat/) } }]);
    // Not the whole pg client that pg-pool hangs on the error.
    expect(lost()[0]!.err).not.toHaveProperty('client');
    expect(lost()[0]!.err).toMatchObject({ code: '57P01' });
    expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  } finally {
    await pool.end();
  }
});

it('survives the loss of a connection checked out between statements, logging it; the pool serves on', async () => {
  const logs = captureLogger();
  const pool = createPool({ connectionString: db.url, schema: 'app', applicationName: 'berth-held-test', log: logs.logger });
  try {
    // Held, as a transaction awaiting other work holds its connection: no statement in flight.
    const held = await pool.connect();
    await held.query('SELECT 1');
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'berth-held-test'");
    const lost = () => logs.lines().filter((l) => l.msg === 'Postgres connection lost while in use');
    await until('the lost connection to be logged', () => lost().length > 0, 5_000, 20);
    // Once per connection, however many errors its end brings.
    expect(lost()).toMatchObject([{ level: 40, schema: 'app', pool: 'berth-held-test', err: { code: '57P01' } }]);
    await expect(held.query('SELECT 1')).rejects.toThrow();
    // As Kysely does after a failed statement: the pool drops a client whose connection is gone.
    held.release();
    expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  } finally {
    await pool.end();
  }
});

it('reports a migration whose session died as that migration failing, and logs the cleanup it could not do', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-migrations-'));
  const logs = captureLogger();
  try {
    await writeFile(join(dir, '0001_create_things.sql'), 'CREATE TABLE things (id int);');
    await writeFile(join(dir, '0002_lose_the_session.sql'), 'SELECT pg_terminate_backend(pg_backend_pid());');
    const failure = await migrate({ connectionString: db.url, schema: 'dying', directory: dir, log: logs.logger }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(MigrationError);
    expect((failure as Error).message).toBe('dying migration 2_lose_the_session failed');
    expect(((failure as Error).cause as Error).message).toMatch(/terminat/);
    expect(logs.lines().map((l) => l.msg)).toEqual(
      expect.arrayContaining(['rollback of a failed migration failed', 'could not release an advisory lock; it ends with the session']),
    );
    // The first migration stays applied; the lock died with the session, so the next run is not blocked.
    await writeFile(join(dir, '0002_lose_the_session.sql'), 'SELECT 1;');
    await expect(migrate({ connectionString: db.url, schema: 'dying', directory: dir, log: logs.logger })).resolves.toEqual([2]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
