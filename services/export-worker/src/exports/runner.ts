/**
 * The export runner: claims export runs (one UTC day of an export each) and executes them with the
 * writer's `exportPartition`, saving its checkpoint in the run after every step, so a worker that
 * dies is replaced by another that resumes from the last checkpoint (the leases are @berth/lease's:
 * renewed while the writer works, taken over from a dead worker once they expire, from a live one
 * that renews nothing after the hold period too). Transient storage failures are retried with
 * backoff up to a bound; refused credentials, a missing bucket or a deleted destination fail the
 * run, and so the export, at once, with the reason. Cancellation (or a timeout, or a lost lease)
 * stops the writer between pages.
 *
 * An idle runner is woken, not polling: by a notification when an export is created or one ends
 * (ExportStore's RUNS_CHANNEL, from any replica), at the time the next run becomes claimable (a
 * retry's backoff, a lease's expiry), and by a slow safety poll (`pollMs`).
 */
import { randomUUID } from 'node:crypto';
import { PgListener } from '@berth/broker';
import { systemClock, type Clock, type Timer } from '@berth/clock';
import { Lease, LeaseLostError, leaseSettings, OwnerLiveness, type Holder, type LeaseSettings } from '@berth/lease';
import type { Logger } from '@berth/log';
import type { Destinations } from '../destinations/destinations.js';
import { DestinationGoneError } from '../destinations/destinations.js';
import { parseFilter } from '../filter/parse.js';
import { classifyStorageError, isStorageFailure } from '../storage/s3.js';
import type { TraceStore } from '../traces/trace-store.js';
import {
  emptyCheckpoint,
  exportPartition as writePartition,
  partitionFolder,
  type ExportField,
  type ExportPartitionOptions,
  type PartitionCheckpoint,
} from '../writer/export-partition.js';
import { RUNS_CHANNEL, type ClaimedRun, type ExportStore } from './store.js';
import { exportRunAttempts, exportsRunning } from '../metrics.js';

export interface ExportRunnerOptions {
  store: ExportStore;
  /** The export database: the runner's liveness session and its LISTEN connection. */
  databaseUrl: string;
  destinations: Destinations;
  traces: TraceStore;
  logger: Logger;
  /** The clock of leases, retries and timeouts (tests move it). @default systemClock */
  clock?: Clock;
  /**
   * Runs this worker executes at once. Each has its own Parquet encoder thread (~130 MiB at peak):
   * one keeps a worker under 500 MB; two export ~10 % faster on 2 CPUs (docs/benchmarks.md).
   * @default 1
   */
  concurrency?: number;
  /** Exports of one tenant RUNNING at once across all workers; the rest wait as CREATED. @default 3 */
  tenantConcurrency?: number;
  /** How long a claim lasts without renewal (a dead worker's runs are taken over after it). @default 60000 */
  leaseMs?: number;
  /**
   * How long past its lease a run stays with a worker that is alive but renews nothing (cut off
   * from the database, or stalled) before another takes it over.
   * @default 60000
   */
  holdMs?: number;
  /**
   * How often an idle runner looks for work unprompted. Notifications and the known due times
   * wake it for everything else; this catches what neither announces: an export past its
   * timeout (hours: half a minute late is nothing), and a dead worker's run that waited while
   * this runner was in its takeover grace (its first lease after it connected).
   * @default 30000
   */
  pollMs?: number;
  /** Retries of a run after transient failures before it (and its export) fails. @default 20 */
  maxRetries?: number;
  /** Wait before retry n is min(retryBaseMs · 2^n, retryMaxMs). @default 1000 */
  retryBaseMs?: number;
  /** @default 60000 */
  retryMaxMs?: number;
  /** An export not finished this long after its creation is TIMEDOUT. @default 259200000 (72 h) */
  timeoutMs?: number;
  /** Passed to the writer (rows per file). */
  fileRows?: number;
  /** Passed to the writer (rows per page read from Postgres). */
  pageRows?: number;
  /** The writer (tests may wrap it to observe its progress). @default exportPartition */
  exportPartition?: (options: ExportPartitionOptions) => Promise<PartitionCheckpoint>;
}

export class ExportRunner {
  /** Identifies this worker's leases (unique per process start). */
  readonly owner = `worker-${randomUUID()}`;
  private readonly clock: Clock;
  private readonly lease: LeaseSettings;
  private readonly o: Required<Omit<ExportRunnerOptions, 'fileRows' | 'pageRows' | 'clock'>> & Pick<ExportRunnerOptions, 'fileRows' | 'pageRows'>;
  private readonly liveness: OwnerLiveness;
  private readonly listener: PgListener;
  private readonly active = new Map<string, { abort: AbortController; done: Promise<void> }>();
  /** Stops reporting the runs executing here to the metrics. */
  private unwatch?: () => void;
  private timer: Timer | undefined;
  private ticking: Promise<void> | undefined;
  /** A wake-up came while a pass was running: another pass follows it. */
  private again = false;
  /** idle: driven by hand (tick); started: woken by itself; stopped: claims nothing more. */
  private state: 'idle' | 'started' | 'stopped' = 'idle';

