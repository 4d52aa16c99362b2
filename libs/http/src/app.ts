/**
 * The express app every Berth HTTP server starts from: request ids, JSON logs, a JSON body parser
 * whose failures are 422s, the registered Api routers, then JSON 404/405 and the error handler.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express, { type Express, type RequestHandler } from 'express';
import type { Logger } from '@berth/log';
import { errorHandler, notFoundHandler } from './errors.js';

export interface AppOptions {
  logger: Logger;
  /** Routers and middleware mounted after the common middleware, in order. */
  routes: (RequestHandler | express.Router)[];
  /**
   * Largest accepted JSON body.
   * @default '10mb'
   */
  bodyLimit?: string;
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
  app.use(express.json({ limit: options.bodyLimit ?? '10mb', type: ['application/json', 'application/*+json'] }));
  for (const route of options.routes) app.use(route);
  app.use(notFoundHandler());
  app.use(errorHandler(options.logger));
  return app;
}

declare module 'http' {
  interface IncomingMessage {
    /** The request id: the caller's X-Request-Id when sane, otherwise a new UUID. */
    id?: string;
  }
}

/**
 * Request ids and one JSON log line per finished request (level by status). Hand-rolled rather
 * than pino-http, which builds a child logger and serializes the request for every call.
 */
function requestLog(logger: Logger, quiet: Set<string>, logUrl?: (url: string) => string): RequestHandler {
  return (req, res, next) => {
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && requestIdPattern.test(given) ? given : randomUUID();
    req.id = id;
    res.setHeader('X-Request-Id', id);
    const url = req.url;
    if (!quiet.has(url.split('?')[0] ?? '')) {
      const started = performance.now();
      // 'close' also comes when the client went away before the answer was complete.
      res.once('close', () => {
        const status = res.statusCode;
        const level = status >= 500 ? 'error' : status >= 400 || !res.writableFinished ? 'warn' : 'info';
        logger[level](
          { req: { id, method: req.method, url: logUrl ? logUrl(url) : url }, res: { statusCode: status }, responseTime: Math.round(performance.now() - started) },
          res.writableFinished ? 'request completed' : 'request aborted',
        );
      });
    }
    next();
  };
}

export interface RunningServer {
  server: Server;
  port: number;
  /** `http://host:port` */
  url: string;
  close(): Promise<void>;
}

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
      resolve({
        server,
        port: address.port,
        url: `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            // Idle keep-alive sockets would hold close() open; long-lived streams are ended too.
            server.closeIdleConnections();
            setTimeout(() => server.closeAllConnections(), 2000).unref();
          }),
      });
    });
  });
}
