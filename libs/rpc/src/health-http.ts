/**
 * `/healthz` and `/readyz` over plain HTTP for a gRPC service, so that every Berth service is probed
 * the same way (HTTP GET) in Kubernetes whatever it speaks: the gateway answers them on its own
 * port, a gRPC service on this small listener beside its gRPC port. `/readyz` asks the service's
 * own gRPC health service (the answer a gRPC probe would get) plus the extra checks given, such as
 * Postgres; a failing check makes it 503 with the names of what failed (never the reasons: the
 * listener answers anyone who reaches the pod). `/metrics` answers the process's metrics there too:
 * the listener is internal, so a service needs no other port for them.
 */
import { createServer, type Server } from 'node:http';
import type { Logger } from '@berth/log';
import { serveMetrics } from '@berth/metrics';
import { checkHealth } from './health.js';

/** Resolves when a dependency works, rejects with the reason otherwise. */
export type HealthCheck = () => Promise<void>;

export interface HealthListenerOptions {
  /** Interface to bind; `0.0.0.0` for kubelet probes. */
  host: string;
  /** 0 picks a free one. */
  port: number;
  /** The gRPC server whose health service `/readyz` asks (`host:port`), and the name it reports. */
  grpc: { address: string; service: string };
  /** Further readiness checks by name, e.g. `postgres`. */
  checks?: Record<string, HealthCheck>;
  /** @default 2000 */
  timeoutMs?: number;
  logger?: Logger;
}

export interface RunningHealthListener {
  /** `http://host:port` as dialable from this machine. */
  url: string;
  port: number;
  close(): Promise<void>;
}

class HealthCheckTimeoutError extends Error {
  override name = 'HealthCheckTimeoutError';
}

function withTimeout(check: HealthCheck, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    check(),
    new Promise<void>((_, reject) => {
      timer = setTimeout(() => reject(new HealthCheckTimeoutError(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Starts the listener; it answers only GET/HEAD `/healthz`, `/readyz` and `/metrics` (the process's, Prometheus text format; 404 otherwise). */
export async function startHealthListener(options: HealthListenerOptions): Promise<RunningHealthListener> {
  const timeoutMs = options.timeoutMs ?? 2000;
  const checks: Record<string, HealthCheck> = {
    grpc: async () => {
      const status = await checkHealth(options.grpc.address, { service: options.grpc.service, timeoutMs });
      if (status !== 'SERVING') throw new Error(`health status ${status}`);
    },
    ...options.checks,
  };
  const readiness = async () => {
    const results = await Promise.all(
      Object.entries(checks).map(async ([name, check]) => {
        try {
          await withTimeout(check, timeoutMs);
          return [name, 'ok'] as const;
        } catch (error) {
          options.logger?.warn({ err: error, check: name }, 'readiness check failed');
          return [name, 'failing'] as const;
        }
      }),
    );
    return { ok: results.every(([, status]) => status === 'ok'), checks: Object.fromEntries(results) };
  };
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : JSON.stringify(body));
    };
    if (serveMetrics(req, res, options.logger)) return;
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, { status: 'method not allowed' });
    if (path === '/healthz') return send(200, { status: 'ok' });
    if (path !== '/readyz') return send(404, { status: 'not found' });
    readiness().then(
      ({ ok, checks: results }) => send(ok ? 200 : 503, { status: ok ? 'ok' : 'failing', checks: results }),
      () => send(503, { status: 'failing' }),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as { port: number }).port;
  const dialHost = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  return {
    url: `http://${dialHost.includes(':') ? `[${dialHost}]` : dialHost}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
