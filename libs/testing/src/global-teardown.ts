import { rm } from 'node:fs/promises';

/**
 * Stops what the global setups of the run started and removes its folder. Every tier names this one
 * module, so jest runs it once, after every file of every tier ran; a failed setup runs it too.
 */
export default async function globalTeardown(): Promise<void> {
  const run = globalThis.__berthTestRun;
  if (!run) return;
  globalThis.__berthTestRun = undefined;
  const { servers } = run;
  const results = await Promise.allSettled([
    servers.postgres?.stop(),
    servers.redis?.stop(),
    servers.s3?.stop(),
    servers.podman?.stop(),
    ...(servers.registries ?? []).map((registry) => registry.stop()),
  ]);
  for (const result of results) {
    if (result.status === 'rejected') console.error('test teardown:', result.reason);
  }
  await rm(run.dir, { recursive: true, force: true });
}
