/**
 * Sandbox manager: templates and snapshots, registries, volumes, warm pools, sandboxes and their
 * data plane (commands and files), on a sandbox driver (container or kubernetes), within the
 * operator's limits and per-tenant quotas. `start(config)` migrates its schema and serves
 * `SandboxService` and `SandboxDataService` over gRPC, and the standard health service: the server
 * SERVING while it runs, `SandboxService` SERVING only while its engine answers (the gateway's
 * /readyz shows it as `sandboxes`).
 */
import { fileURLToPath } from 'node:url';
import { systemClock } from '@berth/clock';
import { createDatabase, migrate } from '@berth/db';
import { createLogger, type Logger } from '@berth/log';
import { SandboxDataService, SandboxService } from '@berth/proto';
import { startGrpcService, type HealthService, type RunningGrpcService } from '@berth/rpc';
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
import { withDriverFailures } from './rpc/driver-failures.js';
import { dataHandlers, sandboxHandlers } from './rpc/handlers.js';
import { EngineMonitor } from './sandboxes/engine-monitor.js';
import { checkLimits, DEFAULT_LIMITS } from './sandboxes/limits.js';
import { loadPlatformId } from './sandboxes/platform-id.js';
import { DEFAULT_QUOTA, TenantQuotas } from './sandboxes/quota.js';
import { Reaper } from './sandboxes/reaper.js';
import { watchSandboxes } from './sandboxes/metrics.js';
import { Reconciler } from './sandboxes/reconciler.js';
import { Sandboxes } from './sandboxes/sandboxes.js';
import type { SandboxTables } from './tables.js';

export type { SandboxManagerConfig, SandboxSettings } from './config.js';
export { envCidrList, envList, loadSandboxManagerConfig, sandboxLimitsFromEnv } from './env.js';
export * from './drivers/driver.js';
export type { ContainerDriverConfig, DriverConfig, KubernetesDriverConfig } from './drivers/build-driver.js';
export { UnavailableDriver } from './drivers/unavailable.js';
export { LONGEST_SOCKET_SUFFIX } from './drivers/container/instance-files.js';
export { Reaper } from './sandboxes/reaper.js';
export { Reconciler } from './sandboxes/reconciler.js';
export { EngineMonitor } from './sandboxes/engine-monitor.js';
export { Pools } from './pools/pools.js';
export { Sandboxes } from './sandboxes/sandboxes.js';
export { Templates } from './catalog/templates.js';
export { DEFAULT_LIMITS, type SandboxLimits } from './sandboxes/limits.js';
export { DEFAULT_QUOTA, type SandboxQuota } from './sandboxes/quota.js';
// The egress proxy, which the local deployer runs for its containers too.
export { SandboxProxy, type SandboxProxyOptions } from './proxy/index.js';

/** gRPC package whose health status this service reports. */
export const SERVICE_NAME = 'berth.sandboxmanager.v1';
export const SANDBOX_SCHEMA = 'berth_sandbox';
export const sandboxManagerMigrationsDir = fileURLToPath(new URL('../migrations', import.meta.url));

/** Largest gRPC message: a file chunk (1 MiB) with room to spare. */
const MAX_MESSAGE_BYTES = 8 * 1024 * 1024;

