/**
 * The express app every Berth HTTP server starts from: request ids, JSON logs, a JSON body parser
 * whose failures are 422s, the registered Api routers, then JSON 404/405 and the error handler.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Server as NetServer, type AddressInfo } from 'node:net';
import express, { type Express, type RequestHandler } from 'express';
import type { Logger } from '@berth/log';
import { observeHttpRequest, secondsSince } from '@berth/metrics';
import { traceFields, withSpan, type Span } from '@berth/tracing';
import { errorHandler, notFoundHandler } from './errors.js';
import { JSON_BODY_LIMIT, JSON_TYPES } from './json-body.js';
import { endRequestSpan, startRequestSpan } from './tracing.js';

export interface AppOptions {
  logger: Logger;
  /** Routers and middleware mounted after the common middleware, in order. */
  routes: (RequestHandler | express.Router)[];
  /** Paths not written to the request log (health probes). */
  quietPaths?: string[];
  /** How a request URL appears in the request log, e.g. with secrets carried in paths hidden. */
  logUrl?: (url: string) => string;
}

const requestIdPattern = /^[A-Za-z0-9._:-]{1,128}$/;

export function createApp(options: AppOptions): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  const quiet = new Set(options.quietPaths ?? ['/healthz', '/readyz', '/ok']);
  app.set('etag', false); // API answers change with every call; hashing each body costs CPU for nothing
  app.use(requestLog(options.logger, quiet, options.logUrl));
  // Bodies of other types are left to the routes: Api routes read them as JSON or answer 415 (json-body.ts).
  app.use(express.json({ limit: JSON_BODY_LIMIT, type: JSON_TYPES }));
  for (const route of options.routes) app.use(route);
  app.use(notFoundHandler());
  app.use(errorHandler(options.logger));
  return app;
}

declare module 'http' {
  interface IncomingMessage {
    /** The request id: the caller's X-Request-Id when sane, otherwise a new UUID. */
    id?: string;
    /** The template of the Api route that served it, as declared (`/v2/deployments/{deployment_id}`), for the request log. */
    routeTemplate?: string;
  }
}

/**
 * Request ids, one JSON log line per finished request (level by status), with the URL and the
 * template of the route that served it (`req.route`: grep the code for it), and the request's
 * metrics (by that template, never the URL). Hand-rolled rather
 * than pino-http, which builds a child logger and serializes the request for every call.
 */
function requestLog(logger: Logger, quiet: Set<string>, logUrl?: (url: string) => string): RequestHandler {
  return (req, res, next) => {
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && requestIdPattern.test(given) ? given : randomUUID();
    req.id = id;
    res.setHeader('X-Request-Id', id);
    const url = req.url;
    const started = performance.now();
    const logged = !quiet.has(url.split('?')[0] ?? '');
    // Probes (quiet paths) are neither logged nor traced, but counted.
    const span: Span | undefined = logged ? startRequestSpan(req, id) : undefined;
    // 'close' also comes when the client went away before the answer was complete.
    res.once('close', () => {
      if (span) endRequestSpan(span, req, res);
      const status = res.statusCode;
      const seconds = secondsSince(started);
      observeHttpRequest({ method: req.method, route: req.routeTemplate, status, seconds });
      if (logged) {
        const level = status >= 500 ? 'error' : status >= 400 || !res.writableFinished ? 'warn' : 'info';
        logger[level](
          {
            req: { id, method: req.method, url: logUrl ? logUrl(url) : url, ...(req.routeTemplate ? { route: req.routeTemplate } : {}) },
            res: { statusCode: status },
            responseTime: Math.round(seconds * 1000),
            ...traceFields(span),
          },
          res.writableFinished ? 'request completed' : 'request aborted',
        );
      }
    });
    if (span) withSpan(span, next);
    else next();
  };
}

export interface RunningServer {
  server: Server;
  port: number;
  /** `http://host:port` */
  url: string;
  /**
   * Stops taking connections (a newer server answers instead) without failing a request: a
   * response under way, and any answer to a request that comes later on a kept-alive connection,
   * says `Connection: close` and closes its connection after it. An idle connection is not closed
   * under its client, which may be sending on it that moment: it ends at the keep-alive timeout
   * the server announces, which clients heed.
   */
  drain(): void;
  /**
   * Stops. After a drain: once every connection ended (at most the keep-alive timeout and a second
   * later). Otherwise idle connections are closed at once. Long-lived streams still open then are
   * ended either way.
   */
  close(): Promise<void>;
}

/** How long connections may take to end after the keep-alive timeout, on a stop after a drain. */
const DRAIN_GRACE_MS = 1000;
/** How long long-lived streams may take to end on a stop without a drain. */
const CLOSE_GRACE_MS = 2000;

/**
 * Listens on host:port (0 = any free port) and resolves once bound. With `fd`, serves the listening
 * socket of that inherited file descriptor instead (bound by the parent, which may be outside this
 * process's network namespace); `host` then only names it in `url`.
 */
export function listen(app: Express, host: string, port: number, fd?: number): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const server = fd === undefined ? app.listen(port, host) : app.listen({ fd });
    server.once('error', reject);
    server.once('listening', () => {
      const address = server.address() as AddressInfo;
      let draining = false;
      /** Responses under way: a drain makes those whose headers are not out yet close their connection. */
      const underWay = new Set<ServerResponse>();
      server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
        if (draining) {
          res.setHeader('connection', 'close');
          return;
        }
        underWay.add(res);
        const settled = () => underWay.delete(res);
        res.once('finish', settled).once('close', settled);
      });
      const closed = new Promise<void>((done) => server.once('close', () => done()));
      resolve({
        server,
        port: address.port,
        url: `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`,
        drain: () => {
          if (draining) return;
          draining = true;
          for (const res of underWay) if (!res.headersSent) res.setHeader('connection', 'close');
          underWay.clear();
          // net's close, not http's: http's (Node 19+) also closes the idle connections.
          NetServer.prototype.close.call(server);
        },
        close: async () => {
          if (draining) {
            await Promise.race([closed, sleep(server.keepAliveTimeout + DRAIN_GRACE_MS)]);
            server.closeAllConnections();
            return closed;
          }
          server.close();
          // Idle keep-alive sockets would hold close() open; long-lived streams are ended too.
          server.closeIdleConnections();
          const timer = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS).unref();
          await closed;
          clearTimeout(timer);
        },
      });
    });
  });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());
