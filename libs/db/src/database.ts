/**
 * Postgres access for one service schema: a pg pool whose connections have `search_path` pinned
 * to the schema, wrapped in Kysely. Services write unqualified table names.
 */
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

export interface DatabaseOptions {
  /** `postgres://user:pass@host:port/db` */
  connectionString: string;
  /** Schema that unqualified names resolve to (also created by {@link migrate}). */
  schema: string;
  /**
   * Pool size.
   * @default 10
   */
  max?: number;
  /** `application_name` shown in `pg_stat_activity`. */
  applicationName?: string;
}

export interface Database<DB> {
  db: Kysely<DB>;
  pool: pg.Pool;
  schema: string;
  close(): Promise<void>;
}

export function assertIdentifier(name: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a safe SQL identifier: ${JSON.stringify(name)}`);
  return name;
}

export function createPool(options: DatabaseOptions): pg.Pool {
  const schema = assertIdentifier(options.schema);
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.max ?? 10,
    application_name: options.applicationName ?? `berth-${schema}`,
    options: `-c search_path=${schema},public`,
  });
  // An idle client that loses its server emits on the pool; without a listener Node would crash.
  pool.on('error', () => undefined);
  return pool;
}

export function createDatabase<DB>(options: DatabaseOptions): Database<DB> {
  const pool = createPool(options);
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    pool,
    schema: options.schema,
    // Kysely's destroy() ends the pool it was given.
    close: () => db.destroy(),
  };
}
