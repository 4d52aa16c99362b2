/**
 * Each deployment's agent servers get a Postgres database of their own and roles that reach only
 * it — never the platform's superuser. Per deployment:
 *
 * - `berth_agent_<id>`: a NOLOGIN role that owns the database `berth_agent_<id>` (and so every
 *   schema and table the agent server creates in it); nobody else may connect to that database.
 * - `berth_agent_<id>_a` / `_b`: two LOGIN roles, members of the owner, whose sessions act as it
 *   (`ALTER ROLE … SET role`), each limited to `connectionLimit` connections. Every deploy gives
 *   the login that the serving revision does not use a fresh random password: the new revision
 *   gets it, the old one keeps working with its own until it is retired — the password rotates
 *   with every revision without cutting off the one still serving. Which login a revision has is
 *   recorded with it (the pipeline's `databaseLogin`), because counting sessions cannot tell while
 *   the serving revision is itself still starting (brought back after a control-plane restart).
 *
 * A database of its own (rather than a schema in the platform's) is what keeps deployments apart:
 * LISTEN/NOTIFY channels, advisory locks and catalogs are per database, and a role can be kept out
 * of a database with CONNECT. The platform's own database is closed to PUBLIC here as well, and so
 * are the server's `postgres` and `template1` (where the platform may: their owner or a superuser).
 * The names of other deployments' databases and roles stay readable in the server's shared
 * catalogs (pg_database, pg_roles, pg_stat_activity, which BullMQ's Postgres backend reads): they
 * are deployment ids, and give no access.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { quoteIdent as quote, quoteLiteral as literal, withAdvisoryLock } from '@berth/db';

export interface AgentDatabasesOptions {
  /** A role that may create roles and databases (the platform's superuser), on the platform's database. */
  adminUrl: string;
  /**
   * Where agent servers reach Postgres (only its host and port are used).
   * @default adminUrl
   */
  agentUrl?: string;
  /**
   * Connections each login role may hold (an agent server's pools, queue and event listener).
   * @default 60
   */
  connectionLimit?: number;
}

/** Which of a deployment's two logins {@link AgentDatabases.provision} gives a fresh password. */
export interface LoginChoice {
  /** This login (a revision brought back whose process is gone takes its own again). */
  use?: string;
  /** The other login than this one (the serving revision's). Without `use` or `avoid`: the login with fewer sessions. */
  avoid?: string;
}

/** What an agent server of one revision connects with. */
export interface AgentDatabaseLogin {
  /** `postgres://login:password@host:port/database`. */
  url: string;
  database: string;
  role: string;
}

const NAME = /^berth_agent_[0-9a-f]{32}$/;

/** The names of a deployment's database and owner role (they are the same). */
export function agentDatabaseName(deploymentId: string): string {
  const name = `berth_agent_${deploymentId.replace(/-/g, '').toLowerCase()}`;
  if (!NAME.test(name)) throw new TypeError(`not a deployment id: ${deploymentId}`);
  return name;
}

/** The Postgres schema holding a deployment's threads, runs and checkpoints. */
export function agentSchema(deploymentId: string): string {
  return `agent_${deploymentId.replace(/-/g, '')}`;
}

export class AgentDatabases {
  private readonly connectionLimit: number;

  constructor(private readonly options: AgentDatabasesOptions) {
    this.connectionLimit = options.connectionLimit ?? 60;
  }

  /**
   * Closes the platform's own database to every role not granted it explicitly (agents included);
   * fails when it cannot. Closes `postgres` and `template1` too where the platform's role may (it
   * owns them or is a superuser), and returns those it could not close.
   */
  async lockPlatformDatabase(): Promise<string[]> {
    // Replicas starting together take turns: concurrent REVOKEs on one database can fail with
    // "tuple concurrently updated".
    return withAdvisoryLock(this.options.adminUrl, 'berth.lock-platform-database', () =>
      this.admin(async (client) => {
        const { rows } = await client.query<{ db: string }>('SELECT current_database() AS db');
        await client.query(`REVOKE CONNECT, TEMPORARY ON DATABASE ${quote(rows[0]!.db)} FROM PUBLIC`);
        const { rows: shared } = await client.query<{ datname: string; allowed: boolean }>(
          `SELECT datname, pg_has_role(datdba, 'USAGE') OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS allowed
             FROM pg_database WHERE datname IN ('postgres', 'template1') AND datname <> current_database()`,
        );
        for (const { datname, allowed } of shared) {
          if (allowed) await client.query(`REVOKE CONNECT, TEMPORARY ON DATABASE ${quote(datname)} FROM PUBLIC`);
        }
        return shared.filter((db) => !db.allowed).map((db) => db.datname);
      }),
    );
  }

