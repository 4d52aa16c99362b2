/**
 * Numbered SQL migrations per service schema. Files are `NNNN_description.sql` in one folder,
 * applied in order, each in its own transaction, under a Postgres advisory lock so that several
 * processes starting at once apply each migration exactly once.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { assertIdentifier } from './database.js';

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
  const migrations = await listMigrations(options.directory);
  const client = new pg.Client({ connectionString: options.connectionString });
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
      (await client.query<{ version: number; name: string }>(`SELECT version, name FROM ${schema}.berth_migrations`)).rows.map(
        (r) => [r.version, r.name],
      ),
    );
    for (const migration of migrations) {
      const doneName = done.get(migration.version);
      if (doneName !== undefined) {
        if (doneName !== migration.name) {
          throw new MigrationError(
            `${schema} migration ${migration.version} was applied as "${doneName}" but the file is "${migration.name}"`,
          );
        }
        continue;
      }
      const sql = await readFile(migration.path, 'utf8');
      await client.query('BEGIN');
      try {
        await client.query(`SET LOCAL search_path TO ${schema}, public`);
        await client.query(sql);
        await client.query(`INSERT INTO ${schema}.berth_migrations (version, name) VALUES ($1, $2)`, [
          migration.version,
          migration.name,
        ]);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        throw new MigrationError(`${schema} migration ${migration.version}_${migration.name} failed`, { cause: error });
      }
      applied.push(migration.version);
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock(hashtext($1))', [`berth.migrate.${schema}`]).catch(() => undefined);
    await client.end();
  }
  return applied;
}

/**
 * Runs `fn` while holding a session-level advisory lock named `name` on the database: for setup
 * that third-party code does without a lock of its own (`CREATE TABLE IF NOT EXISTS` from two
 * processes at once can fail), so that processes starting together take turns.
 */
export async function withAdvisoryLock<T>(connectionString: string, name: string, fn: () => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [name]);
    return await fn();
  } finally {
    await client.query('SELECT pg_advisory_unlock(hashtext($1))', [name]).catch(() => undefined);
    await client.end();
  }
}
