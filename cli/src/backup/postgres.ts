/**
 * The Postgres half of `berth backup` and `berth restore`: which databases and roles are Berth's
 * (the platform's database, and per deployment its agent database and three roles), dumped each in
 * one snapshot with the row count of every table taken in that same snapshot, and restored into
 * another server where the counts are checked again.
 */
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { agentDatabaseName, agentDatabaseRoles } from '@berth/control-plane';
import { quoteIdent as ident, quoteLiteral as literal } from '@berth/db';
import { CommandError, findPostgresBinaries, run } from '@berth/local-stack';
import { CliError } from '../client.js';

/** What the manifest records of one dumped database. */
export interface DumpedDatabase {
  name: string;
  /** `platform`: restored into the target's platform database, whatever its name; `agent`: created with its own name and owner. */
  kind: 'platform' | 'agent';
  /** Under the archive's root. */
  file: string;
  /** Rows per table (`schema.table`), counted in the dump's snapshot. */
  rows: Record<string, number>;
}

/** A dump or restore takes long on a big database; the 2-minute default of `run` is for quick commands. */
const DUMP_TIMEOUT_MS = 6 * 60 * 60 * 1000;

export class BerthPostgres {
  private constructor(
    /** The platform's database. */
    private readonly url: URL,
    private readonly binDir: string,
  ) {}

  /** Connects to check the server; finds a pg_dump/pg_restore no older than the server (a dump needs that). */
  static async open(databaseUrl: string): Promise<BerthPostgres> {
    const url = new URL(databaseUrl);
    const version = await withClient(url, async (c) => {
      const { rows } = await c.query<{ v: string; superuser: boolean }>(
        `SELECT current_setting('server_version_num') AS v, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser`,
      );
      if (!rows[0]!.superuser)
        throw new CliError(`${url.username} on ${url.host} is not a superuser: a backup reads every deployment's database and its roles' passwords`);
      return Number(rows[0]!.v);
    });
    return new BerthPostgres(url, await clientTools(Math.floor(version / 10_000)));
  }

  get platformDatabase(): string {
    return decodeURIComponent(this.url.pathname.slice(1));
  }

  /** The platform's database and each deployment's agent database that exists on this server. */
  async databases(): Promise<{ name: string; kind: 'platform' | 'agent' }[]> {
    return withClient(this.url, async (c) => {
      const deployments = await c
        .query<{ id: string }>('SELECT id FROM control_plane.deployments ORDER BY id')
        .then((r) => r.rows.map((d) => agentDatabaseName(d.id)))
        .catch((error: Error) => {
          throw new CliError(`${this.platformDatabase} on ${this.url.host} is not a Berth platform database: ${error.message}`, { cause: error });
        });
      const { rows } = await c.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname = ANY($1)', [deployments]);
      const present = new Set(rows.map((r) => r.datname));
      return [
        { name: this.platformDatabase, kind: 'platform' as const },
        ...deployments.filter((d) => present.has(d)).map((name) => ({ name, kind: 'agent' as const })),
      ];
    });
  }

  /**
   * SQL that recreates the agent databases' roles as they are: login or not, connection limit,
   * password (its hash), settings and memberships. The platform's own role is the target's.
   */
  async rolesSql(agentDatabases: string[]): Promise<string> {
    const names = agentDatabases.flatMap(agentDatabaseRoles);
    return withClient(this.url, async (c) => {
      const roles = await c.query<{ rolname: string; rolcanlogin: boolean; rolconnlimit: number; rolpassword: string | null }>(
        'SELECT rolname, rolcanlogin, rolconnlimit, rolpassword FROM pg_authid WHERE rolname = ANY($1) ORDER BY rolname',
        [names],
      );
      const settings = await c.query<{ rolname: string; setting: string }>(
        `SELECT r.rolname, unnest(s.setconfig) AS setting FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
          WHERE s.setdatabase = 0 AND r.rolname = ANY($1) ORDER BY 1, 2`,
        [names],
      );
      const members = await c.query<{ role: string; member: string }>(
        `SELECT r.rolname AS role, m.rolname AS member FROM pg_auth_members a
           JOIN pg_roles r ON r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member
          WHERE r.rolname = ANY($1) AND m.rolname = ANY($1) ORDER BY 1, 2`,
        [names],
      );
      const lines = roles.rows.map(
        (r) =>
          `CREATE ROLE ${ident(r.rolname)} WITH ${r.rolcanlogin ? 'LOGIN' : 'NOLOGIN'} CONNECTION LIMIT ${r.rolconnlimit}` +
          (r.rolpassword ? ` PASSWORD ${literal(r.rolpassword)}` : '') +
          ';',
      );
      for (const s of settings.rows) {
        const at = s.setting.indexOf('=');
        lines.push(`ALTER ROLE ${ident(s.rolname)} SET ${ident(s.setting.slice(0, at))} = ${literal(s.setting.slice(at + 1))};`);
      }
      for (const m of members.rows) lines.push(`GRANT ${ident(m.role)} TO ${ident(m.member)};`);
      return lines.join('\n') + '\n';
    });
  }

