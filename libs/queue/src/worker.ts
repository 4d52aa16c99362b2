/**
 * The consumer side: `JobWorker` runs catalog handlers for the jobs of one queue, with the
 * payload validated again, per-attempt timeouts, retries with backoff and stalled-job recovery.
 */
import { EventEmitter } from 'node:events';
import type { Job } from 'bullmq';
import { InvalidArgumentError } from '@berth/errors';
import { silentLogger, type Logger } from '@berth/log';
import { assertQueueName, createBullWorker, type BullWorker, type QueueBackendConfig } from './backend.js';
import { definitionOf, type AnyJobCatalog, type JobName, type JobPayload } from './catalog.js';
import { originalError, recordable, storableResult, withTimeout } from './attempt.js';
import { InvalidJobPayloadError, JobLockLostError, QueueClosedError, UnknownJobError } from './errors.js';

/** What a handler gets besides the payload. */
export interface JobContext {
  jobId: string;
  /** The job name (the catalog key). */
  name: string;
  /** 1 for the first attempt, 2 for the first retry, … (a run restarted after a stall keeps its number). */
  attempt: number;
  /**
   * Aborted when the attempt times out (reason: `JobTimeoutError`), the worker is closed with
   * `force` (reason: `QueueClosedError`), or the worker could not renew the job's lock because the
   * job was taken from it (reason: `JobLockLostError`; the job runs again elsewhere). Handlers
   * should pass it on to their I/O.
   */
  signal: AbortSignal;
  /** A logger bound to `queue`, `job`, `jobId` and `attempt`. */
  log: Logger;
}

/**
 * Handles one job. The resolved value becomes the job's return value: it must have a JSON form
 * without U+0000 or unpaired surrogates, or the job fails with `InvalidJobResultError`. A thrown
 * error fails the attempt (retried while attempts remain).
 */
export type JobHandler<P> = (payload: P, ctx: JobContext) => Promise<unknown>;

/** One handler per job name of catalog `C`. */
export type JobHandlers<C extends AnyJobCatalog> = { [N in JobName<C>]: JobHandler<JobPayload<C, N>> };

/** Options of a {@link JobWorker}. */
export interface JobWorkerOptions {
  /**
   * Jobs run at the same time by this worker.
   * @default 1
   */
  concurrency?: number;
  /**
   * How long a job stays locked to this worker without a renewal; renewed every half of it while
   * the handler runs. After a crash the job is recoverable once the lock has expired.
   * @default 30000
   */
  lockDurationMs?: number;
  /**
   * How often this worker looks for stalled jobs (active, lock expired) to put back in the queue.
   * A job is recovered by the second check that sees it stalled.
   * @default 30000
   */
  stalledIntervalMs?: number;
  /**
   * How many times a job may stall before it fails instead of being recovered.
   * @default 1
   */
  maxStalledCount?: number;
  /**
   * Parent of the handlers' `ctx.log`; also receives backend errors.
   * @default silentLogger()
   */
  log?: Logger;
}

/** Emitted after an attempt completed. */
export interface JobCompletedEvent {
  jobId: string;
  name: string;
  attempt: number;
  result: unknown;
}

/** Emitted after an attempt failed (thrown error, timeout, invalid payload or result). */
export interface JobFailedEvent {
  jobId: string;
  name: string;
  attempt: number;
  error: Error;
  /** True when the job will run again (attempts remain and the error is retryable). */
  willRetry: boolean;
}

/** The events of a {@link JobWorker}, for observers and tests. */
export interface JobWorkerEvents {
  completed: [JobCompletedEvent];
  failed: [JobFailedEvent];
  /** A job of this queue was found stalled (its worker died) and put back. */
  stalled: [{ jobId: string }];
  /** A backend error the worker recovers from by itself (logged as well). */
  error: [Error];
}

/**
 * Consumer of the jobs of catalog `C` on one queue; starts at construction.
 *
 * @example
 * ```ts
 * const worker = new JobWorker(deployJobs, 'deployments', backend, {
 *   'build-revision': async ({ revisionId }, { signal, log }) => { … },
 *   'delete-deployment': async ({ deploymentId }) => { … },
 * }, { concurrency: 4 });
 * await worker.close();
 * ```
 */