export interface RunningSandboxManager extends RunningGrpcService {
  sandboxes: Sandboxes;
  templates: Templates;
  pools: Pools;
  reaper: Reaper;
  reconciler: Reconciler;
  engine: EngineMonitor;
  /** This platform's id, on every instance it makes (see INSTANCE_LABELS.platform). */
  platformId: string;
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
  const limits = { ...DEFAULT_LIMITS, ...settings.limits };
  const box = new SecretBox(config.secretKey);
  let driver: SandboxDriver;
  let platformId: string;
  try {
    checkLimits(limits);
    platformId = await loadPlatformId(db);
    driver =
      settings.driverInstance ??
      (settings.driver
        ? await buildDriver(settings.driver, { db, box, logger, pidsLimit: limits.pidsLimit })
        : new UnavailableDriver(settings.unavailableReason ?? NO_DRIVER_REASON));
  } catch (error) {
    await database.close();
    throw error;
  }
  const clock = settings.clock ?? systemClock;
  const quotas = new TenantQuotas(db, { ...DEFAULT_QUOTA, ...settings.quota });
  const registries = new Registries(db, box);
  const volumes = new Volumes(db, (name) => driver.removeVolume(name), limits.maxStorageBytes);
  const templates = new Templates(db, box, registries, driver, {
    logger,
    limits,
    ...(settings.insecureRegistries ? { insecureRegistries: settings.insecureRegistries } : {}),
  });
  const privateEgress = settings.privateEgress ?? [];
  const specDeps = { db, box, templates, privateEgress, limits, platformId };
  const pools = new Pools({ ...specDeps, driver, logger, quotas, clock, ...(settings.poolIntervalMs ? { intervalMs: settings.poolIntervalMs } : {}) });
  const reconciler = new Reconciler({
    db,
    driver,
    logger,
    clock,
    platformId,
    ...(settings.reconcileIntervalMs ? { intervalMs: settings.reconcileIntervalMs } : {}),
    ...(settings.reconcileGraceMs ? { graceMs: settings.reconcileGraceMs } : {}),
  });
  let health: HealthService | undefined;
  const engine = new EngineMonitor({
    driver,
    logger,
    clock,
    ...(settings.engineCheckIntervalMs ? { intervalMs: settings.engineCheckIntervalMs } : {}),
    // Sandboxes off by configuration leave SandboxService unknown to health checks: nothing is failing.
    onChange: (up) => (engine.disabled ? undefined : health?.setStatus(SandboxService.typeName, up ? 'SERVING' : 'NOT_SERVING')),
    // At start and after an outage: what waited for the engine, then what was deleted meanwhile.
    onUp: async (first) => {
      await templates.resumePulls();
      await sandboxes.resume({ reattach: first });
      await pools.resume();
      await reconciler.pass();
    },
  });
  let sessions: CommandSessions | undefined;
  const sandboxes = new Sandboxes({
    ...specDeps,
    driver,
    logger,
    clock,
    quotas,
    engine,
    pools,
    defaults: { idleTtlSeconds: 600, deleteAfterStopSeconds: 14 * 86_400, ...settings.defaults },
    ...(settings.defaultImage ? { defaultImage: settings.defaultImage } : {}),
    onGone: (sandboxId) => sessions?.endSandbox(sandboxId),
  });
  sessions = new CommandSessions({
    driver,
    logger,
    ensureReady: (tenantId, sandboxId) => sandboxes.ensureReady(tenantId, sandboxId),
    touch: (sandboxId) => sandboxes.store.touch(sandboxId, sandboxes.now()),
    clock,
    defaults: { timeoutSeconds: 60, idleTimeoutSeconds: 300, ttlSeconds: 600, ...settings.exec },
  });
  const commands = sessions;
  const reaper = new Reaper({
    sandboxes,
    driver,
    logger,
    clock,
    runningCommands: (id) => commands.runningCount(id),
    ...(settings.reaperIntervalMs ? { intervalMs: settings.reaperIntervalMs } : {}),
  });
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
        server.add(SandboxService, withDriverFailures(sandboxHandlers(deps), engine));
        server.add(SandboxDataService, withDriverFailures(dataHandlers(deps), engine));
      },
    });
  } catch (error) {
    await database.close();
    throw error;
  }
  health = service.health;
  const unwatch = watchSandboxes(sandboxes.store, pools, logger);
  await engine.check();
  if (settings.background !== false) {
    reaper.start();
    pools.start();
    engine.start();
    reconciler.start();
  }
  const grpc = service;
  return {
    ...grpc,
    sandboxes,
    templates,
    pools,
    reaper,
    reconciler,
    engine,
    platformId,
    close: async () => {
      unwatch();
      await engine.stop();
      await reconciler.stop();
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
