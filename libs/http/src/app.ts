/**
 * The express app every Berth HTTP server starts from: request ids, JSON logs, a JSON body parser
 * whose failures are 422s, the registered Api routers, then JSON 404/405 and the error handler.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express, { type Express, type RequestHandler } from 'express';
import { pinoHttp } from 'pino-http';
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
  app.use(
    pinoHttp({
      logger: options.logger,
      // The caller's X-Request-Id when sane, otherwise a new UUID; pino-http stores it as req.id.
      genReqId: (req, res) => {
        const given = req.headers['x-request-id'];
        const id = typeof given === 'string' && requestIdPattern.test(given) ? given : randomUUID();
        res.setHeader('X-Request-Id', id);
        return id;
      },
      autoLogging: { ignore: (req) => quiet.has((req.url ?? '').split('?')[0] ?? '') },
      customLogLevel: (_req, res, error) => (error || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info'),
      serializers: {
        req: (req: { id: string; method: string; url: string }) => ({
          id: req.id,
          method: req.method,
          url: options.logUrl ? options.logUrl(req.url) : req.url,
        }),
        res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      },
    }),
  );
  app.use(express.json({ limit: options.bodyLimit ?? '10mb', type: ['application/json', 'application/*+json'] }));
  for (const route of options.routes) app.use(route);
  app.use(notFoundHandler());
  app.use(errorHandler(options.logger));
  return app;
}

export interface RunningServer {
  server: Server;
  port: number;
  /** `http://host:port` */
  url: string;
  close(): Promise<void>;
}

/** Listens on host:port (0 = any free port) and resolves once bound. */
export function listen(app: Express, host: string, port: number): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const server = app.listen(port, host);
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
