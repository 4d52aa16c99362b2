/**
 * `berth down`: stop the platform process (which stops its sandbox engine) and the Postgres that
 * `berth up` provisioned. Data and sandbox files stay.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PostgresServer, podmanUnavailableReason, sleep } from '@berth/local-stack';
import type { CliEnv } from '../env.js';
import { privateEngine } from '../sandbox-engine.js';
import { StateDir, isAlive } from '../state.js';

export async function down(env: CliEnv, print: (line: string) => void = console.log): Promise<void> {
  const state = new StateDir(env.stateDir);
  const platform = await state.readPlatform();
  if (platform && isAlive(platform.pid)) {
    process.kill(platform.pid, 'SIGTERM');
    const deadline = Date.now() + 15_000;
    while (isAlive(platform.pid) && Date.now() < deadline) await sleep(100);
    if (isAlive(platform.pid)) process.kill(platform.pid, 'SIGKILL');
    print(`stopped the platform (pid ${platform.pid})`);
  } else {
    print('the platform was not running');
  }
  await state.clearPlatform();
  // The platform stops its sandbox engine; one that was killed or crashed leaves it running (and
  // its storage mounted). Sandboxes' files stay.
  if (!podmanUnavailableReason() && existsSync(join(env.stateDir, 'podman'))) {
    const engine = privateEngine(env.stateDir);
    const leftBehind = await engine.leftBehind();
    await engine.stop();
    if (leftBehind) print('stopped the sandbox engine a stopped platform left running (sandbox files kept)');
  }
  if (!env.DATABASE_URL && existsSync(state.postgresDir)) {
    await new PostgresServer({ baseDir: state.postgresDir }).stop();
    print('stopped postgres (data kept)');
  }
}
