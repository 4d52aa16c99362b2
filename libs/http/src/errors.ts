/**
 * The HTTP side of error handling: BerthErrors become their status with `{"detail": …}`, body
 * parser failures become 422/413/415, anything else is a logged 500 that reveals nothing.
 */
import { httpStatusOf, isBerthError, RequestValidationError } from '@berth/errors';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from '@berth/log';

interface BodyParserError extends Error {
  type?: string;
  status?: number;
  body?: string;
}

export function httpErrorBody(error: unknown): { status: number; body: { detail: unknown } } {
  if (isBerthError(error)) {
    const status = httpStatusOf(error.code);
    if (error instanceof RequestValidationError) return { status, body: { detail: error.issues } };
    return { status, body: { detail: error.message } };
  }
  const parserError = error as BodyParserError;
  switch (parserError?.type) {
    case 'entity.parse.failed':
      return { status: 422, body: { detail: [{ loc: ['body'], msg: `JSON decode error: ${parserError.message}`, type: 'json_invalid' }] } };
    case 'entity.too.large':
      return { status: 413, body: { detail: 'Request body is too large' } };
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return { status: 415, body: { detail: parserError.message } };
    case 'request.aborted':
      return { status: 400, body: { detail: 'Request aborted' } };
  }
  return { status: 500, body: { detail: 'Internal Server Error' } };
}

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (error, req, res, next) => {
    const { status, body } = httpErrorBody(error);
    if (status >= 500) logger.error({ err: error, reqId: req.id, method: req.method, url: req.originalUrl }, 'request failed');
    if (res.headersSent) {
      next(error);
      return;
    }
    res.status(status).json(body);
  };
}

export function notFoundHandler(): RequestHandler {
  return (_req, res) => {
    res.status(404).json({ detail: 'Not Found' });
  };
}
