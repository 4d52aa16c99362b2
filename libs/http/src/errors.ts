/**
 * The HTTP side of error handling, the one place errors become statuses: BerthErrors become their
 * status with `{"detail": …}`, body parser failures 4xx, a dependency that is down 503 with
 * Retry-After and a plain message, anything else a logged 500 that reveals nothing but the
 * request id. No 5xx body carries an error's own text (hosts, SQL, driver messages).
 */
import { dependencyFailureOf, httpStatusOf, isBerthError, RequestValidationError } from '@berth/errors';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from '@berth/log';

/** What a client is told to wait before retrying a 503/504. */
export const RETRY_AFTER_SECONDS = 5;

export interface HttpErrorAnswer {
  status: number;
  body: { detail: unknown; request_id?: string };
  headers: Record<string, string>;
}

/** The shape of body-parser (http-errors) failures. */
interface BodyParserError extends Error {
  type?: string;
  status?: number;
  expose?: boolean;
}

/**
 * A body of another or no content type on a JSON route, from a request without a credential
 * header: a cross-site page can send such a request without a preflight, so it is refused (415)
 * rather than read as JSON or silently ignored.
 */
export class UnsupportedMediaTypeError extends Error {
  constructor(
    readonly expected: string,
    readonly sent: string | undefined,
  ) {
    super(
      `Send the body as ${expected} (Content-Type: ${expected}), not ${sent ? sent : 'without a content type'}` +
        ` (a body of another type is read as ${expected} only from requests that carry a credential header)`,
    );
    this.name = 'UnsupportedMediaTypeError';
  }
}

const answer = (status: number, detail: unknown, headers: Record<string, string> = {}): HttpErrorAnswer => ({ status, body: { detail }, headers });
const retryLater = (status: number, detail: string) => answer(status, detail, { 'Retry-After': String(RETRY_AFTER_SECONDS) });

function bodyParserAnswer(error: BodyParserError): HttpErrorAnswer | undefined {
  switch (error.type) {
    case 'entity.parse.failed':
      return answer(422, [{ loc: ['body'], msg: `JSON decode error: ${error.message}`, type: 'json_invalid' }]);
    case 'entity.too.large':
      return answer(413, 'Request body is too large');
    case 'parameters.too.many':
      return answer(413, 'Request body has too many parameters');
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return answer(415, error.message);
    case 'request.aborted':
      return answer(400, 'Request aborted');
    case 'request.size.invalid':
      return answer(400, 'Request body size does not match its Content-Length');
  }
  // A body whose content-encoding does not decode: body-parser passes zlib's error on as a 400.
  if (error.type === undefined && error.expose === true && error.status === 400) {
    return answer(400, 'Request body could not be decoded: corrupt or truncated data for its Content-Encoding');
  }
  return undefined;
}

/** The status, body and headers answering `error`; `requestId` goes into a 500's body. */
export function httpErrorBody(error: unknown, requestId?: string): HttpErrorAnswer {
  if (error instanceof UnsupportedMediaTypeError) return answer(415, error.message);
  if (isBerthError(error)) {
    const status = httpStatusOf(error.code);
    if (error instanceof RequestValidationError) return answer(status, error.issues);
    if (status < 500) return answer(status, error.message);
  } else if (typeof error === 'object' && error !== null) {
    const parsed = bodyParserAnswer(error as BodyParserError);
    if (parsed) return parsed;
  }
  const outage = dependencyFailureOf(error);
  if (outage) return retryLater(503, outage.message);
  if (isBerthError(error)) {
    // Our own UnavailableErrors (no driver behind them) say something useful, e.g. what is not configured.
    if (error.code === 'unavailable') return retryLater(503, error.message);
    if (error.code === 'deadline_exceeded') return retryLater(504, 'A service this request needs did not answer in time, retry shortly');
  }
  return { status: 500, body: { detail: 'Internal Server Error', ...(requestId ? { request_id: requestId } : {}) }, headers: {} };
}

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (error, req, res, next) => {
    const { status, body, headers } = httpErrorBody(error, req.id);
    if (status === 503 || status === 504) logger.warn({ err: error, reqId: req.id, method: req.method, url: req.originalUrl }, 'dependency unavailable');
    else if (status >= 500) logger.error({ err: error, reqId: req.id, method: req.method, url: req.originalUrl }, 'request failed');
    if (res.headersSent) {
      next(error);
      return;
    }
    res.set(headers).status(status).json(body);
  };
}

export function notFoundHandler(): RequestHandler {
  return (_req, res) => {
    res.status(404).json({ detail: 'Not Found' });
  };
}