export class JobWorker<C extends AnyJobCatalog> {
  readonly catalog: C;
  readonly name: string;
  readonly #handlers: JobHandlers<C>;
  readonly #log: Logger;
  readonly #events = new EventEmitter<JobWorkerEvents>();
  /** The running attempts' controllers, by job id. */
  readonly #inflight = new Map<string, { controller: AbortController; name: string }>();
  readonly #attempts = new WeakMap<Job, number>();
  readonly backend: QueueBackendConfig['kind'];
  readonly #worker: BullWorker;
  #closing: Promise<void> | undefined;

  /**
   * @param catalog - the jobs of the queue.
   * @param name - queue name, shared with the producers.
   * @param backend - where the queue lives.
   * @param handlers - one handler per job name of the catalog.
   * @throws InvalidArgumentError for an invalid queue name, option, or a missing handler.
   */
  constructor(catalog: C, name: string, backend: QueueBackendConfig, handlers: JobHandlers<C>, options: JobWorkerOptions = {}) {
    assertQueueName(name);
    for (const job of catalog.names) {
      if (typeof (handlers as Record<string, unknown>)[job] !== 'function') throw new InvalidArgumentError(`no handler for job '${job}'`);
    }
    const { concurrency = 1, lockDurationMs = 30_000, stalledIntervalMs = 30_000, maxStalledCount = 1 } = options;
    positiveInteger('concurrency', concurrency);
    positiveInteger('lockDurationMs', lockDurationMs);
    positiveInteger('stalledIntervalMs', stalledIntervalMs);
    if (!(Number.isInteger(maxStalledCount) && maxStalledCount >= 0)) throw new InvalidArgumentError('maxStalledCount must be an integer of at least 0');
    this.catalog = catalog;
    this.name = name;
    this.#handlers = handlers;
    this.backend = backend.kind;
    this.#log = (options.log ?? silentLogger()).child({ queue: name, backend: backend.kind });

    // Three parameters: BullMQ only passes its own AbortSignal to processors that declare it.
    const processor = (job: Job, _token: string | undefined, signal?: AbortSignal) => this.#process(job, signal);
    this.#worker = createBullWorker(backend, name, processor, {
      concurrency,
      lockDuration: lockDurationMs,
      stalledInterval: stalledIntervalMs,
      maxStalledCount,
    });
    this.#worker.on('completed', (job: Job, result: unknown) => {
      this.#events.emit('completed', { jobId: job.id ?? '', name: job.name, attempt: this.#attemptOf(job), result });
    });
    this.#worker.on('failed', (job: Job | undefined, err: Error) => this.#onFailed(job, err));
    this.#worker.on('stalled', (jobId: string) => this.#events.emit('stalled', { jobId }));
    this.#worker.on('lockRenewalFailed', (jobIds: string[]) => this.#onLockLost(jobIds));
    this.#worker.on('error', (err: Error) => {
      this.#log.warn({ err }, 'queue worker error');
      if (this.#events.listenerCount('error') > 0) this.#events.emit('error', err);
    });
  }

  /** Subscribes to a worker event. */
  on<E extends keyof JobWorkerEvents>(event: E, listener: (...args: JobWorkerEvents[E]) => void): this {
    this.#events.on(event, listener as never);
    return this;
  }

  /** Unsubscribes a listener added with {@link on}. */
  off<E extends keyof JobWorkerEvents>(event: E, listener: (...args: JobWorkerEvents[E]) => void): this {
    this.#events.off(event, listener as never);
    return this;
  }

  /** Resolves once the worker's backend connections are up (it is then taking jobs). */
  async ready(): Promise<void> {
    await this.#worker.waitUntilReady();
  }

  /**
   * Stops taking jobs and closes the backend connections. By default waits for the running
   * handlers to finish and records their outcome. With `force`, aborts their signals and returns
   * at once: their jobs stay active until their lock expires, then another worker recovers them.
   * Idempotent.
   */
  close(options: { force?: boolean } = {}): Promise<void> {
    if (!this.#closing) {
      const force = options.force ?? false;
      const closed = this.#worker.close(force);
      if (force && this.backend === 'postgres') {
        // BullMQ's Postgres backend does not end a fetch blocked on LISTEN when closed with
        // `force`: its timer (up to the next delayed job's due time, at most an hour) would keep
        // the process alive. disconnect() cancels that wait; the close above owns the rest.
        // Fire and forget, its failure logged: the close below must not wait for it.
        void this.#worker.disconnect().catch((err: unknown) => this.#log.warn({ err }, 'error while disconnecting the queue worker'));
      }
      this.#closing = closed
        .catch((err: unknown) => this.#log.warn({ err }, 'error while closing the queue worker'))
        .then(() => {
          // Only once the backend is closed: an attempt failing now must not be recorded as a
          // failure (which would consume an attempt); its job is left for stalled recovery.
          for (const { controller } of this.#inflight.values()) controller.abort(new QueueClosedError(this.name));
        });
    }
    return this.#closing;
  }

  async #process(job: Job, bullSignal: AbortSignal | undefined): Promise<unknown> {
    const attempt = (job.attemptsMade ?? 0) + 1;
    this.#attempts.set(job, attempt);
    const jobId = job.id ?? '';
    const def = definitionOf(this.catalog, job.name);
    if (!def) throw recordable(new UnknownJobError(job.name, this.name), true);
    const parsed = def.schema.safeParse(job.data);
    if (!parsed.success) throw recordable(InvalidJobPayloadError.fromZod(job.name, parsed.error), true);
    const handler = (this.#handlers as Record<string, JobHandler<unknown>>)[job.name] as JobHandler<unknown>;

    const controller = new AbortController();
    const forward = () => controller.abort(bullSignal?.reason);
    bullSignal?.addEventListener('abort', forward, { once: true });
    this.#inflight.set(jobId, { controller, name: job.name });
    const log = this.#log.child({ job: job.name, jobId, attempt });
    let result: unknown;
    try {
      const run = handler(parsed.data, { jobId, name: job.name, attempt, signal: controller.signal, log });
      result = await withTimeout(run, { ms: def.timeoutMs, controller, jobName: job.name, jobId });
    } catch (err) {
      throw recordable(err);
    } finally {
      bullSignal?.removeEventListener('abort', forward);
      this.#inflight.delete(jobId);
    }
    return storableResult(job.name, result);
  }

  /**
   * BullMQ found jobs' locks held by someone else (their lock expired and another worker recovered
   * them, or they were removed) and goes on running their handlers: stop them, since each job now
   * runs elsewhere.
   */
  #onLockLost(jobIds: string[]): void {
    for (const jobId of jobIds) {
      const running = this.#inflight.get(jobId);
      if (!running) continue; // it ended meanwhile
      this.#log.error({ jobId, job: running.name }, 'job lock lost: stopping the job here; another worker runs it');
      running.controller.abort(new JobLockLostError(running.name, jobId));
    }
  }

  #onFailed(job: Job | undefined, err: Error): void {
    if (!job) return;
    const error = originalError(err) ?? err;
    // BullMQ has already counted this attempt in job.attemptsMade when it emits 'failed'.
    const willRetry = err.name !== 'UnrecoverableError' && job.attemptsMade < (job.opts.attempts ?? 1);
    // A retried attempt is worth a warning; the last one failing is an error.
    this.#log[willRetry ? 'warn' : 'error']({ err: error, job: job.name, jobId: job.id, attempt: this.#attemptOf(job), willRetry }, 'job attempt failed');
    this.#events.emit('failed', { jobId: job.id ?? '', name: job.name, attempt: this.#attemptOf(job), error, willRetry });
  }

  #attemptOf(job: Job): number {
    return this.#attempts.get(job) ?? job.attemptsMade;
  }
}

function positiveInteger(name: string, value: number): void {
  if (!(Number.isInteger(value) && value >= 1)) throw new InvalidArgumentError(`${name} must be a positive integer`);
}
