import { rm } from 'node:fs/promises';
import { TEST_ENV } from './env.js';

export default async function globalTeardown(): Promise<void> {
  const servers = globalThis.__berthTestServers;
  if (!servers) return;
  await Promise.allSettled([servers.postgres.stop(), servers.redis.stop(), servers.s3.stop()]);
  const dir = process.env[TEST_ENV.tmpDir];
  if (dir) await rm(dir, { recursive: true, force: true });
}
