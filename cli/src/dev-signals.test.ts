/**
 * A `berth dev` stopped by a signal while it starts leaves nothing running: for SIGINT, SIGTERM and
 * SIGHUP, sent to its process or to its process group (as a terminal, a test runner or a CI step
 * stops it), at each phase of the start — at once, Postgres starting (a new cluster: initdb, then
 * pg_ctl), the agent server loading the project (a graph whose import waits for the test), its
 * migrations (held by the test on their lock). Each phase is reached by watching for it.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { cp, mkdtemp, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PostgresServer } from '@berth/local-stack';
import { processesUsing, until } from '@berth/testing';
import pg from 'pg';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
const repo = fileURLToPath(new URL('../..', import.meta.url));
let project: string;

beforeAll(async () => {
  project = await mkdtemp(join(tmpdir(), 'berth-dev-sig-'));
  await cp(join(repo, 'services/agent-runtime/test-projects/echo'), project, { recursive: true });
  // A graph whose module imports until the test creates `release`, and says when it begins and ends:
  // a signal meant for "while it loads" lands there however slow the machine is.
  await writeFile(
    join(project, 'src', 'slow.ts'),
    [
      "import { existsSync, writeFileSync } from 'node:fs';",
      "import { Annotation, StateGraph } from '@langchain/langgraph';",
      "writeFileSync(new URL('../loading', import.meta.url), '');",
      "while (!existsSync(new URL('../release', import.meta.url))) await new Promise((resolve) => setTimeout(resolve, 20));",
      'const State = Annotation.Root({ text: Annotation<string> });',
      "export const graph = new StateGraph(State).addNode('echo', (s) => s).addEdge('__start__', 'echo').compile();",
      "writeFileSync(new URL('../loaded', import.meta.url), '');",
      '',
    ].join('\n'),
  );
  const config = JSON.parse(await readFile(join(project, 'langgraph.json'), 'utf8')) as { graphs: Record<string, unknown> };
  config.graphs.slow = './src/slow.ts:graph';
  await writeFile(join(project, 'langgraph.json'), JSON.stringify(config, null, 2));
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'echo', type: 'module' }));
  await symlink(join(repo, 'node_modules'), join(project, 'node_modules'));
});
afterAll(async () => {
  await removeCluster();
  await rm(project, { recursive: true, force: true });
});

/** Deletes the cluster (as root it lives outside the project, linked from .berth/postgres). */
async function removeCluster(): Promise<void> {
  const link = join(project, '.berth', 'postgres');
  const cluster = await realpath(link).catch(() => undefined);
  if (cluster) await rm(cluster, { recursive: true, force: true });
  await rm(link, { recursive: true, force: true });
}

/** The project's folder, and its cluster's real folder (outside it as root). */
async function devFolders(): Promise<string[]> {
  return [project, await realpath(join(project, '.berth', 'postgres')).catch(() => join(project, '.berth', 'postgres'))];
}

/** A connection to the project's cluster holding its agent server's migration lock: the migrations wait on it. */
async function holdMigrations(): Promise<pg.Client> {
  const url = await new PostgresServer({ baseDir: join(project, '.berth', 'postgres') }).lastConnectionString();
  const client = new pg.Client({ connectionString: url });
  // The cluster stops with berth dev, under this connection.
  client.on('error', () => undefined);
  await client.connect();
  await client.query('SELECT pg_advisory_lock(hashtext($1))', ['berth.migrate.agent']);
  return client;
}

async function migrationsWaiting(client: pg.Client): Promise<boolean> {
  const { rows } = await client.query<{ waiting: number }>("SELECT count(*)::int AS waiting FROM pg_locks WHERE locktype = 'advisory' AND NOT granted");
  return rows[0]!.waiting > 0;
}

type Phase = 'at once' | 'Postgres starting' | 'the agent server loading the project' | 'its migrations';
const cases = (['at once', 'Postgres starting', 'the agent server loading the project', 'its migrations'] as Phase[]).flatMap((phase, index) =>
  (['SIGINT', 'SIGTERM', 'SIGHUP'] as const).map((signal, n) => ({ phase, signal, group: (index + n) % 2 === 0 })),
);

describe('berth dev stopped by a signal while it starts', () => {
  it.each(cases)(
    'leaves no process running: $signal during "$phase" (to its group: $group)',
    async ({ phase, signal, group }) => {
      for (const marker of ['loading', 'release', 'loaded']) await rm(join(project, marker), { force: true });
      // A new cluster: its initdb makes the phase long enough to be sure to land in it.
      if (phase === 'Postgres starting') await removeCluster();
      let held: pg.Client | undefined;
      const dev = spawn(process.execPath, [bin, 'dev', '--port', '0', '--no-trace'], {
        cwd: project,
        env: { ...process.env, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
        // A group of its own, as a terminal gives a command: a signal to the group reaches it and its children.
        detached: true,
      });
      let output = '';
      dev.stdout.on('data', (d) => (output += String(d)));
      dev.stderr.on('data', (d) => (output += String(d)));
      const exited = new Promise<void>((resolve) => dev.once('exit', () => resolve()));
      try {
        const reached: Record<Phase, () => Promise<boolean>> = {
          'at once': async () => true,
          'Postgres starting': async () => (await processesUsing(await devFolders())).some((p) => /\b(initdb|pg_ctl)\b/.test(p.command)),
          'the agent server loading the project': async () => existsSync(join(project, 'loading')),
          // Its cluster runs once the project loads: the lock is the test's before the loading ends.
          'its migrations': async () => {
            if (!held && existsSync(join(project, 'loading'))) {
              held = await holdMigrations();
              await writeFile(join(project, 'release'), '');
            }
            return held !== undefined && existsSync(join(project, 'loaded')) && (await migrationsWaiting(held));
          },
        };
        await until(
          `berth dev to reach "${phase}"`,
          async () => {
            if (dev.exitCode !== null) throw new Error(`berth dev ended before "${phase}":\n${output}`);
            return reached[phase]();
          },
          60_000,
          10,
        ).catch((error: Error) => {
          throw new Error(`${error.message}:\n${output}`, { cause: error });
        });
        expect(output).not.toContain('ready at');
        process.kill(group ? -dev.pid! : dev.pid!, signal);
        await held?.end().catch(() => undefined);
        await exited;
        expect(await processesUsing(await devFolders())).toEqual([]);
      } finally {
        // A case that failed must not leave its processes to the next.
        if (dev.exitCode === null && dev.signalCode === null) process.kill(-dev.pid!, 'SIGKILL');
        await held?.end().catch(() => undefined);
      }
    },
    90_000,
  );
});
