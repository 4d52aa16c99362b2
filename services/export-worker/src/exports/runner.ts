/**
 * The export runner: claims export runs (one UTC day of an export each) and executes them with the
 * writer's `exportPartition`, saving its checkpoint in the run after every step, so a worker that
 * dies is replaced by another that resumes from the last checkpoint (see ExportStore.claim for the
 * leases). Transient storage failures are retried with backoff up to a bound; refused credentials,
 * a missing bucket or a deleted destination fail the run, and so the export, at once, with the
 * reason. Cancellation (or a timeout, or a lost lease) stops the writer between pages.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '@berth/log';
import type { Destinations } from '../destinations/destinations.js';
import { DestinationGoneError } from '../destinations/destinations.js';
import { parseFilter } from '../filter/parse.js';
import { classifyStorageError, isStorageFailure } from '../storage/s3.js';
import type { TraceStore } from '../traces/trace-store.js';
import { emptyCheckpoint, exportPartition as writePartition, partitionFolder, type ExportField, type ExportPartitionOptions, type PartitionCheckpoint } from '../writer/export-partition.js';
import { LeaseLostError, type ClaimedRun, type ExportStore } from './store.js';

export interface ExportRunnerOptions {
  store: ExportStore;
  destinations: Destinations;
  traces: TraceStore;
  logger: Logger;
  /** The clock (tests move it). @default () => new Date() */
  now?: () => Date;
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
  /** How often to look for work when idle. @default 1000 */
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
  private readonly now: () => Date;
  private readonly o: Required<Omit<ExportRunnerOptions, 'fileRows' | 'pageRows' | 'now'>> & Pick<ExportRunnerOptions, 'fileRows' | 'pageRows'>;
  private readonly active = new Map<string, { abort: AbortController; done: Promise<void> }>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  /** idle: driven by hand (tick); started: polls by itself; stopped: claims nothing more. */
  private state: 'idle' | 'started' | 'stopped' = 'idle';

  constructor(options: ExportRunnerOptions) {
    this.now = options.now ?? (() => new Date());
    this.o = {
      concurrency: 1, tenantConcurrency: 3, leaseMs: 60_000, pollMs: 1000, maxRetries: 20, retryBaseMs: 1000, retryMaxMs: 60_000,
      timeoutMs: 72 * 3_600_000, exportPartition: writePartition, ...options,
    };
  }

  start(): void {
    this.state = 'started';
    this.schedule(0);
  }

  /** Stops claiming, aborts the runs in progress (their checkpoints stay; another worker resumes them) and waits for them. */
  async stop(): Promise<void> {
    this.state = 'stopped';
    clearTimeout(this.timer);
    await this.ticking;
    for (const { abort } of this.active.values()) abort.abort(new Error('the export worker is stopping'));
    await Promise.all([...this.active.values()].map((a) => a.done));
  }

  /** One pass: times out late exports and fills free slots with claimed runs (tests call it directly). */
  async tick(): Promise<void> {
    await this.o.store.expire(this.now(), this.o.timeoutMs);
    while (this.state !== 'stopped' && this.active.size < this.o.concurrency) {
      const claimed = await this.o.store.claim(this.owner, this.now(), this.o.leaseMs, this.o.tenantConcurrency);
      if (!claimed) break;
      const abort = new AbortController();
      const done = this.execute(claimed, abort).finally(() => {
        this.active.delete(claimed.run.id);
        // A slot is free: look for more work now rather than at the next poll.
        if (this.state === 'started') this.schedule(0);
      });
      this.active.set(claimed.run.id, { abort, done });
    }
  }

  /** Waits for the runs in progress (tests). */
  async idle(): Promise<void> {
    while (this.active.size) await Promise.all([...this.active.values()].map((a) => a.done));
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.ticking = this.tick()
        .catch((error: unknown) => this.o.logger.error({ err: error }, 'looking for export work failed'))
        .finally(() => {
          this.ticking = undefined;
          if (this.state === 'started') this.schedule(this.o.pollMs);
        });
    }, delayMs);
    this.timer.unref();
  }

  private async execute({ run, export: exp }: ClaimedRun, abort: AbortController): Promise<void> {
    const { store, logger, leaseMs } = this.o;
    const log = logger.child({ exportId: exp.id, exportRunId: run.id, attempt: run.retry_number });
    // The lease is renewed while the writer works; a renewal refused means the run was cancelled,
    // timed out or taken over: the writer stops at its next page.
    const heartbeat = setInterval(() => {
      store.renew(run.id, this.owner, this.now(), leaseMs).then(
        (held) => held || abort.abort(new LeaseLostError(run.id)),
        (error: unknown) => log.warn({ err: error }, 'renewing an export run lease failed'),
      );
    }, Math.max(100, Math.floor(leaseMs / 3)));
    heartbeat.unref();
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
            folder: partitionFolder({ prefix: location.prefix, exportId: exp.id, tenantId: exp.tenant_id, sessionId: exp.session_id, day: run.start_time.toISOString().slice(0, 10) }),
          },
          checkpoint: run.metadata.checkpoint ?? emptyCheckpoint(),
          save: (checkpoint) => store.saveCheckpoint(run.id, this.owner, checkpoint, this.now()),
          signal: abort.signal,
          ...(this.o.fileRows ? { fileRows: this.o.fileRows } : {}),
          ...(this.o.pageRows ? { pageRows: this.o.pageRows } : {}),
        });
        await store.completeRun(run.id, this.owner, checkpoint, this.now());
        log.info({ rows: checkpoint.rows_written, files: checkpoint.exported_files.length }, 'export run completed');
      } finally {
        destination.client.destroy();
      }
    } catch (error) {
      await this.failed(run.id, run.retry_number, error, abort, location, log);
    } finally {
      clearInterval(heartbeat);
    }
  }

  /** Decides what a failed attempt means: stop quietly, retry later, or fail the run (and export). */
  private async failed(runId: string, attempt: number, error: unknown, abort: AbortController, location: Parameters<typeof classifyStorageError>[1] | undefined, log: Logger): Promise<void> {
    const { store } = this.o;
    if (abort.signal.aborted || error instanceof LeaseLostError) {
      // Cancelled, timed out, taken over, or this worker stops: whoever holds the run now decides.
      log.info({ reason: String(abort.signal.reason ?? error) }, 'export run stopped');
      return;
    }
    const reason = location && isStorageFailure(error) ? classifyStorageError(error, location) : undefined;
    const message = reason?.message ?? (error instanceof Error ? error.message : String(error));
    const fatal = error instanceof DestinationGoneError || reason?.kind === 'access_denied' || reason?.kind === 'missing_bucket';
    try {
      if (fatal || attempt >= this.o.maxRetries) {
        log.warn({ err: error, reason: message }, 'export run failed');
        await store.failRun(runId, this.owner, fatal ? message : `gave up after ${attempt + 1} attempts: ${message}`, this.now());
      } else {
        const delay = Math.min(this.o.retryBaseMs * 2 ** attempt, this.o.retryMaxMs);
        log.info({ reason: message, retryInMs: delay }, 'export run attempt failed; retrying');
        await store.scheduleRetry(runId, this.owner, message, new Date(this.now().getTime() + delay), this.now());
      }
    } catch (recordError) {
      if (recordError instanceof LeaseLostError) return;
      // The lease runs out and another attempt follows: the failure is not lost, only delayed.
      log.error({ err: recordError, reason: message }, 'recording an export run failure failed');
    }
  }
}
