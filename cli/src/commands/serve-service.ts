/**
 * `berth serve --service <name>`: one service of the platform in this process, configured by that
 * service's own environment (its `env.ts`) — how the Helm chart runs each service as its own
 * Deployment from the one platform image. The gateway answers `/healthz` and `/readyz` itself; a
 * gRPC service gets the shared HTTP health listener beside its gRPC port (BERTH_HEALTH_HOST,
 * BERTH_HEALTH_PORT), so every pod is probed the same way.
 */
import { parseTracingEnv } from '@berth/config';
import { createPool } from '@berth/db';
import { createLogger, type Logger } from '@berth/log';
import { startHealthListener } from '@berth/rpc';
import { startTracing } from '@berth/tracing';
import type { CliEnv } from '../env.js';
import type { ServiceTarget } from '../service-targets.js';

interface Closable {
  close(): Promise<void>;
}

/** A gRPC service as started: where it listens, its health name, its Postgres, how to stop it. */
interface StartedGrpcService extends Closable {
  address: string;
  healthName: string;
  databaseUrl: string;
}

// Each starter loads only its own service's modules, and reads that service's settings the one
// way the service defines (its loader, on the CLI's environment) — the same loaders the embedded
// platform uses (service-config.ts).
type ServiceEnv = CliEnv['serviceEnv'];
const grpcStarters: Record<Exclude<ServiceTarget, 'all' | 'gateway'>, (env: ServiceEnv, logger: Logger) => Promise<StartedGrpcService>> = {
  'control-plane': async (env, logger) => {
    const { start, SERVICE_NAME } = await import('@berth/control-plane');
    const { controlPlaneConfig } = await import('../control-plane-config.js');
    const config = controlPlaneConfig(env);
    return { ...(await start(config, logger)), healthName: SERVICE_NAME, databaseUrl: config.databaseUrl };
  },
  'sandbox-manager': async (env, logger) => {
    const { loadSandboxManagerConfig, start, SERVICE_NAME } = await import('@berth/sandbox-manager');
    const config = loadSandboxManagerConfig(env);
    return { ...(await start(config, logger)), healthName: SERVICE_NAME, databaseUrl: config.databaseUrl };
  },
  'export-worker': async (env, logger) => {
    const { loadExportWorkerConfig, start, SERVICE_NAME } = await import('@berth/export-worker');
    const config = loadExportWorkerConfig(env);
    return { ...(await start(config, logger)), healthName: SERVICE_NAME, databaseUrl: config.databaseUrl };
  },
};

/** Starts the one service; resolves with how to stop it once it serves (and answers probes). */
export async function startService(target: Exclude<ServiceTarget, 'all'>, env: CliEnv): Promise<Closable> {
  const logger = createLogger({ name: target, level: env.LOG_LEVEL });
  // Before the service, whose pools and servers decide at their start whether to trace.
  const tracing = await startTracing(parseTracingEnv(env.serviceEnv), target, (message) => logger.warn({ detail: message }, 'trace export failed'));
  try {
    const service = await startTracedService(target, env, logger);
    return {
      close: async () => {
        await service.close();
        await tracing.shutdown();
      },
    };
  } catch (error) {
    await tracing.shutdown();
    throw error;
  }
}

async function startTracedService(target: Exclude<ServiceTarget, 'all'>, env: CliEnv, logger: Logger): Promise<Closable> {
  if (target === 'gateway') {
    const { loadGatewayConfig, start } = await import('@berth/gateway');
    const gateway = await start(loadGatewayConfig(env.serviceEnv), logger);
    logger.info({ url: gateway.url }, 'gateway ready');
    return gateway;
  }
  const service = await grpcStarters[target](env.serviceEnv, logger);
  const pool = createPool({ connectionString: service.databaseUrl, schema: 'public', max: 1, applicationName: `berth-${target}-health`, log: logger });
  try {
    const health = await startHealthListener({
      host: env.BERTH_HEALTH_HOST,
      port: env.BERTH_HEALTH_PORT,
      grpc: { address: service.address, service: service.healthName },
      checks: {
        postgres: async () => {
          await pool.query('SELECT 1');
        },
      },
      logger,
    });
    logger.info({ grpc: service.address, health: health.url }, `${target} ready`);
    return {
      close: async () => {
        await health.close();
        await service.close();
        await pool.end();
      },
    };
  } catch (error) {
    await service.close();
    await pool.end();
    throw error;
  }
}
