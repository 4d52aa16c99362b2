/**
 * Typed error answers `{"detail": {"error": <type>, "message": …}}`: the form the
 * `langsmith/sandbox` client reads the kind of a data-plane failure from (FileNotFound, NotReady,
 * CommandTimeout, WriteError, …) and that sandbox creation uses for timeouts and failed starts.
 * The status and message come from the one mapping of errors to statuses (httpErrorBody); this
 * only adds the type. Validation failures keep their list form, which the client reads as well.
 */
import { RequestValidationError } from '@berth/errors';
import { httpErrorBody } from '@berth/http';
import type { Response } from 'express';

export type DataPlaneOperation = 'command' | 'write' | 'read';

const operationError: Record<DataPlaneOperation, string> = { command: 'CommandError', write: 'WriteError', read: 'ReadError' };

/** Answers `status` with a typed error body (and ends the response). */
export function answerTyped(
  res: Response,
  status: number,
  error: string,
  message: string,
  extra: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): void {
  res
    .set(headers)
    .status(status)
    .json({ detail: { error, message, ...extra } });
}

/**
 * Answers a failed data-plane call with a typed error; returns false for errors the common
 * handler must answer (validation lists, and 500s, which it logs).
 */
export function answerDataPlaneError(res: Response, thrown: unknown, operation: DataPlaneOperation): boolean {
  if (thrown instanceof RequestValidationError) return false;
  const { status, body, headers } = httpErrorBody(thrown);
  if (status >= 500 && status !== 503 && status !== 504) return false;
  const message = typeof body.detail === 'string' ? body.detail : 'The request failed';
  switch (status) {
    case 404:
      answerTyped(res, 404, operation === 'read' ? 'FileNotFound' : 'NotFound', message);
      break;
    case 409:
      // The manager's FAILED_PRECONDITION: the sandbox cannot take calls (failed, being deleted).
      answerTyped(res, 400, 'NotReady', message);
      break;
    case 400:
      answerTyped(res, 400, operationError[operation], message);
      break;
    case 403:
      answerTyped(res, 403, 'PermissionDenied', message);
      break;
    case 429:
      answerTyped(res, 429, 'QuotaExceeded', message);
      break;
    case 504:
      // Ours or the manager's deadline: the operation, not the platform, ran out of time.
      answerTyped(res, 408, operation === 'command' ? 'CommandTimeout' : 'Timeout', 'The sandbox did not finish the operation in time');
      break;
    default:
      answerTyped(res, status, status === 503 ? 'Unavailable' : operationError[operation], message, {}, headers);
  }
  return true;
}
