/**
 * The one place where errors cross gRPC. On the server, a thrown error becomes a gRPC status:
 * a BerthError keeps its code, message and validation issues (status from `grpcStatusOf`, the
 * rest in the `berth-error-bin` trailer as a `berth.common.v1.ErrorDetail`); anything else is
 * logged and answered as a generic INTERNAL error. On the client, a failed call becomes the same
 * BerthError subclass again, or — without a detail — the error `codeOfGrpcStatus` names, with the
 * grpc-js error as `cause`. A bare UNAUTHENTICATED (the internal token was refused) becomes
 * `RpcCredentialsRefusedError`, an `unavailable` error.
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import {
  ERROR_CODES,
  codeOfGrpcStatus,
  dependencyFailureOf,
  errorFromCode,
  grpcStatusOf,
  isBerthError,
  type BerthError,
  type ErrorCode,
  type ValidationIssue,
} from '@berth/errors';
import type { Logger } from '@berth/log';
import { ErrorDetailSchema, type LocPart } from '@berth/proto';
import grpc from '@grpc/grpc-js';
import { RpcCredentialsRefusedError } from './errors.js';

/** The binary trailer that carries a Berth error detail. */
export const ERROR_DETAIL_TRAILER = 'berth-error-bin';

/** The message a client sees for an error the server does not expose. */
export const INTERNAL_ERROR_MESSAGE = 'internal server error';

const KNOWN_CODES: ReadonlySet<string> = new Set<string>(ERROR_CODES);

function issuesOf(error: BerthError): ValidationIssue[] {
  const issues = (error as { issues?: unknown }).issues;
  return Array.isArray(issues) ? (issues as ValidationIssue[]) : [];
}

function locPart(part: string | number): LocPart['part'] {
  return typeof part === 'number' && Number.isInteger(part) ? { case: 'index', value: part } : { case: 'key', value: String(part) };
}

function encodeDetail(code: ErrorCode, message: string, issues: ValidationIssue[]): Buffer {
  const detail = create(ErrorDetailSchema, {
    code,
    message,
    issues: issues.map((issue) => ({
      loc: issue.loc.map((part) => ({ part: locPart(part) })),
      msg: issue.msg,
      type: issue.type,
      ctxJson: issue.ctx ? JSON.stringify(issue.ctx) : '',
    })),
  });
  return Buffer.from(toBinary(ErrorDetailSchema, detail));
}

/** Where a status is being produced, for the server log. */
export interface ErrorSite {
  method: string;
  logger: Logger;
  /** True when the call had already ended (cancelled): the error is expected, not a failure. */
  cancelled: boolean;
}

/** Server side: the gRPC status (with `berth-error-bin` trailer) that answers a thrown error. */
export function statusOfError(thrown: unknown, site: ErrorSite): Partial<grpc.StatusObject> {
  // A dependency that is down (Postgres, Redis, …) is UNAVAILABLE with a plain message, not INTERNAL.
  const outage = dependencyFailureOf(thrown);
  if (outage && outage !== thrown) site.logger.warn({ err: thrown, method: site.method }, 'rpc handler: dependency unavailable');
  const error = outage ?? thrown;
  let code: ErrorCode;
  let message: string;
  let issues: ValidationIssue[] = [];
  if (isBerthError(error)) {
    ({ code, message } = error);
    issues = issuesOf(error);
    if (code === 'internal' && !site.cancelled) site.logger.error({ err: error, method: site.method }, 'rpc handler failed');
    else site.logger.debug({ err: error, method: site.method }, 'rpc handler returned an error');
  } else {
    code = 'internal';
    message = INTERNAL_ERROR_MESSAGE;
    if (site.cancelled) site.logger.debug({ err: error, method: site.method }, 'rpc handler failed after cancel');
    else site.logger.error({ err: error, method: site.method }, 'rpc handler failed');
  }
  const metadata = new grpc.Metadata();
  metadata.set(ERROR_DETAIL_TRAILER, encodeDetail(code, message, issues));
  return { code: grpcStatusOf(code), details: message, metadata };
}

function isServiceError(error: unknown): error is grpc.ServiceError {
  return error instanceof Error && typeof (error as Partial<grpc.ServiceError>).code === 'number';
}

function decodeDetail(error: grpc.ServiceError): BerthError | undefined {
  const value = error.metadata?.get(ERROR_DETAIL_TRAILER)[0];
  if (value === undefined || typeof value === 'string') return undefined;
  try {
    const detail = fromBinary(ErrorDetailSchema, value);
    if (!KNOWN_CODES.has(detail.code)) return undefined;
    const issues: ValidationIssue[] = detail.issues.map((issue) => ({
      loc: issue.loc.flatMap((loc) => (loc.part.case === undefined ? [] : [loc.part.value])),
      msg: issue.msg,
      type: issue.type,
      ...(issue.ctxJson ? { ctx: JSON.parse(issue.ctxJson) as Record<string, string | number> } : {}),
    }));
    const code = detail.code as ErrorCode;
    return errorFromCode(code, detail.message, code === 'validation_failed' ? issues : undefined, { cause: error });
  } catch {
    return undefined;
  }
}

/**
 * Client side: the BerthError for a failed call. `method` is the call's path, used in the
 * message of errors that carry no Berth detail (e.g. `UNAVAILABLE` when the server is down).
 */
export function errorOfStatus(error: unknown, method: string): BerthError {
  if (isBerthError(error)) return error;
  if (!isServiceError(error)) {
    return errorFromCode('internal', `rpc ${method} failed: ${String(error)}`, undefined, { cause: error });
  }
  const decoded = decodeDetail(error);
  if (decoded) return decoded;
  // A handler's UnauthenticatedError carries a detail; a bare UNAUTHENTICATED is the server (or a
  // proxy in front of it) refusing the internal token this client sent or did not send.
  if (error.code === grpc.status.UNAUTHENTICATED) return new RpcCredentialsRefusedError(method, { cause: error });
  const status = grpc.status[error.code] ?? String(error.code);
  return errorFromCode(codeOfGrpcStatus(error.code), `rpc ${method} failed: ${status}: ${error.details}`, undefined, {
    cause: error,
  });
}
