/**
 * `berth serve`: run the whole platform in this process until SIGINT/SIGTERM. `berth up` starts
 * it detached; run it directly to keep the platform in the foreground.
 */
import { createLogger } from '@berth/log';
import { CliError } from '../client.js';
import type { CliEnv } from '../env.js';
import { startPlatform } from '../platform.js';

export async function serve(env: CliEnv): Promise<void> {
  if (!env.DATABASE_URL) throw new CliError('serve needs DATABASE_URL (berth up provides it)');
  const logger = createLogger({ name: 'berth', level: env.LOG_LEVEL });
  const platform = await startPlatform(
    {
      databaseUrl: env.DATABASE_URL,
      host: env.BERTH_HOST,
      port: env.BERTH_PORT ?? 8080,
      logLevel: env.LOG_LEVEL,
      stateDir: env.stateDir,
      processEnv: env.processEnv,
      ...(env.REDIS_URL ? { redisUrl: env.REDIS_URL } : {}),
      ...(env.BERTH_PUBLIC_URL ? { publicUrl: env.BERTH_PUBLIC_URL } : {}),
    },
    logger,
  );
  logger.info({ url: platform.url, pid: process.pid }, 'platform ready');
  await new Promise<void>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        logger.info({ signal }, 'shutting down');
        resolve();
      });
    }
  });
  await platform.close();
}
