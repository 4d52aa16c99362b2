import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { testEnv } from './env.js';

/** Superuser URL of the `postgres` database of the test cluster. */
export function testPostgresAdminUrl(): string {
  return testEnv('postgresUrl');
}

export interface TestDatabase {
  name: string;
  /** Superuser connection string to the new database. */
  url: string;
  /** Drops the database (ending any sessions still open in it). */
  drop(): Promise<void>;
}

/** A fresh, empty database on the shared test cluster: one per test file keeps files independent. */
export async function createTestDatabase(prefix = 't'): Promise<TestDatabase> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const adminUrl = testPostgresAdminUrl();
  await withAdmin(adminUrl, (c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    drop: () => withAdmin(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

async function withAdmin<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
