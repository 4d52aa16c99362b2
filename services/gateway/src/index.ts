/**
 * The gateway service: `start(config)` migrates its schema, serves the public HTTP API, and
 * reports readiness of Postgres and the internal services.
 */
import { randomUUID } from 'node:crypto';
import { AuthStore, authMigrationsDir, DEFAULT_SESSION_LIMITS, type AuthTables } from '@berth/auth';
import { systemClock } from '@berth/clock';
import { createDatabase, migrate, sql } from '@berth/db';
import { listen } from '@berth/http';
import { createLogger, type Logger } from '@berth/log';
import { startMetricsListener } from '@berth/metrics';
import { pingQueueBackend } from '@berth/queue';
import { SandboxService } from '@berth/proto';
import { checkHealth } from '@berth/rpc';
import { createGatewayHttp } from './app.js';
import type { GatewayConfig } from './config.js';
import { ControlPlaneClients } from './control-plane.js';
import { ExportWorkerClients } from './export-worker.js';
import { SandboxManagerClients } from './sandbox-manager.js';
import type { ReadinessCheck } from './routes/health.js';

export type { GatewayConfig } from './config.js';
export { loadGatewayConfig } from './env.js';
export { createGatewayApp, gatewayApi, gatewayOpenApiDocument, type GatewayAppDeps } from './app.js';
export { describeCredentials, PROXY_CREDENTIALS } from './access.js';
export { ControlPlaneClients } from './control-plane.js';
export { ExportWorkerClients } from './export-worker.js';
export { SandboxManagerClients } from './sandbox-manager.js';
export { BERTH_VERSION } from './version.js';

export const GATEWAY_SCHEMA = 'gateway';

export interface RunningGateway {
  url: string;
  port: number;
  store: AuthStore;
  /** The metrics listener's `http://host:port` (GatewayConfig.metrics), when there is one. */
  metricsUrl?: string;
  /**
   * A fresh id per start, also in the body of `/readyz`: whoever started this gateway (`berth up`)
   * can tell it from another process answering on the same port.
   */
  instanceId: string;
  close(): Promise<void>;
}

/** Applies the gateway's migrations (safe to call from many processes at once). */
export async function migrateGateway(databaseUrl: string): Promise<void> {
  await migrate({ connectionString: databaseUrl, schema: GATEWAY_SCHEMA, directory: authMigrationsDir });
}

export async function start(config: GatewayConfig, logger: Logger = createLogger({ name: 'gateway', level: config.logLevel })): Promise<RunningGateway> {
  if (config.migrate !== false) await migrateGateway(config.databaseUrl);
  const database = createDatabase<AuthTables>({ connectionString: config.databaseUrl, schema: GATEWAY_SCHEMA });
  const store = new AuthStore(database.db);
  const readiness: Record<string, ReadinessCheck> = {
    postgres: async () => {
      await sql`SELECT 1`.execute(database.db);
    },
  };
  readiness.queue = async () => {
    await pingQueueBackend(config.queue);
    return config.queue.kind;
  };
  for (const [name, address] of Object.entries(config.services)) {
    readiness[name] = async () => {
      // With the token: a service expecting another one fails the check instead of every later call.
      const status = await checkHealth(address, { timeoutMs: 1500, internalToken: config.internalToken });
      if (status !== 'SERVING') throw new Error(`health status ${status}`);
    };
  }
  // The sandbox engine: down, it fails only the sandbox calls (503s), not the gateway.
  const degradableReadiness: Record<string, ReadinessCheck> = {};
  const sandboxManagerAddress = config.services['sandbox-manager'];
  if (sandboxManagerAddress) {
    degradableReadiness.sandboxes = async () => {
      const status = await checkHealth(sandboxManagerAddress, { service: SandboxService.typeName, timeoutMs: 1500, internalToken: config.internalToken });
      // A manager without a sandbox driver leaves it unknown: sandboxes are off, nothing is failing.
      if (status === 'SERVICE_UNKNOWN') return 'off';
      if (status !== 'SERVING') throw new Error('the sandbox engine does not answer');
    };
  }
  const controlPlane = new ControlPlaneClients(config.services['control-plane'], config.internalToken);
  const exportWorker = new ExportWorkerClients(config.services['export-worker'], config.internalToken);
  const sandboxManager = new SandboxManagerClients(config.services['sandbox-manager'], config.internalToken);
  const instanceId = randomUUID();
  const { app, sockets, deploymentSockets } = createGatewayHttp({
    logger,
    instanceId,
    store,
    readiness,
    degradableReadiness,
    controlPlane,
    exportWorker,
    sandboxManager,
    ...(config.publicUrl ? { publicUrl: config.publicUrl } : {}),
    ...(config.loginTokenTtlSeconds ? { loginTokenTtlSeconds: config.loginTokenTtlSeconds } : {}),
    ...(config.corsAllowOrigins ? { corsAllowOrigins: config.corsAllowOrigins } : {}),
    ...(config.loginRateLimit ? { loginRateLimit: config.loginRateLimit } : {}),
    sessions: store.consoleSessions({ ...DEFAULT_SESSION_LIMITS, ...config.consoleSessions }, config.clock ?? systemClock),
    ...(config.clock ? { clock: config.clock } : {}),
  });
  const metrics = config.metrics ? await startMetricsListener({ ...config.metrics, logger }) : undefined;
  const server = await listen(app, config.host, config.port).catch(async (error: unknown) => {
    await metrics?.close();
    throw error;
  });
  server.server.on('upgrade', (req, socket, head) => {
    if (!deploymentSockets.handleUpgrade(req, socket, head)) sockets.handleUpgrade(req, socket, head);
  });
  // The console is served at the root of the address users reach the gateway by.
  const consoleUrl = `${(config.publicUrl ?? server.url).replace(/\/+$/, '')}/`;
  logger.info({ url: server.url, console: consoleUrl }, `gateway listening; the console is at ${consoleUrl}`);
  return {
    url: server.url,
    port: server.port,
    store,
    instanceId,
    ...(metrics ? { metricsUrl: metrics.url } : {}),
    close: async () => {
      // Stops taking connections without failing a request: answers under way, and to requests
      // still coming on kept-alive connections, close their connection after them (a client never
      // sends on a connection being closed under it); close() waits for them to end.
      server.drain();
      await metrics?.close();
      sockets.close();
      deploymentSockets.close();
      await server.close();
      controlPlane.close();
      exportWorker.close();
      sandboxManager.close();
      await database.close();
    },
  };
}
