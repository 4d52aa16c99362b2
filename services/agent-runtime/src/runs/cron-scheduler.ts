/**
 * Fires crons through the queue, not through timers in each process: every upcoming tick is a
 * delayed `cron.tick {cron_id, due}` job whose id comes from (cron, due), so queueing it again
 * adds nothing. The handler fires a tick only while the cron's `next_run_date` is still `due`, and
 * its run id is derived from (cron, due): duplicate jobs, several workers and several replicas
 * fire each tick once, and a retry after a crash finds the run it already made. (One gap: a worker
 * that dies between creating a stateless `on_run_completed: delete` cron's run and moving the cron
 * on, whose run then ends and has its thread deleted before the tick job is retried, leaves no
 * trace of the run: that tick fires twice. Closing it needs the run insert and the move in one
 * transaction.)
 *
 * Missed ticks (every worker down when they fell due): the overdue tick fires once when a worker
 * is back, and the next tick is the schedule's first after that moment — never one run per
 * missed occurrence. Each worker sweeps for enabled crons whose tick is overdue and queues it
 * again (idempotent), which also covers a tick job the queue lost.
 */
import { systemClock, type Clock, type Timer } from '@berth/clock';
import type { Logger } from '@berth/log';
import { ConflictError, NotFoundError, PermissionDeniedError, RequestValidationError } from '@berth/errors';
import { isUniqueViolation } from '@berth/db';
import { JobQueue, JobWorker, defineJobCatalog, type QueueBackendConfig } from '@berth/queue';
import { z } from 'zod';
import { uuidv5 } from '../project/index.js';
import type { Cron, CronStore } from '../storage/crons.js';
import type { RunRequest, RunService } from './run-service.js';
import { nextRunDate } from './cron-schedule.js';

export const CRON_QUEUE = 'agent-crons';

export const cronJobs = defineJobCatalog({
  'cron.tick': {
    schema: z.object({ cron_id: z.uuid(), due: z.iso.datetime({ offset: true }) }),
    // A failure that outlasts the retries is left to the sweep (the job is removed, so its id is free again).
    attempts: 5,
    backoff: { type: 'exponential', delayMs: 1000 },
    removeOnComplete: true,
    removeOnFail: true,
  },
});

/** Namespace of the run ids of ticks: uuid5(`<cron_id>@<due ISO>`, this). */
const CRON_RUN_NAMESPACE = 'c5d1c0a2-4c2f-5d8e-9b1a-7f3e2a6b9d40';

export interface CronSchedulerDeps {
  crons: CronStore;
  queue: QueueBackendConfig;
  log: Logger;
}

export interface CronSchedulerOptions {
  /**
   * How often a worker looks for overdue ticks.
   * @default 30_000
   */
  sweepMs?: number;
  /**
   * How late a tick must be before the sweep queues it again (its own job normally fires it first).
   * @default 10_000
   */
  graceMs?: number;
  /** The time ticks fall due by (a tick's job waits until its due time on this clock). @default systemClock */
  clock?: Clock;
}

/** Why a tick was not fired: the cron changed meanwhile (paused, rescheduled, deleted) or fired already. */
type TickOutcome = 'fired' | 'already-fired' | 'skipped' | 'stale';

export class CronScheduler {
  private readonly queue: JobQueue<typeof cronJobs>;
  private jobs?: JobWorker<typeof cronJobs>;
  /** Creates the ticks' runs (worker role). */
  private runService?: Pick<RunService, 'create'>;
  private sweeper?: Timer;
  private readonly clock: Clock;

  constructor(
    private readonly deps: CronSchedulerDeps,
    private readonly options: CronSchedulerOptions = {},
  ) {
    this.queue = new JobQueue(cronJobs, CRON_QUEUE, deps.queue, { log: deps.log });
    this.clock = options.clock ?? systemClock;
  }

  /** The cron's first tick after now, or null for a paused cron or one past its end_time. */
  upcoming(cron: Pick<Cron, 'schedule' | 'timezone' | 'end_time' | 'enabled'>): Date | null {
    return cron.enabled ? nextRunDate(cron.schedule, cron.timezone, new Date(this.clock.now()), cron.end_time) : null;
  }

  async ready(): Promise<void> {
    await this.queue.ready();
  }

  /** Queues the cron's next tick; nothing when it is paused or has no more ticks. Idempotent. */
  async schedule(cron: Pick<Cron, 'cron_id' | 'enabled' | 'next_run_date'>): Promise<void> {
    if (!cron.enabled || !cron.next_run_date) return;
    const due = cron.next_run_date;
    await this.queue.enqueue(
      'cron.tick',
      { cron_id: cron.cron_id, due: due.toISOString() },
      { delayMs: Math.max(0, due.getTime() - this.clock.now()), jobId: `cron.${cron.cron_id}.${due.getTime()}` },
    );
  }

