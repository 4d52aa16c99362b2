/**
 * The supervisor `berth up` leaves running (`berth supervise`, one small Node process of its own
 * session): it starts Postgres (unless DATABASE_URL is given), the private sandbox engine (where one
 * can run) and the platform process, in that order, and restarts whichever ends unasked, with the
 * shared restart policy (@berth/supervision): Postgres on its port with its data and password, so
 * every connection string handed out stays valid; the engine on its socket; the platform on its
 * gateway port. Every crash and restart goes to its log (.berth/logs/supervisor.log) and to
 * .berth/supervisor.json, which `berth status` shows. It stops them in reverse order.
 *
 * One process for the three, not the platform for its children: the platform is one of the three
 * (something outside it must restart it), and the engine then outlives a platform crash, with its
 * containers, instead of being restarted with it. A supervisor that was killed leaves them running:
 * the next `berth up` starts a new one that takes on Postgres and the platform as they run (and
 * starts the engine afresh); `berth down` stops the supervisor, which stops the rest.
 */
import { PostgresServer } from '@berth/local-stack';
import type { Logger } from '@berth/log';
import { Supervisor } from '@berth/supervision';
import type { CliEnv } from '../env.js';
import { privateEngineUnavailable, type SupervisedSandboxes } from '../sandbox-engine.js';
import { StateDir, supervisorAlive, type PlatformState, type SupervisedUnitRecord, type SupervisorRecord } from '../state.js';
import { PlatformUnit } from './platform-unit.js';
import { EngineUnit, PostgresUnit, type Running, type Unit } from './units.js';

/** What the supervisor tells the `berth up` that started it. */
export type SupervisorReport = { note: string } | { ready: { platform: PlatformState; databaseUrl: string; adopted: boolean } } | { failed: string };

export class SupervisorRunningError extends Error {
  constructor(pid: number) {
    super(`another supervisor (pid ${pid}) runs Berth from this state folder: \`berth down\` stops it`);
    this.name = 'SupervisorRunningError';
  }
}

export class BerthSupervisor {
  private readonly state: StateDir;
  private readonly record: SupervisorRecord = { pid: process.pid, started_at: new Date().toISOString(), units: {} };
  /** Started units with their restarters, in start order. */
  private readonly units: { unit: Unit; supervisor: Supervisor }[] = [];
  private saving: Promise<void> = Promise.resolve();
  private stopping: Promise<boolean> | undefined;

  constructor(
    private readonly env: CliEnv,
    private readonly logger: Logger,
  ) {
    this.state = new StateDir(env.stateDir);
  }

