/**
 * The producer side: `JobQueue` enqueues catalog jobs (payload checked first) and reads their
 * state back.
 */
import type { Job, JobsOptions } from 'bullmq';
import { InvalidArgumentError } from '@berth/errors';
import { silentLogger, type Logger } from '@berth/log';
import { assertQueueName, createBullQueue, type BullQueue, type QueueBackendConfig } from './backend.js';
import { definitionOf, type AnyJobCatalog, type JobDefinition, type JobInput, type JobName } from './catalog.js';
import { InvalidJobPayloadError, QueueBackendError, QueueClosedError, UnknownJobError } from './errors.js';
import { jsonRoundTrip, unstorableIssues } from './portable.js';

/** Options of one `enqueue` call. */
export interface EnqueueOptions {
  /**
   * Run the job no earlier than this many milliseconds from now.
   * @default 0
   */
  delayMs?: number;
  /**
   * Caller-chosen job id, making the enqueue idempotent: while a job with this id exists in the
   * queue (retention included), enqueueing it again returns the same id and adds nothing.
   * Letters, digits, '.', '_' and '-', not all digits.
   * @default a backend-generated id
   */
  jobId?: string;
}

/** Where a job is in its life. */
export type JobState = 'waiting' | 'delayed' | 'active' | 'completed' | 'failed';

/** A snapshot of one job, as returned by {@link JobQueue.getJob}. */
export interface JobInfo<N extends string = string, P = unknown> {
  id: string;
  name: N;
  /** The payload as it was enqueued (the schema's input). */
  payload: P;
  state: JobState;
  /** Attempts that finished (failed or completed); a stalled run does not count. */
  attemptsMade: number;
  /** Times a worker started the job, stalled runs included. */
  attemptsStarted: number;
  /** The catalog's `attempts` at enqueue time. */
  maxAttempts: number;
  /** Message of the last failure, when an attempt failed. */
  failedReason?: string;
  /** What the handler returned, once completed. */
  returnValue?: unknown;
  enqueuedAt: Date;
  /** When the current (or last) attempt started. */
  startedAt?: Date;
  finishedAt?: Date;
}

/** {@link JobInfo} of any job of catalog `C`, discriminated by `name`. */
export type JobInfoOf<C extends AnyJobCatalog> = { [N in JobName<C>]: JobInfo<N, JobInput<C, N>> }[JobName<C>];

/** Options of a {@link JobQueue}. */
export interface JobQueueOptions {
  /**
   * Where backend connection errors are logged.
   * @default silentLogger()
   */
  log?: Logger;
}

const JOB_ID = /^[A-Za-z0-9._-]+$/;

/** Maps a BullMQ job option set from a catalog definition. */
export function bullJobOptions(def: JobDefinition): JobsOptions {
  return {
    attempts: def.attempts ?? 1,
    ...(def.backoff ? { backoff: { type: def.backoff.type, delay: def.backoff.delayMs } } : {}),
    removeOnComplete: def.removeOnComplete ?? false,
    removeOnFail: def.removeOnFail ?? false,
  };
}

/**
 * Producer of the jobs of catalog `C` on one queue.
 *
 * @example
 * ```ts
 * const queue = new JobQueue(deployJobs, 'deployments', { kind: 'postgres', connectionString });
 * const id = await queue.enqueue('build-revision', { revisionId }, { delayMs: 1000 });
 * ```
 */
export class JobQueue<C extends AnyJobCatalog> {
  readonly catalog: C;
  readonly name: string;
  readonly backend: QueueBackendConfig['kind'];
  readonly #queue: BullQueue;
  readonly #log: Logger;
  readonly #inflight = new Set<Promise<unknown>>();
  #closing: Promise<void> | undefined;

  /**
   * @param catalog - the jobs this queue carries.
   * @param name - queue name, shared with the workers that consume it.
   * @param backend - where the queue lives.
   * @throws InvalidArgumentError for an invalid queue name or backend config.
   */
  constructor(catalog: C, name: string, backend: QueueBackendConfig, options: JobQueueOptions = {}) {
    assertQueueName(name);
    this.catalog = catalog;
    this.name = name;
    this.backend = backend.kind;
    this.#log = (options.log ?? silentLogger()).child({ queue: name, backend: backend.kind });
    this.#queue = createBullQueue(backend, name);
    this.#queue.on('error', (err: Error) => this.#log.warn({ err }, 'queue backend error'));
  }

  /** Resolves once the backend is reachable (and, on Postgres, its schema is migrated). */
  async ready(): Promise<void> {
    this.#assertOpen();
    await this.#call('connect', () => this.#queue.waitUntilReady());
  }