  /** The worker role: fires ticks, and sweeps for overdue ones now and every `sweepMs`. */
  async start(runService: Pick<RunService, 'create'>, concurrency: number): Promise<void> {
    this.runService = runService;
    this.jobs = new JobWorker(
      cronJobs,
      CRON_QUEUE,
      this.deps.queue,
      { 'cron.tick': ({ cron_id, due }) => this.tick(cron_id, new Date(due)) },
      { concurrency, log: this.deps.log },
    );
    await this.jobs.ready();
    await this.sweep();
    this.sweeper = this.clock.setInterval(() => void this.sweep(), this.options.sweepMs ?? 30_000);
  }

  async close(): Promise<void> {
    this.sweeper?.cancel();
    await this.jobs?.close();
    await this.queue.close();
  }

  /** Fires the tick of `cronId` that fell due at `due`, at most once, and queues the next one. */
  private async tick(cronId: string, due: Date): Promise<TickOutcome> {
    const { crons, log } = this.deps;
    const cron = await crons.find(cronId);
    if (!cron || !cron.enabled || cron.next_run_date?.getTime() !== due.getTime()) {
      // A retry of a tick whose next one could not be queued: queue it now (a no-op when it is).
      if (cron && cron.next_run_date && cron.next_run_date > due) await this.schedule(cron);
      return 'stale';
    }
    const now = new Date(this.clock.now());
    // Missed ticks collapse into this one: the next is the first after now, not after `due`.
    const next = nextRunDate(cron.schedule, cron.timezone, now > due ? now : due, cron.end_time);
    const outcome = await this.fire(cron, due);
    if (await crons.advance(cronId, due, next)) await this.schedule({ cron_id: cronId, enabled: true, next_run_date: next });
    log.info({ cronId, due: due.toISOString(), next: next?.toISOString() ?? null, outcome }, 'cron tick');
    return outcome;
  }

  /** Queues the overdue ticks again; a failure is logged and the next sweep tries again. */
  private async sweep(): Promise<void> {
    try {
      for (const cron of await this.deps.crons.overdue(this.options.graceMs ?? 10_000)) await this.schedule({ ...cron, enabled: true });
    } catch (error) {
      this.deps.log.warn({ err: error }, 'cron sweep failed');
    }
  }

  private async fire(cron: Cron, due: Date): Promise<TickOutcome> {
    const runId = uuidv5(`${cron.cron_id}@${due.toISOString()}`, CRON_RUN_NAMESPACE);
    try {
      await this.runService!.create(cron.thread_id ?? undefined, runRequest(cron), {}, undefined, { run_id: runId });
      return 'fired';
    } catch (error) {
      // The run's primary key: an earlier attempt of this tick made it before it could move the cron on.
      if (isUniqueViolation(error)) return 'already-fired';
      // This tick cannot run (assistant gone, context no longer valid, thread busy with reject):
      // the cron goes on with its next one. Anything else is retried.
      if (
        error instanceof NotFoundError ||
        error instanceof ConflictError ||
        error instanceof RequestValidationError ||
        error instanceof PermissionDeniedError
      ) {
        this.deps.log.warn({ err: error, cronId: cron.cron_id, due: due.toISOString() }, 'cron tick skipped: its run could not be created');
        return 'skipped';
      }
      throw error;
    }
  }
}

/** The fields of a tick's run a cron keeps in its payload. */
export interface CronPayload {
  input?: unknown;
  config?: RunRequest['config'];
  context?: RunRequest['context'];
  webhook?: string;
  interrupt_before?: RunRequest['interrupt_before'];
  interrupt_after?: RunRequest['interrupt_after'];
  multitask_strategy?: RunRequest['multitask_strategy'];
  stream_mode?: RunRequest['stream_mode'];
  stream_subgraphs?: boolean;
  stream_resumable?: boolean;
  durability?: RunRequest['durability'];
}

/**
 * The run of a tick: the cron's payload, its metadata plus `cron_id` (so a cron's runs and kept
 * threads can be found). A stateless cron's run gets a new thread that `on_run_completed` keeps or
 * deletes (default delete); a thread cron's run queues behind the thread's (default enqueue).
 */
function runRequest(cron: Cron): RunRequest {
  const payload = cron.payload as CronPayload;
  return {
    ...payload,
    assistant_id: cron.assistant_id,
    metadata: { ...cron.metadata, cron_id: cron.cron_id },
    ...(cron.thread_id ? { multitask_strategy: payload.multitask_strategy ?? 'enqueue' } : { on_completion: cron.on_run_completed ?? 'delete' }),
  };
}
