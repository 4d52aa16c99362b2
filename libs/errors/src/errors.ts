/**
 * Domain errors shared by every Berth package. Each names a failure kind (`code`) that
 * `status.ts` maps to one HTTP status and one gRPC status, so handlers throw these and never
 * pick status codes themselves.
 */

/** The failure kinds Berth distinguishes. */
export const ERROR_CODES = [
  'invalid_argument',
  'validation_failed',
  'unauthenticated',
  'permission_denied',
  'not_found',
  'conflict',
  'resource_exhausted',
  'unavailable',
  'deadline_exceeded',
  'internal',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** One entry of an HTTP 422 body: where the bad value is, what is wrong, a machine-readable kind. */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
  /** Details a client can act on, e.g. the character `position` of a filter error. */
  ctx?: Record<string, string | number>;
}

const MARK = Symbol.for('berth.error');

export class BerthError extends Error {
  readonly code: ErrorCode;
  readonly [MARK] = true;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** True for any BerthError, even one created by another copy of this module. */
export function isBerthError(value: unknown): value is BerthError {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[MARK] === true;
}

export class InvalidArgumentError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('invalid_argument', message, options);
  }
}

/** A request whose body, query or path failed its schema; carries every issue found. */
export class RequestValidationError extends BerthError {
  readonly issues: ValidationIssue[];

  constructor(issues: ValidationIssue[], options?: { cause?: unknown }) {
    super('validation_failed', issues.map((i) => `${i.loc.join('.')}: ${i.msg}`).join('; '), options);
    this.issues = issues;
  }
}

export class UnauthenticatedError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('unauthenticated', message, options);
  }
}

export class PermissionDeniedError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('permission_denied', message, options);
  }
}

export class NotFoundError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('not_found', message, options);
  }
}

export class ConflictError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('conflict', message, options);
  }
}

export class ResourceExhaustedError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('resource_exhausted', message, options);
  }
}

export class UnavailableError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('unavailable', message, options);
  }
}

export class DeadlineExceededError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('deadline_exceeded', message, options);
  }
}

export class InternalError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('internal', message, options);
  }
}

/** Builds the BerthError subclass for a code, e.g. when decoding an error that crossed gRPC. */
export function errorFromCode(code: ErrorCode, message: string, issues?: ValidationIssue[], options?: { cause?: unknown }): BerthError {
  switch (code) {
    case 'invalid_argument':
      return new InvalidArgumentError(message, options);
    case 'validation_failed':
      return new RequestValidationError(issues ?? [{ loc: [], msg: message, type: 'value_error' }], options);
    case 'unauthenticated':
      return new UnauthenticatedError(message, options);
    case 'permission_denied':
      return new PermissionDeniedError(message, options);
    case 'not_found':
      return new NotFoundError(message, options);
    case 'conflict':
      return new ConflictError(message, options);
    case 'resource_exhausted':
      return new ResourceExhaustedError(message, options);
    case 'unavailable':
      return new UnavailableError(message, options);
    case 'deadline_exceeded':
      return new DeadlineExceededError(message, options);
    case 'internal':
      return new InternalError(message, options);
  }
}
