/**
 * CORS as `langgraph.json`'s `http.cors` asks, allowing every origin when it says nothing (as the
 * LangGraph dev server does), and exposing the headers the SDK reads.
 */
import type { RequestHandler } from 'express';

export interface CorsOptions {
  allow_origins?: string[];
  allow_methods?: string[];
  allow_headers?: string[];
  allow_credentials?: boolean;
  expose_headers?: string[];
  max_age?: number;
}

export function cors(options: CorsOptions = {}): RequestHandler {
  const origins = options.allow_origins ?? ['*'];
  const expose = [...new Set(['content-location', 'location', 'x-pagination-total', 'x-pagination-next', ...(options.expose_headers ?? [])])];
  return (req, res, next) => {
    const origin = req.headers.origin;
    if (origin && (origins.includes('*') || origins.includes(origin))) {
      res.setHeader('Access-Control-Allow-Origin', origins.includes('*') && !options.allow_credentials ? '*' : origin);
      res.setHeader('Vary', 'Origin');
      res.setHeader('Access-Control-Expose-Headers', expose.join(', '));
      if (options.allow_credentials) res.setHeader('Access-Control-Allow-Credentials', 'true');
    }
    if (req.method === 'OPTIONS' && req.headers['access-control-request-method']) {
      res.setHeader('Access-Control-Allow-Methods', (options.allow_methods ?? ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']).join(', '));
      res.setHeader('Access-Control-Allow-Headers', options.allow_headers?.join(', ') ?? String(req.headers['access-control-request-headers'] ?? '*'));
      if (options.max_age !== undefined) res.setHeader('Access-Control-Max-Age', String(options.max_age));
      res.status(204).end();
      return;
    }
    next();
  };
}
