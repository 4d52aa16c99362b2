export {
  BerthError,
  ConflictError,
  ERROR_CODES,
  DeadlineExceededError,
  InternalError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  RequestValidationError,
  ResourceExhaustedError,
  UnauthenticatedError,
  UnavailableError,
  errorFromCode,
  isBerthError,
} from './errors.js';
export type { ErrorCode, ValidationIssue } from './errors.js';
export { DependencyUnavailableError, dependencyFailureOf } from './dependency.js';
export type { Dependency } from './dependency.js';
export { GrpcStatus, codeOfGrpcStatus, grpcStatusOf, httpStatusOf } from './status.js';
