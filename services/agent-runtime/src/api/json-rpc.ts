/**
 * JSON-RPC 2.0 pieces shared by the servers speaking it (MCP at `/mcp`, A2A at `/a2a/{id}`): the
 * standard error codes, an error class carrying one, answers, and the parse-error handler.
 */
import type { ErrorRequestHandler, Request } from 'express';
import { httpErrorBody, UnsupportedMediaTypeError } from '@berth/http';
import type { Logger } from '@berth/log';

export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;
/** JSON-RPC's range for implementation errors: a refused or failed request (its HTTP status in `data`). */
export const SERVER_ERROR = -32000;

export type JsonRpcId = string | number;

/** A JSON-RPC error answering one request. */
export class JsonRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'JsonRpcError';
  }
}

export const errorAnswer = (id: JsonRpcId | null, code: number, message: string, data?: unknown) => ({
  jsonrpc: '2.0' as const,
  id,
  error: { code, message, ...(data === undefined ? {} : { data }) },
});

/**
 * The error answer for anything a method threw: a JsonRpcError as it is; any other error as the
 * HTTP routes would answer it (4xx say why, with the status in `data`; 5xx only the request id).
 */
export function errorAnswerFor(id: JsonRpcId | null, error: unknown, req: Request, log: Logger, method: string) {
  if (error instanceof JsonRpcError) return errorAnswer(id, error.code, error.message, error.data);
  const { status, body } = httpErrorBody(error, req.id);
  if (status >= 500) log.error({ err: error, reqId: req.id, method }, 'JSON-RPC request failed');
  const message = typeof body.detail === 'string' ? body.detail : status >= 500 ? 'Internal error' : 'Invalid request';
  return errorAnswer(id, status >= 500 ? INTERNAL_ERROR : SERVER_ERROR, message, { status, ...body });
}

/**
 * Answers a body that is not JSON with a JSON-RPC parse error (instead of the usual 422) on the
 * paths `path` matches; JSON that is not an object or array (which the body parser refuses too) is
 * an invalid request, and a body of another content type that may not be read as JSON (415) too.
 */
export function jsonRpcParseErrors(path: RegExp): ErrorRequestHandler {
  return (error: { type?: string; body?: unknown }, req, res, next) => {
    if (res.headersSent || !path.test(req.path)) {
      next(error);
      return;
    }
    if (error instanceof UnsupportedMediaTypeError) {
      res.status(415).json(errorAnswer(null, INVALID_REQUEST, error.message));
      return;
    }
    if (error?.type !== 'entity.parse.failed') {
      next(error);
      return;
    }
    if (isJson(error.body)) {
      res.status(400).json(errorAnswer(null, INVALID_REQUEST, 'Invalid Request: the body must be a JSON-RPC request object'));
      return;
    }
    res.status(400).json(errorAnswer(null, PARSE_ERROR, 'Parse error: the body is not valid JSON'));
  };
}

function isJson(text: unknown): boolean {
  if (typeof text !== 'string') return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
