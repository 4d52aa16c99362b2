/**
 * `berth down`: stop the supervisor `berth up` left running, which stops the platform, the sandbox
 * engine and Postgres; then whatever of them runs without it (its supervisor was killed). Data and
 * sandbox files stay.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PostgresServer, podmanUnavailableReason, processAlive, sleep } from '@berth/local-stack';
import { localPlatform } from '../connection.js';
import type { CliEnv } from '../env.js';
import { privateEngine } from '../sandbox-engine.js';
import { platformAlive, supervisorAlive, type SupervisedUnitName } from '../state.js';

/** The supervisor stops the platform (agent servers drain), the engine (sandboxes stop) and Postgres. */
const SUPERVISOR_STOP_MS = 90_000;
const PLATFORM_STOP_MS = 15_000;

const STOPPED: Record<SupervisedUnitName, string> = {
  platform: 'stopped the platform',
  'sandbox engine': 'stopped the sandbox engine (sandbox files kept)',
  postgres: 'stopped postgres (data kept)',
};

export async function down(env: CliEnv, print: (line: string) => void = console.log): Promise<void> {
  // From any folder, the platform `status` and `deploy` reach: this folder's, else the checkout's.
  const state = await localPlatform(env);
  let stoppedAny = false;
  const record = await state.readSupervisor();
  if (record && supervisorAlive(record)) {
    stoppedAny = true;
    if (await stopProcess(record.pid, SUPERVISOR_STOP_MS)) {
      for (const name of Object.keys(record.units).reverse() as SupervisedUnitName[]) {
        const pid = record.units[name]?.pid;
        print(`${STOPPED[name]}${name === 'platform' && pid ? ` (pid ${pid})` : ''}`);
      }
      print(`stopped the supervisor (pid ${record.pid})`);
    } else {
      print(`the supervisor (pid ${record.pid}) did not stop within ${SUPERVISOR_STOP_MS / 1000} s: killed it; stopping what it ran`);
    }
  }
  await state.clearSupervisor();

  // What runs without a supervisor: it was killed (or is an older Berth's platform).
  const platform = await state.readPlatform();
  if (platform && platformAlive(platform)) {
    stoppedAny = true;
    await stopProcess(platform.pid, PLATFORM_STOP_MS);
    print(`stopped the platform (pid ${platform.pid}), which ran without its supervisor`);
  }
  await state.clearPlatform();
  // An engine a killed supervisor (or platform) left running, or the storage mount it left.
  if (!podmanUnavailableReason() && existsSync(join(state.root, 'podman'))) {
    const engine = privateEngine(state.root);
    if (await engine.leftBehind()) {
      stoppedAny = true;
      await engine.stop();
      print('stopped the sandbox engine, which ran without its supervisor (sandbox files kept)');
    }
  }
  if (!env.DATABASE_URL && existsSync(state.postgresDir)) {
    const postgres = new PostgresServer({ baseDir: state.postgresDir });
    if ((await postgres.pid()) !== undefined) {
      stoppedAny = true;
      await postgres.stop();
      print('stopped postgres, which ran without its supervisor (data kept)');
    }
  }
  if (!stoppedAny) print('Berth was not running');
}

/** SIGTERM, then SIGKILL after `timeoutMs`; true when it ended by itself. */
async function stopProcess(pid: number, timeoutMs: number): Promise<boolean> {
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + timeoutMs;
  while (processAlive(pid) && Date.now() < deadline) await sleep(100);
  if (!processAlive(pid)) return true;
  process.kill(pid, 'SIGKILL');
  return false;
}