  constructor(options: ExportRunnerOptions) {
    this.clock = options.clock ?? systemClock;
    this.o = {
      concurrency: 1,
      tenantConcurrency: 3,
      leaseMs: 60_000,
      holdMs: 60_000,
      pollMs: 30_000,
      maxRetries: 20,
      retryBaseMs: 1000,
      retryMaxMs: 60_000,
      timeoutMs: 72 * 3_600_000,
      exportPartition: writePartition,
      ...options,
    };
    this.lease = leaseSettings({ leaseMs: this.o.leaseMs, holdMs: this.o.holdMs });
    this.liveness = new OwnerLiveness({
      connectionString: options.databaseUrl,
      owner: this.owner,
      applicationName: 'berth-export-worker-liveness',
      log: options.logger,
      clock: this.clock,
    });
    this.listener = new PgListener({
      connectionString: options.databaseUrl,
      channels: [RUNS_CHANNEL],
      applicationName: 'berth-export-worker-runs',
      log: options.logger,
      onNotification: () => this.wake(),
      // Notifications sent while it was away are lost: look now.
      onReconnect: () => this.wake(),
    });
  }

  private now(): Date {
    return new Date(this.clock.now());
  }

  async start(): Promise<void> {
    this.state = 'started';
    await this.liveness.start();
    this.unwatch = exportsRunning.source(() => [{ value: this.active.size }]);
    this.wake();
  }

  /** Stops claiming, aborts the runs in progress (their checkpoints stay; another worker resumes them) and waits for them. */
  async stop(): Promise<void> {
    this.state = 'stopped';
    this.unwatch?.();
    this.timer?.cancel();
    await this.ticking;
    await this.listener.close();
    for (const { abort } of this.active.values()) abort.abort(new Error('the export worker is stopping'));
    await Promise.all([...this.active.values()].map((a) => a.done));
    // Last: while it is open, other workers leave the runs still held here alone for the hold period.
    this.liveness.close();
  }

  /** One pass: times out late exports and fills free slots with claimed runs (tests call it directly). */
  async tick(): Promise<void> {
    await this.o.store.expire(this.now(), this.o.timeoutMs);
    while (this.state !== 'stopped' && this.active.size < this.o.concurrency) {
      const claimedAt = this.clock.now();
      const claimed = await this.o.store.claim(this.owner, new Date(claimedAt), this.o.leaseMs, this.o.tenantConcurrency, this.liveness.takeover(this.lease));
      if (!claimed) break;
      const abort = new AbortController();
      const done = this.execute(claimed, abort, claimedAt).finally(() => {
        this.active.delete(claimed.run.id);
        // A slot is free: look for more work now.
        if (this.state === 'started') this.wake();
      });
      this.active.set(claimed.run.id, { abort, done });
    }
  }

  /** Waits for the runs in progress (tests). */
  async idle(): Promise<void> {
    while (this.active.size) await Promise.all([...this.active.values()].map((a) => a.done));
  }

