/**
 * The errors of `@berth/queue`. Each extends a `@berth/errors` class, so the HTTP and gRPC
 * mappings already know them.
 */
import { ConflictError, DeadlineExceededError, InvalidArgumentError, RequestValidationError, UnavailableError, type ValidationIssue } from '@berth/errors';
import type { z } from 'zod';

/**
 * A payload that does not match its job's schema, has no JSON form, or holds text no backend
 * can store (U+0000, unpaired surrogates): thrown by `JobQueue.enqueue` (nothing is enqueued),
 * and reported by a worker that receives such a payload (the job then fails without retries).
 * `issues` locate the problems under `payload`; `cause` is the `ZodError` when there is one.
 */
export class InvalidJobPayloadError extends RequestValidationError {
  readonly jobName: string;

  constructor(jobName: string, issues: ValidationIssue[], options?: { cause?: unknown }) {
    super(issues, options);
    this.jobName = jobName;
    this.message = `invalid payload for job '${jobName}': ${this.message}`;
  }

  /** The error for a failed zod parse of a payload. */
  static fromZod(jobName: string, error: z.ZodError): InvalidJobPayloadError {
    return new InvalidJobPayloadError(jobName, issuesOf(error), { cause: error });
  }
}

/**
 * A handler resolved with a value that has no JSON form or holds text no backend can store; the
 * job fails without retries (its work is done, running it again would give the same value).
 */
export class InvalidJobResultError extends InvalidArgumentError {
  readonly jobName: string;
  readonly issues: ValidationIssue[];

  constructor(jobName: string, issues: ValidationIssue[]) {
    super(`job '${jobName}' returned a result that cannot be stored: ${issues.map((i) => `${i.loc.join('.')}: ${i.msg}`).join('; ')}`);
    this.jobName = jobName;
    this.issues = issues;
  }
}

/** A job name the catalog does not declare (a producer bypassing the types, or an older worker). */
export class UnknownJobError extends InvalidArgumentError {
  readonly jobName: string;

  constructor(jobName: string, queueName: string) {
    super(`job '${jobName}' is not in the catalog of queue '${queueName}'`);
    this.jobName = jobName;
  }
}

/** One attempt ran longer than its job's `timeoutMs`; the attempt fails and is retried if attempts remain. */
export class JobTimeoutError extends DeadlineExceededError {
  readonly jobId: string;
  readonly jobName: string;
  readonly timeoutMs: number;

  constructor(jobName: string, jobId: string, timeoutMs: number) {
    super(`job '${jobName}' (${jobId}) timed out after ${timeoutMs} ms`);
    this.jobId = jobId;
    this.jobName = jobName;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * The worker lost the lock of a job it was running (the lock expired and the job was recovered
 * by another worker, or the job was removed): the handler's signal aborts with it, since the job
 * now runs, or has run, elsewhere.
 */
export class JobLockLostError extends ConflictError {
  readonly jobId: string;
  readonly jobName: string;

  constructor(jobName: string, jobId: string) {
    super(`job '${jobName}' (${jobId}) lost its lock to another worker`);
    this.jobId = jobId;
    this.jobName = jobName;
  }
}

/** The queue or worker was closed; `cause` is the backend error when there is one. */
export class QueueClosedError extends UnavailableError {
  constructor(queueName: string, options?: { cause?: unknown }) {
    super(`queue '${queueName}' is closed`, options);
  }
}

/**
 * The queue backend failed an operation (connection refused, SQL or Redis error, …); `cause` is
 * the original error.
 */
export class QueueBackendError extends UnavailableError {
  constructor(operation: string, queueName: string, cause: unknown) {
    super(`queue '${queueName}': ${operation} failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

function issuesOf(error: z.ZodError): ValidationIssue[] {
  return error.issues.map((issue) => ({
    loc: ['payload', ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))],
    msg: issue.message,
    type: issue.code,
  }));
}