  /**
   * Starts (or takes on) everything, `report`ing lines for people on the way; resolves once the
   * platform serves. On a failure, or when `signal` aborts, stops what it started and throws.
   */
  async start(signal: AbortSignal, report: (report: SupervisorReport) => void): Promise<void> {
    const recorded = await this.state.readSupervisor();
    if (recorded && recorded.pid !== process.pid && supervisorAlive(recorded)) throw new SupervisorRunningError(recorded.pid);
    await this.save();
    const { env, state } = this;
    const aborted = () => signal.throwIfAborted();
    // Each start can take a while the first time (initdb, the engine's storage): say what runs.
    const starting = (what: string) => report({ note: `starting ${what}…` });
    try {
      let databaseUrl = env.DATABASE_URL;
      if (!databaseUrl) {
        const postgres = new PostgresUnit(new PostgresServer({ baseDir: state.postgresDir }));
        starting('Postgres');
        await this.first(postgres, signal);
        report({ note: postgres.summary });
        databaseUrl = postgres.connectionString;
      }
      aborted();
      const sandboxes = await this.startEngine(signal, starting);
      aborted();
      const platform = new PlatformUnit({ env, state, databaseUrl, ...(sandboxes ? { sandboxes } : {}), note: (note) => report({ note }) });
      starting('the platform');
      const running = await this.first(platform, signal);
      aborted();
      report({ ready: { platform: platform.current!, databaseUrl, adopted: running.adopted } });
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  /**
   * Restarts nothing more and stops every unit, the platform first; resolves with whether all
   * stopped cleanly (a failure is logged). Called twice, the second waits for the first.
   */
  stop(): Promise<boolean> {
    this.stopping ??= (async () => {
      await Promise.all(this.units.map(({ supervisor }) => supervisor.stop()));
      let clean = true;
      for (const { unit } of [...this.units].reverse()) {
        this.update(unit.name, { state: 'stopping' });
        try {
          await unit.stop();
          this.logger.info({ unit: unit.name }, `stopped ${unit.name}`);
        } catch (error) {
          clean = false;
          this.logger.error({ err: error, unit: unit.name }, `stopping ${unit.name} failed`);
        }
      }
      await this.saving;
      await this.state.clearSupervisor();
      return clean;
    })();
    return this.stopping;
  }

  /** The engine for the platform: the supervisor's own, or why sandboxes are off; undefined with BERTH_SANDBOXES=off. */
  private async startEngine(signal: AbortSignal, starting: (what: string) => void): Promise<SupervisedSandboxes | undefined> {
    if (this.env.BERTH_SANDBOXES === 'off') return undefined;
    const unavailable = privateEngineUnavailable(this.env.stateDir);
    if (unavailable) return { off: unavailable };
    const engine = new EngineUnit(this.env.stateDir, this.state.engineLogFile, this.logger);
    starting('the sandbox engine (Podman)');
    try {
      await this.first(engine, signal);
    } catch (error) {
      // The platform runs without sandboxes then, saying why (as it does where no engine can run).
      this.logger.error({ err: error }, 'the sandbox engine did not start: sandboxes are off');
      return { off: `${(error as Error).message}; see ${this.state.engineLogFile}, fix the cause and run \`berth up\` again` };
    }
    const { socketPath, storageQuota, defaultImage, summary, podman } = engine.started!;
    // The podman command too: the platform runs its deployments' agent servers in containers there.
    return { engine: { socketPath, storageQuota, summary, podmanCommand: podman.command, ...(defaultImage ? { defaultImage } : {}) } };
  }

  /** A unit's first start; supervised from then on. A unit that does not start is not kept. */
  private async first(unit: Unit, signal: AbortSignal): Promise<Running> {
    this.update(unit.name, { state: 'starting', restarts: 0 });
    let running: Running;
    try {
      running = await unit.start(signal, true);
    } catch (error) {
      // What a start that failed half-way left running (a postmaster whose database could not be made).
      await unit
        .stop()
        .catch((cleanup: unknown) => this.logger.error({ err: cleanup, unit: unit.name }, `stopping ${unit.name} after its failed start failed`));
      delete this.record.units[unit.name];
      await this.save();
      throw error;
    }
    this.logger.info(
      { unit: unit.name, pid: running.pid, adopted: running.adopted },
      running.adopted ? `took on ${unit.name}, which ran already` : `started ${unit.name}`,
    );
    this.running(unit, running);
    this.units.push({ unit, supervisor: this.supervise(unit, running) });
    return running;
  }

  private supervise(unit: Unit, first: Running): Supervisor {
    const { logger } = this;
    let downSince = 0;
    // The restart policy's defaults: 0.5 s doubling to 30 s, from 0.5 s again after a minute up.
    const supervisor = new Supervisor({
      restart: async (signal) => {
        const running = await unit.start(signal, false);
        this.running(unit, running);
        return running;
      },
      onCrash: ({ reason, failedStart, delayMs, inRow }) => {
        const now = Date.now();
        downSince ||= now;
        const at = new Date(now).toISOString();
        const restart_at = new Date(now + delayMs).toISOString();
        if (failedStart) {
          this.update(unit.name, { state: 'restarting', restart_at, start_error: reason });
          logger.error({ unit: unit.name, reason, restartInMs: delayMs, inRow }, `${unit.name} did not start again: trying again in ${delayMs} ms`);
          return;
        }
        const restarts = (this.record.units[unit.name]?.restarts ?? 0) + 1;
        this.update(unit.name, { state: 'restarting', restarts, last_exit: { reason, at }, restart_at, start_error: undefined });
        logger.error({ unit: unit.name, reason, restartInMs: delayMs, inRow, restarts }, `${unit.name} ended: restarting it in ${delayMs} ms`);
      },
      onRestart: () => {
        logger.info({ unit: unit.name, pid: this.record.units[unit.name]?.pid, downMs: Date.now() - downSince }, `${unit.name} runs again`);
        downSince = 0;
      },
    });
    supervisor.watch(first);
    return supervisor;
  }

  private running(unit: Unit, running: Running): void {
    this.update(unit.name, { state: 'running', pid: running.pid, since: new Date().toISOString(), restart_at: undefined, start_error: undefined });
  }

  private update(name: Unit['name'], change: Partial<SupervisedUnitRecord>): void {
    const before = this.record.units[name] ?? { state: 'starting', restarts: 0 };
    const next = { ...before, ...change };
    for (const key of Object.keys(next) as (keyof SupervisedUnitRecord)[]) if (next[key] === undefined) delete next[key];
    this.record.units[name] = next;
    void this.save();
  }

  /** Writes the record, one write at a time, in order. A failed write is logged: the record is for people. */
  private save(): Promise<void> {
    const snapshot = structuredClone(this.record);
    this.saving = this.saving.then(() =>
      this.state.writeSupervisor(snapshot).catch((error: unknown) => this.logger.error({ err: error }, `cannot write ${this.state.supervisorFile}`)),
    );
    return this.saving;
  }
}
