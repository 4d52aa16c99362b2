/**
 * The worker role: takes run ids off the queue, claims the run (oldest unfinished of its thread,
 * due, not held by a live worker), executes it under a renewed lease, records the outcome, and
 * dispatches the thread's next run. A sweeper re-dispatches runs whose worker died.
 */
import { randomUUID } from 'node:crypto';
import type { EventBroker } from '@berth/broker';
import { systemClock, type Clock, type Timer } from '@berth/clock';
import { NotFoundError } from '@berth/errors';
import { Lease, LeaseLostError, leaseSettings, type LeaseOptions, type LeaseSettings, type OwnerLiveness } from '@berth/lease';
import type { Logger } from '@berth/log';
import { JobWorker, type QueueBackendConfig } from '@berth/queue';
import type { ClaimedRun, Run, RunResult, RunStore, Takeover } from '../storage/runs.js';
import { RunFencedError } from '../storage/checkpoint-batch.js';
import { retryTransient } from '../storage/retry.js';
import type { ThreadStore } from '../storage/threads.js';
import type { RunDispatcher } from './dispatcher.js';
import { RUN_QUEUE, runJobs } from './dispatcher.js';
import { RunCancelledError, type RunExecutor, type RunOutcome } from './executor.js';
import { recordEnd, UNSTORABLE } from './run-end.js';
import type { RunEnd, WebhookDelivery } from './webhooks.js';
import { publishRunEnd } from '../protocol/events.js';
import { runDuration, runsFinished } from './metrics.js';

export interface RunWorkerOptions extends LeaseOptions {
  /**
   * Runs executed at the same time by this worker.
   * @default 10
   */
  concurrency?: number;
  /**
   * Executions of a run at most: a run whose workers died this many times (taken over each time)
   * ends `error` instead of executing again.
   * @default 3
   */
  maxAttempts?: number;
  /**
   * Runs accepted in this process beyond `concurrency`, waiting in memory for a free slot instead
   * of taking the queue's round trips (they stay `pending` in the database: if this process dies,
   * or they wait longer than the sweep interval, the sweeper hands them to any worker).
   * @default 10 × concurrency
   */
  localBacklog?: number;
  /**
   * Longest a run may execute; then its graph is aborted and the run ends `timeout`.
   * @default 3_600_000 (1 hour)
   */
  timeoutMs?: number;
}

/**
 * A worker slot of this process held for a run about to be created: the run is claimed by the
 * statement that creates it (RunStore.create's `claimFor`) and handed over with `start`, or the
 * slot goes back with `release` when it could not be claimed.
 */
export interface LocalSlot {
  owner: string;
  leaseMs: number;
  start(claimed: ClaimedRun): void;
  release(): void;
}

/** Aborts a run that ran longer than the worker's timeout. */
export class RunTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`run exceeded its time limit of ${timeoutMs} ms`);
    this.name = 'RunTimeoutError';
  }
}

/** How an execution ended: an outcome, or a cancel. */
interface Ended {
  outcome?: RunOutcome;
  cancelled?: RunCancelledError;
  timedOut?: boolean;
}

function failedOutcome(error: { error: string; message: string }): RunOutcome {
  return { status: 'error', interrupted: false, values: null, output: null, interrupts: {}, error };
}

/** A run claimed before the worker got it (by the statement that created it), and when its slot was taken. */
interface ClaimedBefore {
  claimed: ClaimedRun;
  at: number;
}

export interface RunWorkerDeps {
  threads: ThreadStore;
  runs: RunStore;
  executor: RunExecutor;
  broker: EventBroker;
  dispatcher: RunDispatcher;
  queue: QueueBackendConfig;
  /** Deletes a thread's checkpoints (temporary threads of threadless runs). */
  deleteCheckpoints(threadId: string): Promise<void>;
  /** Deletes the checkpoints written after a given one (a rolled-back run's). */
  deleteCheckpointsAfter(threadId: string, checkpointId: string | null): Promise<void>;
  /** Sends the webhook of a run that names one; unset when this server has no signing secret. */
  webhooks?: Pick<WebhookDelivery, 'send'>;
  /** Told of every run that ended (not rolled back), after its webhook: A2A push notifications (a2a/push.ts). Must not throw. */
  runEnded?: (run: Run) => Promise<void>;
  /** This process's liveness session, for `owner` (see @berth/lease); started and closed by the worker. */
  liveness: Pick<OwnerLiveness, 'start' | 'close' | 'takeover'>;
  /** The lease clock (the RunStore's), which runs' time limits run on too. @default systemClock */
  clock?: Clock;
  /** The lease owner id of this process (the liveness session's). */
  owner: string;
  log: Logger;
}

