/**
 * A `berth up` stopped by a signal while it starts leaves nothing running: for SIGINT, SIGTERM and
 * SIGHUP, sent to its process or to its process group (as a terminal, a test runner or a CI step
 * stops it), at each phase of the start — its supervisor begun, Postgres starting (a new cluster:
 * initdb, then pg_ctl), the sandbox engine starting, the platform starting (migrations, services).
 * One state folder for all; each phase is reached by watching for the process that starts in it.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processesUsing, until, type FoundProcess } from '@berth/testing';
import { privateEngine } from './sandbox-engine.js';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
let stateDir: string;

beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'brt-sig-'));
});
afterAll(async () => {
  const cluster = await realpath(join(stateDir, 'postgres')).catch(() => undefined);
  await privateEngine(stateDir).destroy();
  if (cluster && !cluster.startsWith(stateDir)) await rm(cluster, { recursive: true, force: true });
  await rm(stateDir, { recursive: true, force: true });
}, 60_000);

/** Every folder whose processes are this Berth's: the state folder, the cluster's real folder, the engine's volatile folder. */
async function berthFolders(): Promise<string[]> {
  const cluster = await realpath(join(stateDir, 'postgres')).catch(() => join(stateDir, 'postgres'));
  return [stateDir, cluster, dirname(privateEngine(stateDir).socketPath)];
}

/** Deletes the cluster (as root it lives outside the state folder, linked from it). */
async function removeCluster(): Promise<void> {
  const link = join(stateDir, 'postgres');
  const cluster = await realpath(link).catch(() => undefined);
  if (cluster) await rm(cluster, { recursive: true, force: true });
  await rm(link, { recursive: true, force: true });
}

/** The phases of the start, each told by a process of it that appeared. */
const phases: Record<string, (running: FoundProcess[]) => boolean> = {
  'its supervisor begun': (running) => running.some((p) => / supervise$/.test(p.command)),
  'Postgres starting': (running) => running.some((p) => /\b(pg_ctl|initdb)\b/.test(p.command)),
  'the sandbox engine starting': (running) => running.some((p) => /podman .* system service/.test(p.command)),
  'the platform starting': (running) => running.some((p) => / serve$/.test(p.command)),
};

const cases = Object.keys(phases).flatMap((phase, index) =>
  (['SIGINT', 'SIGTERM', 'SIGHUP'] as const).map((signal, n) => ({ phase, signal, group: (index + n) % 2 === 0 })),
);

describe('berth up stopped by a signal while it starts', () => {
  it.each(cases)(
    'leaves no process running: $signal during "$phase" (to its group: $group)',
    async ({ phase, signal, group }) => {
      // A new cluster: its initdb makes the phase long enough to be sure to land in it.
      if (phase === 'Postgres starting') await removeCluster();
      const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('BERTH_') && name !== 'DATABASE_URL'));
      const up = spawn(process.execPath, [bin, 'up'], {
        env: { ...inherited, BERTH_STATE_DIR: stateDir, BERTH_PORT: '0', LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
        // A group of its own, as a terminal gives a command: a signal to the group reaches only it.
        detached: true,
      });
      let output = '';
      up.stdout.on('data', (d) => (output += String(d)));
      up.stderr.on('data', (d) => (output += String(d)));
      const exited = new Promise<number | null>((resolve) => up.once('exit', (code) => resolve(code)));
      try {
        const folders = await berthFolders();
        const reached = phases[phase]!;
        await until(
          `berth up to reach "${phase}"`,
          async () => {
            if (up.exitCode !== null) throw new Error(`berth up ended before "${phase}":\n${output}`);
            return reached(await processesUsing(folders));
          },
          60_000,
          10,
        ).catch((error: Error) => {
          throw new Error(`${error.message}:\n${output}`, { cause: error });
        });
        process.kill(group ? -up.pid! : up.pid!, signal);

        expect(await exited).toBe(1);
        expect(output).toContain(`berth: stopped by ${signal}: nothing of Berth was left running`);
        expect(output).not.toContain('Berth is up');
        expect(await processesUsing(await berthFolders())).toEqual([]);
      } finally {
        // A case that failed must not leave its Berth to the next.
        await exited;
        await new Promise((resolve) => execFile(process.execPath, [bin, 'down'], { env: { ...inherited, BERTH_STATE_DIR: stateDir } }, resolve));
      }
    },
    90_000,
  );
});
