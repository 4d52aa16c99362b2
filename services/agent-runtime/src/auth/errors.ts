/**
 * Errors of custom authentication (`auth.path` in langgraph.json). All are BerthErrors, so the
 * shared HTTP error handler answers them even where `authErrorHandler` is not installed.
 */
import { BerthError, type ErrorCode } from '@berth/errors';

/**
 * The module of `auth.path` could not be used: it failed to import, the export is missing, it is
 * not an `Auth` from `@langchain/langgraph-sdk/auth`, or it has no `authenticate` handler.
 * Raised at startup; `cause` holds the import error, if any.
 */
export class AuthLoadError extends BerthError {
  /** `auth.path` as written in langgraph.json. */
  readonly spec: string;

  constructor(spec: string, problem: string, options?: { cause?: unknown }) {
    super('invalid_argument', `auth.path "${spec}": ${problem}`, options);
    this.spec = spec;
  }
}

/**
 * A custom auth handler threw something other than an `HTTPException`, or returned something
 * unusable (no identity, a filter of the wrong shape). Answered with 500; `cause` holds what the
 * handler threw, for the log.
 */
export class AuthHandlerError extends BerthError {
  /** `authenticate`, or the key of the authorization handler (e.g. `threads:create`). */
  readonly handler: string;

  constructor(handler: string, problem: string, options?: { cause?: unknown }) {
    super('internal', `Custom auth handler "${handler}" ${problem}`, options);
    this.handler = handler;
  }
}

const CODE_OF_STATUS: Record<number, ErrorCode> = {
  400: 'invalid_argument',
  401: 'unauthenticated',
  403: 'permission_denied',
  404: 'not_found',
  409: 'conflict',
  422: 'invalid_argument',
  429: 'resource_exhausted',
  503: 'unavailable',
  504: 'deadline_exceeded',
};

/**
 * An `HTTPException` thrown by a custom auth handler, to be answered with exactly its `status`,
 * its `headers` and `{"detail": message}` (see `authErrorHandler`). `cause` is the original.
 */
export class AuthHttpError extends BerthError {
  readonly status: number;
  readonly headers: Record<string, string>;

  constructor(status: number, message: string, headers: Record<string, string>, options?: { cause?: unknown }) {
    super(CODE_OF_STATUS[status] ?? (status < 500 ? 'invalid_argument' : 'internal'), message, options);
    this.status = status;
    this.headers = headers;
  }
}
