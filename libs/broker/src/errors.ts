/**
 * The errors of `@berth/broker`. Each extends a `@berth/errors` class, so the HTTP and gRPC
 * mappings already know them.
 */
import { ConflictError, InvalidArgumentError, UnavailableError } from '@berth/errors';

/** `data` given to `publish` has no JSON form (undefined, a function, a BigInt, a cycle…); `cause` is the serializer's error when there is one. */
export class InvalidEventDataError extends InvalidArgumentError {
  readonly runId: string;
  readonly event: string;

  constructor(runId: string, event: string, reason: string, options?: { cause?: unknown }) {
    super(`event '${event}' of run '${runId}' has no JSON form: ${reason}`, options);
    this.runId = runId;
    this.event = event;
  }
}

/** An event whose JSON is larger than the broker's `maxEventBytes`. */
export class EventTooLargeError extends InvalidArgumentError {
  readonly runId: string;
  readonly bytes: number;
  readonly maxBytes: number;

  constructor(runId: string, event: string, bytes: number, maxBytes: number) {
    super(`event '${event}' of run '${runId}' is ${bytes} bytes, more than the limit of ${maxBytes}`);
    this.runId = runId;
    this.bytes = bytes;
    this.maxBytes = maxBytes;
  }
}

/** `publish` to a run whose stream was ended: nothing is appended. */
export class RunEndedError extends ConflictError {
  readonly runId: string;

  constructor(runId: string) {
    super(`the event stream of run '${runId}' has ended`);
    this.runId = runId;
  }
}

/** The broker instance was closed. */
export class BrokerClosedError extends UnavailableError {
  constructor() {
    super('the event broker is closed');
  }
}

/**
 * The broker's backend failed an operation (connection refused, SQL or Redis error, …); `cause`
 * is the original error.
 */
export class BrokerBackendError extends UnavailableError {
  readonly operation: string;

  constructor(backend: 'postgres' | 'redis', operation: string, runId: string | undefined, cause: unknown) {
    const what = runId === undefined ? operation : `${operation} (run '${runId}')`;
    super(`${backend} event broker: ${what} failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.operation = operation;
  }
}
