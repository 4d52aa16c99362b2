/**
 * `berth serve`: run the whole platform in this process until SIGINT/SIGTERM. `berth up` starts
 * it detached; run it directly to keep the platform in the foreground. `--service <name>` runs one
 * service instead (see serve-service.ts): the Helm chart's Deployments.
 */
import { createLogger, type Logger } from '@berth/log';
import { CliError } from '../client.js';
import type { CliEnv } from '../env.js';
import { STOP_SIGNALS } from '../signals.js';
import { startPlatform } from '../platform.js';
import { parseSupervisedSandboxes, type PlatformSandboxConfig } from '../sandbox-engine.js';
import type { ServiceTarget } from '../service-targets.js';

/**
 * What a platform started by `berth up` tells it over IPC: where it listens and the id its `/readyz`
 * answers (so `up` reports its own process, not whatever answers on the port), or why it failed.
 */
export type ServeReport =
  { ready: { url: string; port: number; instance_id: string; sandboxes: string; isolation: string } } | { failed: { message: string; code?: string } };

export async function serve(env: CliEnv, target: ServiceTarget = 'all'): Promise<void> {
  if (target !== 'all') return serveOne(env, target);
  if (!env.DATABASE_URL) throw new CliError('serve needs DATABASE_URL (berth up provides it)');
  const logger = createLogger({ name: 'berth', level: env.LOG_LEVEL });
  // Before anything starts: a signal during the start stops what started once it has.
  const signalled = untilSignal(logger);
  let platform;
  try {
    platform = await startPlatform(
      {
        databaseUrl: env.DATABASE_URL,
        host: env.BERTH_HOST,
        port: env.BERTH_PORT ?? 8080,
        logLevel: env.LOG_LEVEL,
        stateDir: env.stateDir,
        processEnv: env.processEnv,
        sandboxes: sandboxConfigFromEnv(env),
        serviceEnv: env.serviceEnv,
        ...(env.REDIS_URL ? { redisUrl: env.REDIS_URL, agentRedis: env.BERTH_AGENT_REDIS } : {}),
        ...(env.BERTH_PUBLIC_URL ? { publicUrl: env.BERTH_PUBLIC_URL } : {}),
      },
      logger,
    );
  } catch (error) {
    await report({
      failed: { message: (error as Error).message, ...((error as NodeJS.ErrnoException).code ? { code: (error as NodeJS.ErrnoException).code } : {}) },
    });
    throw error;
  }
  if (!signalled.received) {
    logger.info({ url: platform.url, pid: process.pid, sandboxes: platform.sandboxes, isolation: platform.isolation }, 'platform ready');
    await report({
      ready: { url: platform.url, port: platform.port, instance_id: platform.instanceId, sandboxes: platform.sandboxes, isolation: platform.isolation },
    });
  }
  await signalled.promise;
  await platform.close();
}

/** One service (`--service`), configured by its own environment, until SIGINT/SIGTERM/SIGHUP. */
async function serveOne(env: CliEnv, target: Exclude<ServiceTarget, 'all'>): Promise<void> {
  const signalled = untilSignal(createLogger({ name: target, level: env.LOG_LEVEL }));
  const { startService } = await import('./serve-service.js');
  const service = await startService(target, env);
  await signalled.promise;
  await service.close();
}

/** Resolves at the first SIGINT, SIGTERM or SIGHUP (a closed terminal); `received` tells whether one came yet. */
function untilSignal(logger: Logger): { promise: Promise<void>; readonly received: boolean } {
  let received = false;
  const promise = new Promise<void>((resolve) => {
    for (const signal of STOP_SIGNALS) {
      process.once(signal, () => {
        logger.info({ signal }, 'shutting down');
        received = true;
        resolve();
      });
    }
  });
  return {
    promise,
    get received() {
      return received;
    },
  };
}

/** What `berth serve` asks for: the private engine unless BERTH_SANDBOXES=off; under `berth up`, its supervisor's engine. */
function sandboxConfigFromEnv(env: CliEnv): PlatformSandboxConfig {
  if (env.BERTH_SANDBOXES === 'off') return { engine: 'off' };
  if (env.BERTH_SUPERVISED_SANDBOXES === undefined) return { engine: 'private' };
  const supervised = parseSupervisedSandboxes(env.BERTH_SUPERVISED_SANDBOXES);
  return 'engine' in supervised ? { engine: supervised.engine } : { engine: 'off', offReason: supervised.off };
}

/** Sends to the process that started this one, when it listens (`berth up`); the process may exit right after. */
function report(message: ServeReport): Promise<void> {
  const send = process.send?.bind(process);
  if (!send || !process.connected) return Promise.resolve();
  // A parent gone meanwhile is no reason to fail: it only stops listening.
  return new Promise((resolve) => send(message, undefined, {}, () => resolve()));
}
