/**
 * Job catalogs: the one place a queue's job names, payload schemas and retry/timeout policy
 * are declared. Producers (`JobQueue`) and consumers (`JobWorker`) are typed from a catalog,
 * so a job name or payload that does not exist fails to compile, and a payload that does not
 * match its schema fails at runtime on both sides.
 */
import { InvalidArgumentError } from '@berth/errors';
import type { z } from 'zod';

/** How long to wait before retrying a failed attempt. */
export interface JobBackoff {
  /**
   * `fixed`: every retry waits `delayMs`. `exponential`: retry n waits `delayMs * 2^(n-1)`
   * (so `delayMs`, `2 × delayMs`, `4 × delayMs`, …).
   */
  type: 'exponential' | 'fixed';
  /** Base delay in milliseconds (0 or more). */
  delayMs: number;
}

/**
 * How many finished jobs to keep: `true` removes a job as soon as it finishes, `false` keeps
 * every job, a number keeps that many of the most recent, `{ age, count }` keeps jobs finished
 * within the last `age` seconds (and at most `count` of them).
 */
export type JobRetention = boolean | number | { age: number; count?: number };

/** One entry of a catalog: the payload schema of a job name and how its attempts run. */
export interface JobDefinition<S extends z.ZodType = z.ZodType> {
  /**
   * Schema of the payload. Checked when the job is enqueued (against the value given to
   * `enqueue`, which is what gets stored) and again by the worker, which hands the handler the
   * schema's output. Payloads must survive a JSON round trip.
   */
  schema: S;
  /**
   * Total number of attempts, the first included (1 = never retried). Timeouts and thrown
   * errors consume attempts; a worker crash (stalled job) does not.
   * @default 1
   */
  attempts?: number;
  /**
   * Wait before each retry.
   * @default undefined (retry immediately)
   */
  backoff?: JobBackoff;
  /**
   * Maximum duration of one attempt in milliseconds. When it elapses the handler's `signal` is
   * aborted and the attempt fails with `JobTimeoutError` (and is retried if attempts remain).
   * @default undefined (no limit)
   */
  timeoutMs?: number;
  /**
   * Retention of completed jobs.
   * @default false (keep every completed job)
   */
  removeOnComplete?: JobRetention;
  /**
   * Retention of jobs that failed for good.
   * @default false (keep every failed job)
   */
  removeOnFail?: JobRetention;
}

/** The definitions a catalog is made of, by job name. */
export type JobDefinitions = Record<string, JobDefinition>;

/** A validated, frozen set of job definitions; create one with {@link defineJobCatalog}. */
export interface JobCatalog<D extends JobDefinitions = JobDefinitions> {
  readonly definitions: Readonly<D>;
  /** The job names, in declaration order. */
  readonly names: readonly (keyof D & string)[];
}

/** Any catalog: the constraint of the generic classes of this package. */
export type AnyJobCatalog = JobCatalog<JobDefinitions>;

/** The job names of a catalog. */
export type JobName<C extends AnyJobCatalog> = keyof C['definitions'] & string;

/** What a producer passes to `enqueue` for job `N` (the schema's input type). */
export type JobInput<C extends AnyJobCatalog, N extends JobName<C>> = z.input<C['definitions'][N]['schema']>;

/** What a handler receives for job `N` (the schema's output type). */
export type JobPayload<C extends AnyJobCatalog, N extends JobName<C>> = z.output<C['definitions'][N]['schema']>;

const JOB_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/**
 * Declares a job catalog: job name → payload schema, retry and timeout policy.
 *
 * @example
 * ```ts
 * export const deployJobs = defineJobCatalog({
 *   'build-revision': { schema: z.object({ revisionId: z.string() }), attempts: 3, backoff: { type: 'exponential', delayMs: 1000 } },
 *   'delete-deployment': { schema: z.object({ deploymentId: z.string() }), timeoutMs: 60_000 },
 * });
 * ```
 * @throws InvalidArgumentError when a name or an option is out of range.
 */
export function defineJobCatalog<const D extends JobDefinitions>(definitions: D): JobCatalog<D> {
  const names = Object.keys(definitions) as (keyof D & string)[];
  if (names.length === 0) throw new InvalidArgumentError('a job catalog needs at least one job');
  for (const name of names) {
    const def = definitions[name] as JobDefinition;
    const where = `job '${name}'`;
    if (!JOB_NAME.test(name)) {
      throw new InvalidArgumentError(`${where}: a job name is letters, digits, '.', '_' and '-', starting with a letter or digit`);
    }
    if (typeof def?.schema?.safeParse !== 'function') throw new InvalidArgumentError(`${where}: schema must be a zod schema`);
    if (def.attempts !== undefined && !(Number.isInteger(def.attempts) && def.attempts >= 1)) {
      throw new InvalidArgumentError(`${where}: attempts must be an integer of at least 1`);
    }
    if (def.backoff !== undefined) {
      if (def.backoff.type !== 'fixed' && def.backoff.type !== 'exponential') {
        throw new InvalidArgumentError(`${where}: backoff.type must be 'fixed' or 'exponential'`);
      }
      if (!(Number.isFinite(def.backoff.delayMs) && def.backoff.delayMs >= 0)) {
        throw new InvalidArgumentError(`${where}: backoff.delayMs must be a number of at least 0`);
      }
    }
    if (def.timeoutMs !== undefined && !(Number.isFinite(def.timeoutMs) && def.timeoutMs > 0)) {
      throw new InvalidArgumentError(`${where}: timeoutMs must be a positive number`);
    }
  }
  return Object.freeze({ definitions: Object.freeze({ ...definitions }), names: Object.freeze(names) });
}

/** The definition of `name`, or undefined for a name the catalog does not have. */
export function definitionOf(catalog: AnyJobCatalog, name: string): JobDefinition | undefined {
  return Object.hasOwn(catalog.definitions, name) ? catalog.definitions[name] : undefined;
}