/** A new lease owner id for a worker process. */
export const newOwnerId = (): string => `worker-${randomUUID()}`;

export class RunWorker {
  private readonly owner: string;
  private readonly lease: LeaseSettings;
  private readonly clock: Clock;
  private jobs?: JobWorker<typeof runJobs>;
  private local = 0;
  /** Runs accepted by tryLocal while every slot was taken, oldest first. */
  private readonly backlog: string[] = [];
  private sweeper?: Timer;
  /** The sweep in progress, and whether another is due once it ends. */
  private sweeping?: Promise<void>;
  private sweepAgain = false;
  /** Set by close(): no new runs start here. */
  private closing?: Promise<void>;
  /** Resolves a draining close() once no run executes in a local slot. */
  private idle?: () => void;
  /** Runs this process has taken on, resolved with how they ended (for waiters in this process). */
  private readonly outcomes = new Map<string, { promise: Promise<RunResult | undefined>; settle(result: RunResult | undefined): void }>();

  constructor(
    private readonly deps: RunWorkerDeps,
    private readonly options: RunWorkerOptions = {},
  ) {
    this.owner = deps.owner;
    this.lease = leaseSettings(options);
    this.clock = deps.clock ?? systemClock;
  }

  async start(): Promise<void> {
    await this.deps.liveness.start();
    this.jobs = new JobWorker(
      runJobs,
      RUN_QUEUE,
      this.deps.queue,
      {
        'run.execute': ({ run_id }) => this.handle(run_id),
        'thread.delete': ({ thread_id }) => this.deleteTemporaryThread(thread_id),
      },
      {
        concurrency: this.options.concurrency ?? 10,
        log: this.deps.log,
      },
    );
    await this.jobs.ready();
    // Twice a lease: a dead worker's run moves within about a lease and a half after it died. On
    // real timers whatever the clock: the sweep is also the safety net for a pending run whose
    // dispatch was missed, which must not wait for a test to move its clock; what it takes over is
    // still judged on the clock's time.
    this.sweeper = systemClock.setInterval(() => this.sweepSoon(), Math.max(250, this.lease.leaseMs / 2));
  }

  /** Whether this worker may take other workers' runs over now (see @berth/lease). */
  private takeover(): Takeover {
    return this.deps.liveness.takeover(this.lease);
  }

  /**
   * Stops taking runs: this process starts none from now on (the runs that follow go through the
   * queue, to any worker), and the runs waiting here for a slot go back to the queue. Then waits
   * for the runs executing here — at most `drainMs` when given: those still executing after it
   * are taken over from their last checkpoint by another worker once their lease lapses.
   */
  close(options: { drainMs?: number } = {}): Promise<void> {
    this.closing ??= this.shutdown(options.drainMs);
    return this.closing;
  }

