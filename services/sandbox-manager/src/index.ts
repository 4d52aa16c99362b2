/**
 * Sandbox manager: templates and snapshots, registries, volumes, warm pools, sandboxes and their
 * data plane (commands and files), on a sandbox driver (container or kubernetes). `start(config)`
 * migrates its schema and serves `SandboxService` and `SandboxDataService` over gRPC (and the
 * standard health service, which the gateway's /readyz checks).
 */
import { fileURLToPath } from 'node:url';
import { createDatabase, migrate } from '@berth/db';
import { createLogger, type Logger } from '@berth/log';
import { SandboxDataService, SandboxService } from '@berth/proto';
import { startGrpcService, type RunningGrpcService } from '@berth/rpc';
import { SecretBox } from '@berth/secret-box';
import { Registries } from './catalog/registries.js';
import { Templates } from './catalog/templates.js';
import { Volumes } from './catalog/volumes.js';
import { NO_DRIVER_REASON, type SandboxManagerConfig } from './config.js';
import { buildDriver } from './drivers/build-driver.js';
import type { SandboxDriver } from './drivers/driver.js';
import { UnavailableDriver } from './drivers/unavailable.js';
import { CommandSessions } from './exec/sessions.js';
import { Pools } from './pools/pools.js';
import { dataHandlers, sandboxHandlers } from './rpc/handlers.js';
import { Reaper } from './sandboxes/reaper.js';
import { Sandboxes } from './sandboxes/sandboxes.js';
import type { SandboxTables } from './tables.js';

export type { SandboxManagerConfig, SandboxSettings } from './config.js';
export { envCidrList, envList, loadSandboxManagerConfig } from './env.js';
export * from './drivers/driver.js';
export type { ContainerDriverConfig, DriverConfig, KubernetesDriverConfig } from './drivers/build-driver.js';
export { UnavailableDriver } from './drivers/unavailable.js';
export { LONGEST_SOCKET_SUFFIX } from './drivers/container/instance-files.js';
export { Reaper } from './sandboxes/reaper.js';
export { Pools } from './pools/pools.js';
export { Sandboxes } from './sandboxes/sandboxes.js';

/** gRPC package whose health status this service reports. */
export const SERVICE_NAME = 'berth.sandboxmanager.v1';
export const SANDBOX_SCHEMA = 'berth_sandbox';
export const sandboxManagerMigrationsDir = fileURLToPath(new URL('../migrations', import.meta.url));

/** Largest gRPC message: a file chunk (1 MiB) with room to spare. */
const MAX_MESSAGE_BYTES = 8 * 1024 * 1024;

export interface RunningSandboxManager extends RunningGrpcService {
  sandboxes: Sandboxes;
  pools: Pools;
  reaper: Reaper;
}

export async function migrateSandboxManager(databaseUrl: string): Promise<void> {
  await migrate({ connectionString: databaseUrl, schema: SANDBOX_SCHEMA, directory: sandboxManagerMigrationsDir });
}

export async function start(
  config: SandboxManagerConfig,
  logger: Logger = createLogger({ name: 'sandbox-manager', level: config.logLevel }),
): Promise<RunningSandboxManager> {
  if (config.migrate !== false) await migrateSandboxManager(config.databaseUrl);
  const database = createDatabase<SandboxTables>({ connectionString: config.databaseUrl, schema: SANDBOX_SCHEMA });
  const { db } = database;
  const settings = config.sandboxes ?? {};
  const box = new SecretBox(config.secretKey);
  let driver: SandboxDriver;
  try {
    driver =
      settings.driverInstance ??
      (settings.driver ? await buildDriver(settings.driver, { db, box, logger }) : new UnavailableDriver(settings.unavailableReason ?? NO_DRIVER_REASON));
  } catch (error) {
    await database.close();
    throw error;
  }
  const now = settings.now ?? (() => new Date());
  const registries = new Registries(db, box);
  const volumes = new Volumes(db, (name) => driver.removeVolume(name));
  const templates = new Templates(db, box, registries, driver, { logger, ...(settings.insecureRegistries ? { insecureRegistries: settings.insecureRegistries } : {}) });
  const privateEgress = settings.privateEgress ?? [];
  const pools = new Pools({ db, box, driver, templates, logger, privateEgress, ...(settings.poolIntervalMs ? { intervalMs: settings.poolIntervalMs } : {}) });
  let sessions: CommandSessions | undefined;
  const sandboxes = new Sandboxes({
    db,
    box,
    driver,
    templates,
    logger,
    privateEgress,
    now,
    defaults: { idleTtlSeconds: 600, deleteAfterStopSeconds: 14 * 86_400, ...settings.defaults },
    claim: (template, sandboxId) => pools.claim(template, sandboxId),
    ...(settings.defaultImage ? { defaultImage: settings.defaultImage } : {}),
    onGone: (sandboxId) => sessions?.endSandbox(sandboxId),
  });
  sessions = new CommandSessions({
    driver,
    logger,
    ensureReady: (tenantId, sandboxId) => sandboxes.ensureReady(tenantId, sandboxId),
    touch: (sandboxId) => sandboxes.store.touch(sandboxId, now()),
    defaults: { timeoutSeconds: 60, idleTimeoutSeconds: 300, ttlSeconds: 600, ...settings.exec },
  });
  const commands = sessions;
  const reaper = new Reaper({ sandboxes, driver, logger, now, runningCommands: (id) => commands.runningCount(id), ...(settings.reaperIntervalMs ? { intervalMs: settings.reaperIntervalMs } : {}) });
  let service: RunningGrpcService;
  try {
    service = await startGrpcService({
      name: SERVICE_NAME,
      host: config.grpcHost,
      port: config.grpcPort,
      logger,
      internalToken: config.internalToken,
      grpcOptions: { 'grpc.max_receive_message_length': MAX_MESSAGE_BYTES },
      setup: (server) => {
        const deps = { templates, registries, volumes, pools, sandboxes, sessions: commands, driver };
        server.add(SandboxService, sandboxHandlers(deps));
        server.add(SandboxDataService, dataHandlers(deps));
      },
    });
  } catch (error) {
    await database.close();
    throw error;
  }
  if (!(await driver.unavailableReason())) {
    await templates.resumePulls();
    await sandboxes.resume();
    await pools.resume();
  }
  if (settings.background !== false) {
    reaper.start();
    pools.start();
  }
  const grpc = service;
  return {
    ...grpc,
    sandboxes,
    pools,
    reaper,
    close: async () => {
      await reaper.stop();
      await pools.stop();
      commands.close();
      if (settings.stopSandboxesOnClose) {
        await sandboxes.stopAll('the platform stopped');
        await pools.removeMembers();
      }
      await grpc.close();
      await sandboxes.close();
      await driver.close();
      await database.close();
    },
  };
}
