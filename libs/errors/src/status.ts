/**
 * The one place that maps Berth error codes to HTTP and gRPC status codes (and back from gRPC).
 */
import type { ErrorCode } from './errors.js';

/** gRPC status codes (https://grpc.github.io/grpc/core/md_doc_statuscodes.html). */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

const table: Record<ErrorCode, { http: number; grpc: number }> = {
  invalid_argument: { http: 400, grpc: GrpcStatus.INVALID_ARGUMENT },
  validation_failed: { http: 422, grpc: GrpcStatus.INVALID_ARGUMENT },
  unauthenticated: { http: 401, grpc: GrpcStatus.UNAUTHENTICATED },
  permission_denied: { http: 403, grpc: GrpcStatus.PERMISSION_DENIED },
  not_found: { http: 404, grpc: GrpcStatus.NOT_FOUND },
  conflict: { http: 409, grpc: GrpcStatus.ALREADY_EXISTS },
  resource_exhausted: { http: 429, grpc: GrpcStatus.RESOURCE_EXHAUSTED },
  unavailable: { http: 503, grpc: GrpcStatus.UNAVAILABLE },
  deadline_exceeded: { http: 504, grpc: GrpcStatus.DEADLINE_EXCEEDED },
  internal: { http: 500, grpc: GrpcStatus.INTERNAL },
};

export function httpStatusOf(code: ErrorCode): number {
  return table[code].http;
}

export function grpcStatusOf(code: ErrorCode): number {
  return table[code].grpc;
}

/** The error code for a gRPC status received without Berth error details (e.g. from grpc-js itself). */
export function codeOfGrpcStatus(status: number): ErrorCode {
  switch (status) {
    case GrpcStatus.INVALID_ARGUMENT:
    case GrpcStatus.OUT_OF_RANGE:
      return 'invalid_argument';
    case GrpcStatus.DEADLINE_EXCEEDED:
      return 'deadline_exceeded';
    case GrpcStatus.NOT_FOUND:
      return 'not_found';
    case GrpcStatus.ALREADY_EXISTS:
    case GrpcStatus.ABORTED:
    case GrpcStatus.FAILED_PRECONDITION:
      return 'conflict';
    case GrpcStatus.PERMISSION_DENIED:
      return 'permission_denied';
    case GrpcStatus.RESOURCE_EXHAUSTED:
      return 'resource_exhausted';
    case GrpcStatus.UNAVAILABLE:
    case GrpcStatus.CANCELLED:
      return 'unavailable';
    case GrpcStatus.UNAUTHENTICATED:
      return 'unauthenticated';
    default:
      return 'internal';
  }
}