  /**
   * Validates `payload` against the job's schema and enqueues it. What is checked (and stored)
   * is the payload's JSON round trip, i.e. what the worker will receive.
   *
   * @returns the job id.
   * @throws InvalidJobPayloadError (nothing enqueued) when the payload does not match its schema,
   *   has no JSON form, or holds text no backend can store (U+0000, unpaired surrogates).
   * @throws UnknownJobError for a name outside the catalog; InvalidArgumentError for bad options.
   * @throws QueueClosedError after {@link close}; QueueBackendError when the backend fails.
   */
  async enqueue<N extends JobName<C>>(name: N, payload: JobInput<C, N>, options: EnqueueOptions = {}): Promise<string> {
    this.#assertOpen();
    const def = definitionOf(this.catalog, name);
    if (!def) throw new UnknownJobError(name, this.name);
    const stored = storablePayload(name, def, payload);
    const { delayMs = 0, jobId } = options;
    if (!(Number.isFinite(delayMs) && delayMs >= 0)) throw new InvalidArgumentError('delayMs must be a number of at least 0');
    if (jobId !== undefined && (!JOB_ID.test(jobId) || /^\d+$/.test(jobId) || jobId.length > 200)) {
      throw new InvalidArgumentError(`invalid jobId '${jobId}': use letters, digits, '.', '_' and '-', not only digits`);
    }
    const job = await this.#call('enqueue', () =>
      this.#queue.add(name, stored, { ...bullJobOptions(def), ...(delayMs > 0 ? { delay: Math.round(delayMs) } : {}), jobId }),
    );
    if (!job.id) throw new QueueBackendError('enqueue', this.name, new Error('the backend returned no job id'));
    return job.id;
  }

  /** The job with this id, or undefined when there is none (never enqueued, or removed by retention). */
  async getJob(id: string): Promise<JobInfoOf<C> | undefined> {
    this.#assertOpen();
    return this.#call('getJob', async () => {
      const job = (await this.#queue.getJob(id)) as Job | undefined;
      if (!job?.id) return undefined;
      const state = toJobState(await job.getState());
      if (!state) return undefined;
      const info: JobInfo = {
        id: job.id,
        name: job.name,
        payload: job.data as unknown,
        state,
        attemptsMade: job.attemptsMade ?? 0,
        attemptsStarted: job.attemptsStarted ?? 0,
        maxAttempts: job.opts.attempts ?? 1,
        enqueuedAt: new Date(job.timestamp),
      };
      if (job.failedReason) info.failedReason = job.failedReason;
      if (state === 'completed') info.returnValue = job.returnvalue ?? undefined;
      if (job.processedOn) info.startedAt = new Date(job.processedOn);
      if (job.finishedOn) info.finishedAt = new Date(job.finishedOn);
      return info as JobInfoOf<C>;
    });
  }

  /** How many jobs are in each state. */
  async counts(): Promise<Record<JobState, number>> {
    this.#assertOpen();
    const raw = await this.#call('counts', () =>
      this.#queue.getJobCounts('wait', 'prioritized', 'waiting-children', 'delayed', 'active', 'completed', 'failed'),
    );
    const n = (key: string) => raw[key] ?? 0;
    return {
      waiting: n('wait') + n('prioritized') + n('waiting-children'),
      delayed: n('delayed'),
      active: n('active'),
      completed: n('completed'),
      failed: n('failed'),
    };
  }

  /**
   * Waits for the calls in flight, then closes the backend connections. Idempotent; later calls
   * of the other methods throw QueueClosedError.
   */
  close(): Promise<void> {
    this.#closing ??= Promise.allSettled([...this.#inflight])
      .then(() => this.#queue.close())
      .catch((err: unknown) => this.#log.warn({ err }, 'error while closing the queue'));
    return this.#closing;
  }

  #assertOpen(): void {
    if (this.#closing) throw new QueueClosedError(this.name);
  }

  async #call<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    const call = fn();
    this.#inflight.add(call);
    try {
      return await call;
    } catch (err) {
      throw new QueueBackendError(operation, this.name, err);
    } finally {
      this.#inflight.delete(call);
    }
  }
}

/**
 * What gets stored for a payload: its JSON round trip (what the worker will read), checked for
 * text the backends cannot store and then against the schema, so that a payload the worker would
 * reject is rejected here. The schema's input is stored, not its output: the worker parses it
 * again into the output.
 */
function storablePayload(name: string, def: JobDefinition, payload: unknown): unknown {
  const json = jsonRoundTrip(payload);
  if (!json) {
    throw new InvalidJobPayloadError(name, [{ loc: ['payload'], msg: 'The payload has no JSON form', type: 'json_invalid' }]);
  }
  const unstorable = unstorableIssues(json.value, ['payload']);
  if (unstorable.length > 0) throw new InvalidJobPayloadError(name, unstorable);
  const parsed = def.schema.safeParse(json.value);
  if (!parsed.success) throw InvalidJobPayloadError.fromZod(name, parsed.error);
  return json.value;
}

/** BullMQ state → ours; undefined for a missing job. */
export function toJobState(state: string): JobState | undefined {
  switch (state) {
    case 'completed':
    case 'failed':
    case 'delayed':
    case 'active':
      return state;
    case 'waiting':
    case 'wait':
    case 'paused':
    case 'prioritized':
    case 'waiting-children':
      return 'waiting';
    default:
      return undefined;
  }
}
