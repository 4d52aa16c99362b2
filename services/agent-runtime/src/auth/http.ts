/**
 * The HTTP answer to an `HTTPException` thrown by a custom auth handler: exactly its status and
 * headers, with `{"detail": message}` (the shared error handler only knows Berth's statuses).
 */
import type { ErrorRequestHandler } from 'express';
import { AuthHttpError } from './errors.js';

/** Express error middleware answering AuthHttpErrors; anything else goes on to the next error handler. */
export function authErrorHandler(): ErrorRequestHandler {
  return (error, _req, res, next) => {
    if (!(error instanceof AuthHttpError) || res.headersSent) {
      next(error);
      return;
    }
    for (const [name, value] of Object.entries(error.headers)) {
      if (name !== 'content-length' && name !== 'content-type') res.setHeader(name, value);
    }
    res.status(error.status).json({ detail: error.message });
  };
}