  /**
   * Creates the deployment's database and roles when missing, gives a login (`choice`; by default
   * the one with fewer sessions) a fresh password, and returns it: the connection of the revision
   * about to start.
   */
  async provision(deploymentId: string, choice: LoginChoice = {}): Promise<AgentDatabaseLogin> {
    const owner = agentDatabaseName(deploymentId);
    const password = randomBytes(24).toString('base64url');
    // Two control planes deploying the same deployment take turns.
    const role = await withAdvisoryLock(this.options.adminUrl, `berth.agent-database.${owner}`, () =>
      this.admin(async (client) => {
        await this.ensureRoles(client, owner);
        await this.ensureDatabase(client, owner);
        const login = choose(owner, choice) ?? (await idleLogin(client, owner));
        await client.query(`ALTER ROLE ${quote(login)} PASSWORD ${literal(password)}`);
        return login;
      }),
    );
    const url = new URL(this.options.agentUrl ?? this.options.adminUrl);
    url.username = role;
    url.password = password;
    url.pathname = `/${owner}`;
    url.search = '';
    return { url: url.toString(), database: owner, role };
  }

  /** Drops the deployment's database (ending its sessions) and roles. Unknown deployments are a no-op. */
  async drop(deploymentId: string): Promise<void> {
    const owner = agentDatabaseName(deploymentId);
    await this.admin(async (client) => {
      await client.query(`DROP DATABASE IF EXISTS ${quote(owner)} WITH (FORCE)`);
      for (const login of logins(owner)) await client.query(`DROP ROLE IF EXISTS ${quote(login)}`);
      await client.query(`DROP ROLE IF EXISTS ${quote(owner)}`);
    });
  }

  private async ensureRoles(client: pg.Client, owner: string): Promise<void> {
    const existing = new Set(
      (await client.query<{ rolname: string }>('SELECT rolname FROM pg_roles WHERE rolname = ANY($1)', [[owner, ...logins(owner)]])).rows.map((r) => r.rolname),
    );
    if (!existing.has(owner)) await client.query(`CREATE ROLE ${quote(owner)} NOLOGIN NOINHERIT`);
    for (const login of logins(owner)) {
      if (!existing.has(login)) {
        // No password until a revision needs it: a login nobody was given cannot be used.
        await client.query(
          `CREATE ROLE ${quote(login)} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION CONNECTION LIMIT ${this.connectionLimit} IN ROLE ${quote(owner)}`,
        );
        // Its sessions act as the owner, so what either login creates belongs to the deployment.
        await client.query(`ALTER ROLE ${quote(login)} SET role = ${literal(owner)}`);
      } else {
        await client.query(`ALTER ROLE ${quote(login)} CONNECTION LIMIT ${this.connectionLimit}`);
      }
    }
  }

  private async ensureDatabase(client: pg.Client, owner: string): Promise<void> {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [owner]);
    if (!rowCount) {
      // template0: template1 may have sessions (CREATE DATABASE from it would then fail).
      await client.query(`CREATE DATABASE ${quote(owner)} OWNER ${quote(owner)} TEMPLATE template0 ENCODING 'UTF8'`);
    }
    await client.query(`REVOKE ALL ON DATABASE ${quote(owner)} FROM PUBLIC`);
  }

  private async admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString: this.options.adminUrl, application_name: 'berth-control-plane-agent-databases' });
    // A session Postgres ends (a restart) fails the query under way; unheard, the client's own error
    // event would crash the process.
    client.on('error', () => undefined);
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.end();
    }
  }
}

/** The roles of a deployment's database `database` (agentDatabaseName): its owner, of the same name, and its two logins. */
export function agentDatabaseRoles(database: string): string[] {
  return [database, ...logins(database)];
}

function logins(owner: string): [string, string] {
  return [`${owner}_a`, `${owner}_b`];
}

/** The login `choice` names, if it names one of the deployment's. */
function choose(owner: string, { use, avoid }: LoginChoice): string | undefined {
  const [a, b] = logins(owner);
  if (use === a || use === b) return use;
  if (avoid === a) return b;
  if (avoid === b) return a;
  return undefined;
}

/** The login with fewer sessions: the serving revision holds connections on the other one. */
async function idleLogin(client: pg.Client, owner: string): Promise<string> {
  const [a, b] = logins(owner);
  const { rows } = await client.query<{ usename: string; n: string }>(
    'SELECT usename, count(*) AS n FROM pg_stat_activity WHERE usename = ANY($1) GROUP BY usename',
    [[a, b]],
  );
  const count = (login: string) => Number(rows.find((r) => r.usename === login)?.n ?? 0);
  return count(b) < count(a) ? b : a;
}
