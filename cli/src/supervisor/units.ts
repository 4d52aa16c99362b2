/**
 * What the supervisor of `berth up` keeps running, one {@link Unit} each: the Postgres cluster under
 * the state folder and the private sandbox engine here, the platform process in platform-unit.ts.
 * A unit starts its process (or takes on one that still runs, after the supervisor before this one
 * was killed), tells when it ends, and stops it.
 */
import { PostgresServer, processAlive, sleep } from '@berth/local-stack';
import type { Logger } from '@berth/log';
import type { Incarnation } from '@berth/supervision';
import { privateEngine, startPrivateEngine, type PrivateEngine } from '../sandbox-engine.js';
import type { SupervisedUnitName } from '../state.js';

/** A life of a unit's process. */
export interface Running extends Incarnation {
  pid: number;
  /** It ran already (started by a supervisor before this one) and was taken on, not started. */
  adopted: boolean;
}

export interface Unit {
  readonly name: SupervisedUnitName;
  /**
   * Starts the process, or takes on one that runs; resolves once it serves. `first`: the start of
   * `berth up` (a restart after a crash must come back as it was: same port, same URLs).
   * Rejects, saying why, when it cannot; `signal` aborts a start that waits (the supervisor stops).
   */
  start(signal: AbortSignal, first: boolean): Promise<Running>;
  /** Stops its process (the supervisor no longer restarts it). */
  stop(): Promise<void>;
}

/** How often a process that may not be our child (a daemon, one taken on) is looked at. */
const POLL_MS = 250;
/** How long a dead postmaster may wait to be reaped before its successor tries anyway. */
const REAP_WAIT_MS = 5000;

/** Resolves, with why, once process `pid` is gone. Polled: a daemon's exit status is not ours to see. */
export function pidEnded(pid: number, what: string): Promise<string> {
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      if (processAlive(pid)) return;
      clearInterval(timer);
      resolve(`${what} (pid ${pid}) ended`);
    }, POLL_MS);
    // The supervisor keeps itself alive; a watch must not keep a stopping one.
    timer.unref();
  });
}

/** Resolves once no process has this pid any more (not even a zombie), or after `timeoutMs`. */
async function gone(pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      process.kill(pid, 0);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ESRCH') return;
    }
    await sleep(50);
  }
}

/** The cluster under the state folder (pg_ctl runs it as a daemon). */
export class PostgresUnit implements Unit {
  readonly name = 'postgres';
  private started: Awaited<ReturnType<PostgresServer['start']>> | undefined;
  private lastPid: number | undefined;

  constructor(private readonly server: PostgresServer) {}

  /** How the platform reaches it; set once it started. */
  get connectionString(): string {
    if (!this.started) throw new Error('postgres has not started');
    return this.started.connectionString;
  }

  /** A line for people: what runs where. */
  get summary(): string {
    const pg = this.started;
    return pg ? `postgres ${pg.binaries.major} (${pg.binaries.source}) on 127.0.0.1:${pg.port}, data in ${this.server.dataDir}` : 'postgres';
  }

  async start(_signal: AbortSignal, first: boolean): Promise<Running> {
    // A new postmaster refuses to start while the pid in the old one's lock file exists, even as a
    // zombie that init has not reaped yet: wait (briefly) for it to be gone for good.
    if (this.lastPid !== undefined) await gone(this.lastPid, REAP_WAIT_MS);
    const before = await this.server.pid();
    // The platform and every deployment's database URL name the port: a restart keeps it.
    const pg = await this.server.start({ keepPort: !first });
    this.started = pg;
    this.lastPid = pg.pid;
    return { pid: pg.pid, adopted: before === pg.pid, ended: pidEnded(pg.pid, 'the postmaster') };
  }

  stop(): Promise<void> {
    return this.server.stop();
  }
}

/** The private Podman engine of sandboxes (and of the agent servers' containers, where they run in it). */
export class EngineUnit implements Unit {
  readonly name = 'sandbox engine';
  private engine: PrivateEngine | undefined;

  constructor(
    private readonly stateDir: string,
    private readonly logFile: string,
    private readonly logger: Logger,
  ) {}

  /** How the platform reaches it; set once it started. */
  get started(): PrivateEngine | undefined {
    return this.engine;
  }

  async start(): Promise<Running> {
    // A service left running (by a killed supervisor) is stopped first; its containers run on.
    this.engine = await startPrivateEngine(this.stateDir, this.logger, { logFile: this.logFile });
    const pid = await this.engine.podman.runningPid();
    if (pid === undefined) throw new Error(`the engine service stopped right after it started: see ${this.logFile}`);
    return { pid, adopted: false, ended: pidEnded(pid, 'the engine service') };
  }

  async stop(): Promise<void> {
    // Its containers too (files kept), and its storage unmounted.
    await (this.engine?.podman ?? privateEngine(this.stateDir)).stop();
  }
}