  /** Runs a pass now (after the one in progress), then sleeps until the next known due time or the safety poll. */
  private wake(): void {
    if (this.state !== 'started') return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.timer?.cancel();
    this.ticking = this.pass().finally(() => {
      this.ticking = undefined;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  private async pass(): Promise<void> {
    let delay = this.o.pollMs;
    try {
      // Listening again (each pass tries) once a first connection failed; a lost one reconnects by itself.
      await this.listener
        .ensure()
        .catch((error: unknown) => this.o.logger.warn({ err: error }, 'export runner cannot listen for new work: it looks at its safety poll'));
      await this.tick();
      // With every slot busy, the end of a run wakes the runner; else the next run that becomes claimable.
      if (this.active.size < this.o.concurrency) {
        const due = await this.o.store.nextDue(this.owner, this.now(), this.lease.holdMs);
        // Just past it: a lease is taken over once it has expired, not at the moment it does.
        if (due) delay = Math.min(delay, Math.max(0, due.getTime() - this.clock.now() + 1));
      }
    } catch (error) {
      this.o.logger.error({ err: error, retryInMs: delay }, 'looking for export work failed');
    }
    if (this.state === 'started') this.timer = this.clock.setTimeout(() => this.wake(), delay);
  }

  private async execute({ run, export: exp }: ClaimedRun, abort: AbortController, claimedAt: number): Promise<void> {
    const { store, logger } = this.o;
    const log = logger.child({ exportId: exp.id, exportRunId: run.id, attempt: run.retry_number });
    const holder: Holder = { owner: this.owner, token: run.lease_token };
    // The lease is renewed while the writer works; a renewal refused means the run was cancelled,
    // timed out or taken over, and renewals failing past lease + hold that others may take it: the
    // writer stops at its next page.
    const lease = new Lease(
      {
        subject: 'export run',
        id: run.id,
        owner: this.owner,
        settings: this.lease,
        renew: async () => ({ held: await store.renew(run.id, holder, this.now(), this.lease.leaseMs) }),
        onLost: (error) => abort.abort(error),
        log,
        // Most runs are lost to a cancel or a timeout of their export.
        takenLevel: 'info',
        clock: this.clock,
      },
      claimedAt,
    );
    let location;
    try {
      const destination = await this.o.destinations.open(exp.tenant_id, exp.destination_id);
      location = destination.location;
      try {
        const checkpoint = await this.o.exportPartition({
          traces: this.o.traces,
          tenantId: exp.tenant_id,
          sessionId: exp.session_id,
          start: run.start_time,
          end: run.end_time,
          ...(exp.filter ? { filter: parseFilter(exp.filter) } : {}),
          ...(exp.export_fields ? { fields: exp.export_fields as ExportField[] } : {}),
          target: {
            client: destination.client,
            bucket: location.bucket_name,
            folder: partitionFolder({
              prefix: location.prefix,
              exportId: exp.id,
              tenantId: exp.tenant_id,
              sessionId: exp.session_id,
              day: run.start_time.toISOString().slice(0, 10),
            }),
          },
          checkpoint: run.metadata.checkpoint ?? emptyCheckpoint(),
          save: (checkpoint) => store.saveCheckpoint(run.id, holder, checkpoint, this.now()),
          signal: abort.signal,
          ...(this.o.fileRows ? { fileRows: this.o.fileRows } : {}),
          ...(this.o.pageRows ? { pageRows: this.o.pageRows } : {}),
        });
        lease.finishing();
        await store.completeRun(run.id, holder, checkpoint, this.now());
        exportRunAttempts.inc({ outcome: 'completed', cause: '' });
        log.info({ rows: checkpoint.rows_written, files: checkpoint.exported_files.length }, 'export run completed');
      } finally {
        destination.client.destroy();
      }
    } catch (error) {
      // What follows records the attempt's end, releasing the lease: a renewal that then finds the run free is that.
      lease.finishing();
      await this.failed(run.id, holder, run.retry_number, error, abort, location, log);
    } finally {
      lease.stop();
    }
  }

  /** Decides what a failed attempt means: stop quietly, retry later, or fail the run (and export). */
  private async failed(
    runId: string,
    holder: Holder,
    attempt: number,
    error: unknown,
    abort: AbortController,
    location: Parameters<typeof classifyStorageError>[1] | undefined,
    log: Logger,
  ): Promise<void> {
    const { store } = this.o;
    if (abort.signal.aborted || error instanceof LeaseLostError) {
      // Cancelled, timed out, taken over, or this worker stops: whoever holds the run now decides.
      log.info({ reason: String(abort.signal.reason ?? error) }, 'export run stopped');
      return;
    }
    const reason = location && isStorageFailure(error) ? classifyStorageError(error, location) : undefined;
    const message = reason?.message ?? (error instanceof Error ? error.message : String(error));
    const fatal = error instanceof DestinationGoneError || reason?.kind === 'access_denied' || reason?.kind === 'missing_bucket';
    const cause = fatal ? 'destination' : reason ? 'storage' : 'error';
    try {
      if (fatal || attempt >= this.o.maxRetries) {
        log.warn({ err: error, reason: message }, 'export run failed');
        await store.failRun(runId, holder, fatal ? message : `gave up after ${attempt + 1} attempts: ${message}`, this.now());
        exportRunAttempts.inc({ outcome: 'failed', cause });
      } else {
        const delay = Math.min(this.o.retryBaseMs * 2 ** attempt, this.o.retryMaxMs);
        log.info({ reason: message, retryInMs: delay }, 'export run attempt failed; retrying');
        await store.scheduleRetry(runId, holder, message, new Date(this.now().getTime() + delay), this.now());
        exportRunAttempts.inc({ outcome: 'retrying', cause });
      }
    } catch (recordError) {
      if (recordError instanceof LeaseLostError) return;
      // The lease runs out and another attempt follows: the failure is not lost, only delayed.
      log.error({ err: recordError, reason: message }, 'recording an export run failure failed');
    }
  }
}