  /**
   * Dumps `database` (custom format) to `file` in one snapshot, counting each table's rows in the
   * same snapshot: the counts a restore must find again.
   */
  async dump(database: string, file: string): Promise<Record<string, number>> {
    const url = this.urlOf(database);
    return withClient(url, async (c) => {
      await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const snapshot = (await c.query<{ s: string }>('SELECT pg_export_snapshot() AS s')).rows[0]!.s;
      const rows = await countRows(c);
      await this.tool('pg_dump', ['--format=custom', `--snapshot=${snapshot}`, `--file=${file}`, `--dbname=${url.href}`]);
      await c.query('COMMIT');
      // A dump that pg_restore cannot read is found now, not on the day it is needed.
      await this.tool('pg_restore', ['--list', file]);
      return rows;
    });
  }

  /** What stands in the way of a restore here: tables in the platform's database, or agent databases or roles that exist already. */
  async conflicts(agentDatabases: string[]): Promise<string[]> {
    return withClient(this.url, async (c) => {
      const dbs = await c.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname = ANY($1)', [agentDatabases]);
      const roles = await c.query<{ rolname: string }>('SELECT rolname FROM pg_roles WHERE rolname = ANY($1)', [agentDatabases.flatMap(agentDatabaseRoles)]);
      const tables = await c.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace
          WHERE k.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'`,
      );
      return [
        ...(tables.rows[0]!.n > 0 ? [`the database ${this.platformDatabase} has tables`] : []),
        ...dbs.rows.map((r) => `the database ${r.datname} exists`),
        ...roles.rows.map((r) => `the role ${r.rolname} exists`),
      ];
    });
  }

  /** Runs `sql` (the backup's roles) on the platform's database. */
  async applySql(sql: string): Promise<void> {
    await withClient(this.url, (c) => c.query(sql));
  }

  /**
   * Restores a dump: the platform's into this server's platform database (its objects then
   * belong to this server's platform role), an agent database under its own name and owner.
   * Returns the rows per table found afterwards.
   */
  async restore(db: DumpedDatabase, file: string): Promise<Record<string, number>> {
    if (db.kind === 'platform') {
      await this.tool('pg_restore', ['--exit-on-error', '--no-owner', '--no-acl', `--dbname=${this.url.href}`, file]);
      return withClient(this.url, countRows);
    }
    await this.tool('pg_restore', ['--exit-on-error', '--create', `--dbname=${this.urlOf('postgres').href}`, file]);
    return withClient(this.urlOf(db.name), countRows);
  }

  private urlOf(database: string): URL {
    const url = new URL(this.url.href);
    url.pathname = `/${encodeURIComponent(database)}`;
    return url;
  }

  private async tool(name: 'pg_dump' | 'pg_restore', args: string[]): Promise<void> {
    try {
      await run(join(this.binDir, name), args, { timeoutMs: DUMP_TIMEOUT_MS, detached: true });
    } catch (error) {
      throw new CliError(`${name} failed: ${error instanceof CommandError ? error.stderr.trim().split('\n').slice(-5).join('\n') : String(error)}`, {
        cause: error,
      });
    }
  }
}

/** Rows of every table (partitions one by one; a partitioned parent holds none of its own). */
async function countRows(c: pg.Client): Promise<Record<string, number>> {
  const { rows: tables } = await c.query<{ name: string }>(
    `SELECT format('%I.%I', n.nspname, k.relname) AS name FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace
      WHERE k.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%' ORDER BY 1`,
  );
  const out: Record<string, number> = {};
  for (const { name } of tables) out[name] = Number((await c.query<{ n: string }>(`SELECT count(*) AS n FROM ${name}`)).rows[0]!.n);
  return out;
}

/** Tables whose rows differ between what was dumped and what was restored. */
export function rowDifferences(expected: Record<string, number>, found: Record<string, number>): string[] {
  const tables = new Set([...Object.keys(expected), ...Object.keys(found)]);
  return [...tables].filter((t) => expected[t] !== found[t]).map((t) => `${t}: ${expected[t] ?? 'no table'} in the backup, ${found[t] ?? 'no table'} restored`);
}

/** pg_dump and pg_restore of a major no older than the server's: the cluster's own, else the system's. */
async function clientTools(serverMajor: number): Promise<string> {
  const own = await findPostgresBinaries(serverMajor).catch(() => undefined);
  if (own && existsSync(join(own.binDir, 'pg_dump'))) return own.binDir;
  const system = await readdir('/usr/lib/postgresql').catch(() => [] as string[]);
  const major = system
    .map(Number)
    .filter((v) => v >= serverMajor && existsSync(`/usr/lib/postgresql/${v}/bin/pg_dump`))
    .sort((a, b) => a - b)[0];
  if (major === undefined) {
    throw new CliError(`no pg_dump of Postgres ${serverMajor} or newer: install the client (Debian: apt-get install postgresql-client-${serverMajor})`);
  }
  return `/usr/lib/postgresql/${major}/bin`;
}

async function withClient<T>(url: URL, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url.href });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
