import { rm } from 'node:fs/promises';
import { TEST_ENV } from './env.js';

export default async function globalTeardown(): Promise<void> {
  const servers = globalThis.__berthTestServers;
  if (!servers) return;
  const results = await Promise.allSettled([
    servers.postgres?.stop(),
    servers.redis?.stop(),
    servers.s3?.stop(),
    servers.podman?.stop(),
    ...(servers.registries ?? []).map((registry) => registry.stop()),
  ]);
  const dir = process.env[TEST_ENV.tmpDir];
  for (const result of results) {
    if (result.status === 'rejected') console.error('test teardown:', result.reason);
  }
  if (dir) await rm(dir, { recursive: true, force: true });
}
