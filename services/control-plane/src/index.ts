/**
 * Control plane: deployments, revisions and auth-wait. `start(config)` applies the migrations of
 * the `control_plane` schema and serves, over gRPC, the standard health service (which the
 * gateway's /readyz checks) and `berth.controlplane.v1.AuthFlowService` (login flows).
 */
import { fileURLToPath } from 'node:url';
import { createDatabase, migrate } from '@berth/db';
import { createLogger, type Logger } from '@berth/log';
import { AuthFlowService } from '@berth/proto';
import { startGrpcService, type RunningGrpcService } from '@berth/rpc';
import { FlowNotifier } from './auth-flows/notifier.js';
import { authFlowHandlers } from './auth-flows/rpc.js';
import { AuthFlows } from './auth-flows/service.js';
import { AuthFlowStore } from './auth-flows/store.js';
import type { ControlPlaneConfig } from './config.js';
import type { ControlPlaneTables } from './tables.js';

export type { ControlPlaneConfig } from './config.js';
export { loadControlPlaneConfig } from './env.js';
export { AuthFlows } from './auth-flows/service.js';
export type { AuthFlowsOptions, WaitOutcome } from './auth-flows/service.js';
export { AuthFlowStore } from './auth-flows/store.js';
export type { ClaimResult, FlowRecord, FlowStatus } from './auth-flows/store.js';
export { FlowNotifier } from './auth-flows/notifier.js';

/** gRPC package whose health status this service reports. */
export const SERVICE_NAME = 'berth.controlplane.v1';

/** The Postgres schema of the control plane. */
export const CONTROL_PLANE_SCHEMA = 'control_plane';

/** Numbered SQL migrations of the control plane (`NNNN_description.sql`). */
export const controlPlaneMigrationsDir = fileURLToPath(new URL('../migrations', import.meta.url));

/** NOTIFY channel on which completed login flows are announced (payload: digest of the auth_id). */
export const AUTH_FLOW_CHANNEL = 'berth_control_plane_auth_flows';

/** Applies the control plane's migrations (safe to call from many processes at once). */
export async function migrateControlPlane(databaseUrl: string): Promise<void> {
  await migrate({ connectionString: databaseUrl, schema: CONTROL_PLANE_SCHEMA, directory: controlPlaneMigrationsDir });
}

export interface RunningControlPlane extends RunningGrpcService {
  /** The login flows this process serves (for in-process callers and tests). */
  authFlows: AuthFlows;
}

export async function start(
  config: ControlPlaneConfig,
  logger: Logger = createLogger({ name: 'control-plane', level: config.logLevel }),
): Promise<RunningControlPlane> {
  if (config.migrate !== false) await migrateControlPlane(config.databaseUrl);
  const database = createDatabase<ControlPlaneTables>({
    connectionString: config.databaseUrl,
    schema: CONTROL_PLANE_SCHEMA,
    applicationName: 'berth-control-plane',
  });
  const notifier = new FlowNotifier({ connectionString: config.databaseUrl, channel: AUTH_FLOW_CHANNEL, log: logger });
  const store = new AuthFlowStore(database.db, { channel: AUTH_FLOW_CHANNEL });
  const authFlows = new AuthFlows(store, notifier, logger, {
    ...(config.authFlowTtlSeconds ? { defaultTtlSeconds: config.authFlowTtlSeconds } : {}),
  });
  let service: RunningGrpcService | undefined;
  let sweeper: NodeJS.Timeout | undefined;
  try {
    // Listening before serving: the first Wait must not miss a completion.
    await notifier.ready();
    service = await startGrpcService({
      name: SERVICE_NAME,
      host: config.grpcHost,
      port: config.grpcPort,
      logger,
      setup: (server) => server.add(AuthFlowService, authFlowHandlers(authFlows)),
    });
    sweeper = setInterval(() => {
      store.sweep().catch((error: unknown) => logger.warn({ err: error }, 'sweeping login flows failed'));
    }, config.sweepIntervalMs ?? 60_000);
    sweeper.unref();
  } catch (error) {
    await notifier.close();
    await database.close();
    throw error;
  }
  const grpc = service;
  return {
    address: grpc.address,
    port: grpc.port,
    health: grpc.health,
    authFlows,
    close: async () => {
      clearInterval(sweeper);
      // Waiters answer `pending` at once, so the server does not have to cancel their calls.
      await notifier.close();
      await grpc.close();
      await database.close();
    },
  };
}
