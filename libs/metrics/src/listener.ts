/**
 * The metrics listener: `GET /metrics` (Prometheus text format) on its own address, apart from any
 * port tenants' traffic reaches. By default on loopback: a Prometheus on the same host (or a pod's
 * sidecar) scrapes it; binding it wider is the operator's choice (`BERTH_METRICS_HOST`).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Logger } from '@berth/log';
import { scrape } from './registry.js';

export interface MetricsListenerOptions {
  /** @default '127.0.0.1' */
  host?: string;
  /** 0 picks a free one. */
  port: number;
  logger?: Logger;
}

export interface RunningMetricsListener {
  /** `http://host:port` as dialable from this machine. */
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Answers GET/HEAD `/metrics` with the process's metrics; true when it did (the path was
 * `/metrics`), so a listener with other paths (the health listener) can answer the rest.
 */
export function serveMetrics(req: IncomingMessage, res: ServerResponse, logger?: Logger): boolean {
  if ((req.url ?? '/').split('?')[0] !== '/metrics') return false;
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('method not allowed\n');
    return true;
  }
  scrape().then(
    ({ contentType, body }) => {
      res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    },
    (error: unknown) => {
      logger?.error({ err: error }, 'collecting metrics failed');
      res.writeHead(500, { 'content-type': 'text/plain' }).end('collecting metrics failed\n');
    },
  );
  return true;
}

/** Starts a listener answering only `/metrics` (404 otherwise). */
export async function startMetricsListener(options: MetricsListenerOptions): Promise<RunningMetricsListener> {
  const host = options.host ?? '127.0.0.1';
  const server = createServer((req, res) => {
    if (!serveMetrics(req, res, options.logger)) res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as { port: number }).port;
  const dialHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  const url = `http://${dialHost.includes(':') ? `[${dialHost}]` : dialHost}:${port}`;
  options.logger?.info({ url: `${url}/metrics` }, 'metrics listening');
  return {
    url,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