  private async shutdown(drainMs: number | undefined): Promise<void> {
    this.sweeper?.cancel();
    const waiting = this.backlog.splice(0);
    for (const runId of waiting) this.settle(runId, undefined);
    for (const runId of waiting) {
      // Still pending in the database: a sweep finds them anyway, only later.
      await this.deps.dispatcher
        .dispatch(runId)
        .catch((error: unknown) => this.deps.log.warn({ err: error, runId }, 'could not hand a waiting run to the queue'));
    }
    const closed = this.jobs?.close();
    if (drainMs === undefined) {
      await closed;
      this.deps.liveness.close();
      return;
    }
    const executing = this.local === 0 ? undefined : new Promise<void>((resolve) => (this.idle = resolve));
    let timer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      Promise.all([closed, executing]).then(() => true),
      new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), drainMs))),
    ]);
    clearTimeout(timer);
    if (!drained) this.deps.log.warn({ drainMs }, 'runs still executing after the drain: another worker takes them over');
    // Last: while it is open, other workers leave the runs still held here alone for the hold period.
    this.deps.liveness.close();
  }

  /**
   * Starts a run in this process at once when it has a free slot, skipping the queue's round
   * trip (the API and worker roles share a process in `berth dev` and the embedded platform).
   * False when busy: dispatch through the queue instead. A run that this process then fails to
   * start is still found by the sweeper of some worker.
   */
  tryLocal(runId: string): boolean {
    if (!this.jobs || this.closing) return false;
    const concurrency = this.options.concurrency ?? 10;
    if (this.local < concurrency) {
      this.startLocal(runId);
      return true;
    }
    if (this.backlog.length >= (this.options.localBacklog ?? 10 * concurrency)) return false;
    this.expect(runId);
    this.backlog.push(runId);
    return true;
  }

  /** Holds a free slot of this process for a run about to be created; undefined when all are busy. */
  reserve(): LocalSlot | undefined {
    if (!this.jobs || this.closing || this.local >= (this.options.concurrency ?? 10)) return undefined;
    this.local += 1;
    let used = false;
    // The run is claimed after this (by the statement creating it): its lease runs from no earlier.
    const reservedAt = this.clock.now();
    return {
      owner: this.owner,
      leaseMs: this.lease.leaseMs,
      start: (claimed) => {
        if (used) return;
        used = true;
        this.run(claimed.run.run_id, { claimed, at: reservedAt });
      },
      release: () => {
        if (used) return;
        used = true;
        this.freeSlot();
      },
    };
  }

  private startLocal(runId: string): void {
    this.local += 1;
    this.run(runId);
  }

  /** Executes a run in a slot already counted in `local`, then frees the slot. */
  private run(runId: string, claimed?: ClaimedBefore): void {
    // Fire and forget: the run's outcome is recorded by handle; a failure of that is logged here.
    void this.handle(runId, claimed)
      .catch((error: unknown) => this.deps.log.error({ err: error, runId }, 'local run failed'))
      .finally(() => this.freeSlot());
  }

  private freeSlot(): void {
    this.local -= 1;
    const next = this.backlog.shift();
    if (next) this.startLocal(next);
    else if (this.local === 0) this.idle?.();
  }

  /**
   * How a run executing in this process ended, once it has: lets `/wait` in the same process skip
   * the event stream. Undefined when this process is not executing it (or did not finish it).
   */
  localResult(runId: string): Promise<RunResult | undefined> | undefined {
    return this.outcomes.get(runId)?.promise;
  }

  /** Registers a run this process takes on, so that waiters here can await its outcome. */
  private expect(runId: string): void {
    if (this.outcomes.has(runId)) return;
    let settle!: (result: RunResult | undefined) => void;
    const promise = new Promise<RunResult | undefined>((resolve) => (settle = resolve));
    this.outcomes.set(runId, { promise, settle });
  }

  private settle(runId: string, result: RunResult | undefined): void {
    this.outcomes.get(runId)?.settle(result);
    this.outcomes.delete(runId);
  }

  /**
   * Sweeps now, or once the sweep in progress ends: sweeps never overlap (a slow database does not
   * pile them up), and one due meanwhile still runs, at the time it then is.
   */
  private sweepSoon(): void {
    if (this.sweeping) {
      this.sweepAgain = true;
      return;
    }
    this.sweeping = this.sweep().finally(() => {
      this.sweeping = undefined;
      if (this.sweepAgain && !this.closing) {
        this.sweepAgain = false;
        this.sweepSoon();
      }
    });
  }

  private async sweep(): Promise<void> {
    try {
      for (const runId of await this.deps.runs.orphaned(this.takeover())) await this.deps.dispatcher.dispatch(runId);
    } catch (error) {
      this.deps.log.warn({ err: error }, 'run sweep failed');
    }
  }

  private handle(runId: string, claimedBefore?: ClaimedBefore): Promise<void> {
    this.expect(runId);
    // Waiters get the outcome as soon as it is recorded, before the stream's end is published.
    return this.execute(runId, (result) => this.settle(runId, result), claimedBefore).finally(() => this.settle(runId, undefined));
  }

  private async execute(runId: string, report: (result: RunResult) => void, claimedBefore?: ClaimedBefore): Promise<void> {
    const { runs, broker, log } = this.deps;
    const claimedAt = claimedBefore?.at ?? this.clock.now();
    const claimed = claimedBefore?.claimed ?? (await runs.claim(runId, this.owner, this.lease.leaseMs, this.takeover()));
    if (!claimed) {
      const pending = await runs.getById(runId);
      // Not due yet: come back when it is. Blocked behind another run: that run's end dispatches it.
      if (pending?.status === 'pending' && pending.available_at.getTime() > Date.now()) {
        await this.deps.dispatcher.dispatch(runId, pending.available_at.getTime() - Date.now());
      }
      return;
    }
    const { run, assistant } = claimed;
    const controller = new AbortController();
    // A cancel recorded before the claim came with it; one sent from now on arrives as a message.
    if (claimed.cancel) controller.abort(new RunCancelledError(claimed.cancel));
    const stopControl = await broker.onControl(runId, (message) => controller.abort(new RunCancelledError(message.action)));
    // Losing the lease aborts the graph: the worker that takes the run over executes it instead.
    // It is renewed until the run's end is recorded (which may wait for the database).
    const lease = new Lease(
      {
        subject: 'run',
        id: runId,
        owner: this.owner,
        settings: this.lease,
        renew: () => runs.heartbeat(runId, this.owner, run.attempt, this.lease.leaseMs),
        // A cancellation recorded in the database (by an API process that could not message this one).
        onRenewed: ({ cancel }) => {
          if (cancel) controller.abort(new RunCancelledError(cancel));
        },
        log: log.child({ runId }),
        onLost: (error) => controller.abort(error),
        clock: this.clock,
      },
      claimedAt,
    );
    try {
      const maxAttempts = this.options.maxAttempts ?? 3;
      const ended = run.attempt > maxAttempts ? await this.abandon(run, maxAttempts) : await this.executeClaimed(run, assistant, controller);
      if (ended && !lease.lost) {
        lease.finishing();
        await this.finish(run, ended, report, claimedAt, lease);
      }
    } finally {
      lease.stop();
      await stopControl();
    }
  }

  /** Executes a claimed run; undefined when it stopped because its lease was lost. */
  private async executeClaimed(run: Run, assistant: ClaimedRun['assistant'], controller: AbortController): Promise<Ended | undefined> {
    const { log } = this.deps;
    const runId = run.run_id;
    const timeoutMs = this.options.timeoutMs ?? 3_600_000;
    const deadline = this.clock.setTimeout(() => controller.abort(new RunTimeoutError(timeoutMs)), timeoutMs);
    try {
      if (!assistant) throw new NotFoundError(`Assistant ${run.assistant_id} not found`);
      return { outcome: await this.deps.executor.execute(run, assistant, controller.signal) };
    } catch (error) {
      if (error instanceof RunCancelledError) return { cancelled: error };
      if (error instanceof RunTimeoutError) {
        const message = { error: error.name, message: error.message };
        await this.publishError(runId, message);
        return { outcome: failedOutcome(message), timedOut: true };
      }
      if (controller.signal.reason instanceof LeaseLostError) return undefined; // logged by the lease; the new holder finishes the run
      if (error instanceof RunFencedError) {
        log.warn({ runId, attempt: run.attempt }, 'lease lost: another attempt holds the run, this one stops');
        return undefined;
      }
      log.error({ err: error, runId }, 'run crashed');
      const message = { error: (error as Error).name ?? 'Error', message: (error as Error).message ?? String(error) };
      await this.publishError(runId, message);
      return { outcome: failedOutcome(message) };
    } finally {
      deadline.cancel();
    }
  }

  /** A run taken over too often: it ends `error` without executing again. */
  private async abandon(run: Run, maxAttempts: number): Promise<Ended> {
    const message = {
      error: 'RunAbandonedError',
      message: `the run was started ${maxAttempts} times and its worker stopped each time (it died or lost its lease): it is not executed again`,
    };
    this.deps.log.error({ runId: run.run_id, attempt: run.attempt, maxAttempts }, 'run abandoned');
    await this.publishError(run.run_id, message);
    return { outcome: failedOutcome(message) };
  }

  private async finish(run: Run, ended: Ended, report: (result: RunResult) => void, startedAt: number, lease: Lease): Promise<void> {
    const { runs, broker, dispatcher, log } = this.deps;
    const { outcome, cancelled, timedOut } = ended;
    const status = cancelled ? 'interrupted' : timedOut ? 'timeout' : outcome!.status;
    // Writes around the run's end are retried through an outage of the database too.
    const retry = <T>(what: string, fn: () => Promise<T>) =>
      retryTransient(what, fn, { until: Date.now() + this.lease.holdMs, log, context: { runId: run.run_id }, stopped: () => lease.lost !== undefined });
    // While this run is unfinished no other run of the thread can start: undo a rollback first.
    if (cancelled?.action === 'rollback') {
      await retry('rolling the run back', async () => this.deps.deleteCheckpointsAfter(run.thread_id, await runs.startCheckpoint(run.run_id)));
    }
    const recorded = await recordEnd(
      runs,
      log,
      {
        runId: run.run_id,
        owner: this.owner,
        attempt: run.attempt,
        status,
        output: outcome?.output ?? null,
        failed: outcome?.status === 'error',
        interrupted: outcome?.interrupted ?? false,
        // A run that crashed or timed out has no final values: the thread keeps its last ones.
        ...(outcome && outcome.values !== null ? { values: outcome.values, interrupts: outcome.interrupts } : {}),
        error: outcome?.error ?? null,
      },
      () => lease.lost !== undefined,
    );
    lease.stop();
    const endedAt = new Date();
    if (!recorded.finished) {
      // Its lease was lost while it ended (or it was taken over): the new holder's outcome stands.
      log.warn({ runId: run.run_id, status }, 'lease lost: the run ended here after another worker took it over; this outcome is discarded');
      return;
    }
    const { ending, nextRunId } = recorded;
    runsFinished.inc({ status: ending.status });
    runDuration.observe({ status: ending.status }, (this.clock.now() - startedAt) / 1000);
    // Its graph finished, but its result could not be stored: the stream says so.
    if ((ending.error as { error?: string } | null)?.error === UNSTORABLE)
      await this.publishError(run.run_id, ending.error as { error: string; message: string });
    if (cancelled?.action === 'rollback') await retry('removing the rolled-back run', () => runs.remove(run.run_id));
    else report({ status: ending.status, output: ending.output });
    if (run.kwargs.protocol) await this.publishProtocolEnd(run, ending.status, outcome?.interrupted ?? false, ending.error as { message?: string } | null);
    await retry("ending the run's stream", () => broker.end(run.run_id));
    if (nextRunId) {
      // The sweeper dispatches a pending run that was not: a failure here only delays it.
      if (!this.tryLocal(nextRunId))
        await dispatcher
          .dispatch(nextRunId)
          .catch((error: unknown) => log.warn({ err: error, runId: nextRunId }, "could not dispatch the thread's next run: the sweeper will"));
    } else if (run.kwargs.temporary && run.kwargs.on_completion !== 'keep')
      await retry("scheduling the temporary thread's removal", () => dispatcher.deleteThreadLater(run.thread_id));
    // Last, once the thread's next run is on its way; a rolled-back run is gone and sends none.
    if (run.kwargs.webhook && cancelled?.action !== 'rollback') {
      const end: RunEnd = {
        status: ending.status,
        startedAt: new Date(startedAt),
        endedAt,
        values: ending.values ?? null,
        error: ending.error as RunEnd['error'],
      };
      if (this.deps.webhooks) await retry("queueing the run's webhook", () => this.deps.webhooks!.send(run, run.kwargs.webhook!, end));
      else log.warn({ runId: run.run_id }, 'the run names a webhook but this server has no signing secret: it is not sent');
    }
    if (cancelled?.action !== 'rollback') await this.deps.runEnded?.(run);
  }

  /**
   * The run's stream ends with its error. Publishing is best effort: the run's outcome (recorded
   * next) is what waiters read, so a broker failure here is logged and the run still completes.
   */
  private async publishError(runId: string, message: { error: string; message: string }): Promise<void> {
    try {
      await this.deps.broker.publish(runId, 'error', message);
    } catch (error) {
      this.deps.log.warn({ err: error, runId }, "could not publish the run's error event");
    }
  }

  /**
   * The root lifecycle event ending a protocol v2 run (best effort, like the error event), and the
   * thread's next event number recorded after it. Recorded at each run's end only (not per
   * event): a run always ends here, by its worker or the one that took it over.
   */
  private async publishProtocolEnd(run: Run, status: string, interrupted: boolean, error: { message?: string } | null): Promise<void> {
    const ending =
      status === 'success'
        ? { event: interrupted ? ('interrupted' as const) : ('completed' as const) }
        : status === 'interrupted'
          ? { event: 'interrupted' as const }
          : { event: 'failed' as const, error: error?.message ?? status };
    try {
      const { threads, broker } = this.deps;
      const next = await publishRunEnd(broker, run.thread_id, run.kwargs.protocol!, ending, await threads.eventSeq(run.thread_id));
      await threads.raiseEventSeq(run.thread_id, next);
    } catch (failure) {
      this.deps.log.warn({ err: failure, runId: run.run_id }, 'could not publish the end of the protocol run');
    }
  }

  private async deleteTemporaryThread(threadId: string): Promise<void> {
    const thread = await this.deps.threads.find(threadId);
    if (!thread?.temporary || (await this.deps.runs.hasUnfinished(threadId))) return;
    try {
      await this.deps.threads.delete(threadId);
    } catch (error) {
      // Deleted meanwhile by its client, who deletes its checkpoints too.
      if (error instanceof NotFoundError) return;
      throw error;
    }
    await this.deps.deleteCheckpoints(threadId);
  }
}
