/**
 * Postgres access for one service schema: a pg pool whose connections have `search_path` pinned
 * to the schema, wrapped in Kysely. Services write unqualified table names.
 */
import { Kysely, PostgresDialect } from 'kysely';
import { createHash } from 'node:crypto';
import pg from 'pg';
import { createLogger, type Logger } from '@berth/log';
import { gauge } from '@berth/metrics';
import { tracingOn } from '@berth/tracing';
import { traceStatements } from './tracing.js';

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
  /**
   * Run parameterized queries as named prepared statements (named by a hash of their text), so
   * Postgres parses and plans each distinct query once per connection instead of on every call.
   * @default false
   */
  prepareStatements?: boolean;
  /**
   * Commits wait for the WAL to reach disk. Off for data that may lose its last fraction of a
   * second in a machine crash (never its consistency): a commit then costs no fsync.
   * @default true
   */
  synchronousCommit?: boolean;
  /**
   * Where the pool logs a connection it lost while idle (the server restarted, a network cut).
   * @default a logger named `db` on stdout
   */
  log?: Logger;
}

export interface Database<DB> {
  db: Kysely<DB>;
  pool: pg.Pool;
  schema: string;
  close(): Promise<void>;
}

let fallbackLog: Logger | undefined;

/** The logger of callers that pass none. */
export function defaultLogger(): Logger {
  return (fallbackLog ??= createLogger({ name: 'db' }));
}

export function assertIdentifier(name: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a safe SQL identifier: ${JSON.stringify(name)}`);
  return name;
}

/** A Postgres identifier, quoted (for names a statement cannot take as a parameter: roles, databases). */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** A Postgres string literal, quoted (for statements that take no parameters: `ALTER ROLE … PASSWORD`). */
export function quoteLiteral(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}

/** Statement texts are few and fixed, so their names are computed once (hashing costs on every query). */
const statementNames = new Map<string, string>();
const MAX_STATEMENT_NAMES = 10_000;

function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `b${createHash('sha1').update(text).digest('base64url').slice(0, 20)}`;
    if (statementNames.size >= MAX_STATEMENT_NAMES) statementNames.clear();
    statementNames.set(text, name);
  }
  return name;
}

// Summed over the pools of the process, without a label per pool: a pool's name may carry a
// deployment's schema, and the process (the scrape target) already says whose pools they are.
const poolConnections = gauge<'state'>({
  name: 'berth_postgres_pool_connections',
  help: "Connections of the process's Postgres pools, by state (idle, in_use), and their maximum (max)",
  labelNames: ['state'],
});
const poolWaiting = gauge({
  name: 'berth_postgres_pool_waiting_requests',
  help: 'Queries of the process waiting for a connection of a full Postgres pool',
});

/** Reports the pool's counts at each scrape until it ends. */
function watchPool(pool: pg.Pool, max: number): void {
  const removers = [
    poolConnections.source(() => [
      { labels: { state: 'idle' }, value: pool.idleCount },
      { labels: { state: 'in_use' }, value: pool.totalCount - pool.idleCount },
      { labels: { state: 'max' }, value: max },
    ]),
    poolWaiting.source(() => [{ value: pool.waitingCount }]),
  ];
  // pg's Pool says nothing when it ends: its end() is wrapped so an ended pool stops being read.
  const end = pool.end.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { end: (...args: unknown[]) => unknown }).end = (...args) => {
    removers.forEach((remove) => remove());
    return end(...args);
  };
}

export function createPool(options: DatabaseOptions): pg.Pool {
  const schema = assertIdentifier(options.schema);
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.max ?? 10,
    application_name: options.applicationName ?? `berth-${schema}`,
    options: `-c search_path=${schema},public${options.synchronousCommit === false ? ' -c synchronous_commit=off' : ''}`,
  });
  // An idle client that loses its server emits on the pool (without a listener Node would crash);
  // the pool drops it and connects anew for the next query, so this is worth a warning only.
  const log = options.log ?? defaultLogger();
  pool.on('error', (error) =>
    log.warn({ err: error, schema, pool: options.applicationName ?? `berth-${schema}` }, 'idle Postgres connection lost; the pool replaces it'),
  );
  // The pool listens to a client only while it is idle. One checked out but between statements (a
  // transaction awaiting other work, a session held) that loses its server emits on itself: without
  // a listener Node would crash the process. Its next statement fails, which its caller handles.
  const inUse = new WeakSet<pg.PoolClient>();
  pool.on('acquire', (client) => inUse.add(client));
  pool.on('release', (_error, client) => inUse.delete(client));
  pool.on('connect', (client) => {
    let logged = false;
    client.on('error', (error) => {
      // An idle client's loss reaches the pool's listener above; a lost connection's later errors add nothing.
      if (!inUse.has(client) || logged) return;
      logged = true;
      log.warn({ err: error, schema, pool: options.applicationName ?? `berth-${schema}` }, 'Postgres connection lost while in use');
    });
  });
  watchPool(pool, options.max ?? 10);
  if (options.prepareStatements) {
    pool.on('connect', (client) => {
      const plain = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        const [text, values, callback] = args;
        if (typeof text === 'string' && Array.isArray(values) && values.length > 0) {
          const config = { name: statementName(text), text, values };
          return typeof callback === 'function' ? plain(config, callback) : plain(config);
        }
        return plain(...args);
      };
    });
  }
  // After the prepared-statement wrapper, so a span also covers it; decided once, as tracing
  // starts before any pool (off, statements go straight through).
  if (tracingOn()) pool.on('connect', (client) => traceStatements(client, schema));
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
