/**
 * Numbered SQL migrations per service schema. Files are `NNNN_description.sql` in one folder,
 * applied in order, each in its own transaction, under a Postgres advisory lock so that several
 * processes starting at once apply each migration exactly once.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import type { Logger } from '@berth/log';
import { assertIdentifier, defaultLogger } from './database.js';

export interface MigrationFile {
  version: number;
  name: string;
  path: string;
}

export interface MigrateOptions {
  connectionString: string;
  schema: string;
  /** Folder holding `NNNN_description.sql` files. */
  directory: string;
  /**
   * Where failures to clean up after an error are logged (the error itself is thrown).
   * @default a logger named `db` on stdout
   */
  log?: Logger;
}

export class MigrationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MigrationError';
  }
}

export async function listMigrations(directory: string): Promise<MigrationFile[]> {
  const files = (await readdir(directory)).filter((f) => f.endsWith('.sql')).sort();
  const migrations: MigrationFile[] = [];
  for (const file of files) {
    const match = /^(\d{4})_([a-z0-9_]+)\.sql$/.exec(file);
    if (!match) throw new MigrationError(`migration file name must be NNNN_description.sql: ${file}`);
    const version = Number(match[1]);
    const previous = migrations.at(-1);
    if (version !== (previous?.version ?? 0) + 1) {
      throw new MigrationError(`migrations in ${directory} must be numbered 1, 2, 3… without gaps; found ${file}`);
    }
    migrations.push({ version, name: match[2]!, path: join(directory, file) });
  }
  return migrations;
}

/** Applies pending migrations; returns the versions applied by this call. */
export async function migrate(options: MigrateOptions): Promise<number[]> {
  const schema = assertIdentifier(options.schema);
  const log = options.log ?? defaultLogger();
  const migrations = await listMigrations(options.directory);
  const client = sessionClient(options.connectionString, `berth.migrate.${schema}`, log);
  await client.connect();
  const applied: number[] = [];
  try {
    // Session-level lock keyed by schema: concurrent starters wait here instead of racing.
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [`berth.migrate.${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${schema}.berth_migrations (
         version integer PRIMARY KEY,
         name text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const done = new Map<number, string>(
      (await client.query<{ version: number; name: string }>(`SELECT version, name FROM ${schema}.berth_migrations`)).rows.map((r) => [r.version, r.name]),
    );
    for (const migration of migrations) {
      const doneName = done.get(migration.version);
      if (doneName !== undefined) {
        if (doneName !== migration.name) {
          throw new MigrationError(`${schema} migration ${migration.version} was applied as "${doneName}" but the file is "${migration.name}"`);
        }
        continue;
      }
      const sql = await readFile(migration.path, 'utf8');
      await client.query('BEGIN');
      try {
        await client.query(`SET LOCAL search_path TO ${schema}, public`);
        await client.query(sql);
        await client.query(`INSERT INTO ${schema}.berth_migrations (version, name) VALUES ($1, $2)`, [migration.version, migration.name]);
        await client.query('COMMIT');
      } catch (error) {
        // A failed ROLLBACK must not replace the error that says which migration failed; the
        // transaction ends with the session below anyway.
        await client
          .query('ROLLBACK')
          .catch((rollbackError: unknown) => log.warn({ err: rollbackError, schema, migration: migration.version }, 'rollback of a failed migration failed'));
        throw new MigrationError(`${schema} migration ${migration.version}_${migration.name} failed`, { cause: error });
      }
      applied.push(migration.version);
    }
  } finally {
    await endLocked(client, `berth.migrate.${schema}`, log);
  }
  return applied;
}

/**
 * Runs `fn` while holding a session-level advisory lock named `name` on the database: for setup
 * that third-party code does without a lock of its own (`CREATE TABLE IF NOT EXISTS` from two
 * processes at once can fail), so that processes starting together take turns.
 */
export async function withAdvisoryLock<T>(connectionString: string, name: string, fn: () => Promise<T>, log: Logger = defaultLogger()): Promise<T> {
  const client = sessionClient(connectionString, name, log);
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [name]);
    return await fn();
  } finally {
    await endLocked(client, name, log);
  }
}

/**
 * A client for a session holding an advisory lock. A session that dies (server restart, network
 * cut) fails the query in flight, which the caller throws; the client also emits the failure as an
 * event, which would crash the process without a listener.
 */
function sessionClient(connectionString: string, lock: string, log: Logger): pg.Client {
  const client = new pg.Client({ connectionString });
  client.on('error', (error) => log.warn({ err: error, lock }, 'the session holding an advisory lock was lost'));
  return client;
}

/**
 * Releases a session-level advisory lock and ends the session. Runs in `finally` blocks, so it
 * does not throw over the error being thrown: the lock ends with the session in any case, and a
 * failure here is logged instead.
 */
async function endLocked(client: pg.Client, name: string, log: Logger): Promise<void> {
  try {
    await client.query('SELECT pg_advisory_unlock(hashtext($1))', [name]);
  } catch (error) {
    log.warn({ err: error, lock: name }, 'could not release an advisory lock; it ends with the session');
  }
  try {
    await client.end();
  } catch (error) {
    log.warn({ err: error, lock: name }, 'could not end the session of an advisory lock');
  }
}
