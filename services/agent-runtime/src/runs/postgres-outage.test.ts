/**
 * Postgres goes away for 20 s under two agent servers executing 40 runs (issue 24, defect 6). The
 * workers never die, so they keep their runs: they go on executing, keep the checkpoints, events
 * and ends their runs produce, write them once Postgres is back and renew their leases before the
 * other server may take anything over. Every node of every run executes exactly once — counted by
 * the graph itself in a file, outside Postgres — and every run succeeds on its first attempt.
 *
 * The 20 s pass on the servers' lease clock, which the test moves: the leases expire and the
 * renewals due meanwhile fail, without the test waiting for them. The graphs and the writes that
 * wait for the database go on in real time.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ManualClock } from '@berth/clock';
import { freePort, PostgresServer } from '@berth/local-stack';
import { captureLogger, testEnv, until } from '@berth/testing';
import pg from 'pg';
import { startAgentServer, type RunningAgentServer } from '../server.js';
import { durabilityProject } from '../__tests__/fixtures.js';

const RUNS = 40;
const NODES = ['one', 'two', 'three'];
/** Both servers' lease clock (renewals, sweeps, liveness probes, lease expiry). */
const clock = new ManualClock(Date.now());

let dir: string;
let postgres: PostgresServer;
const servers: RunningAgentServer[] = [];
const logs = captureLogger('agent');

beforeAll(async () => {
  dir = await mkdtemp(join(testEnv('tmpDir'), 'pg-outage-'));
  postgres = new PostgresServer({ baseDir: join(dir, 'postgres'), port: await freePort(), mode: 'fast' });
  await postgres.start();
  // The production lease settings (5 s lease, 60 s hold): an outage of 20 s outlasts the lease.
  for (let i = 0; i < 2; i++) {
    servers.push(
      await startAgentServer(
        { configPath: durabilityProject, databaseUrl: postgres.connectionString, host: '127.0.0.1', port: 0, workers: RUNS / 2, clock },
        logs.logger,
      ),
    );
  }
}, 120_000);
afterAll(async () => {
  for (const server of servers) await server.close();
  await postgres?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function post<T>(url: string, body: unknown): Promise<T> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(response.status).toBe(200);
  return (await response.json()) as T;
}

/** The executions the graph recorded, as `<tag> <node>` → how many times. */
async function executions(log: string): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  const text = await readFile(log, 'utf8').catch(() => '');
  for (const line of text.split('\n').filter(Boolean)) {
    const [tag, node] = line.split(' ');
    counts.set(`${tag} ${node}`, (counts.get(`${tag} ${node}`) ?? 0) + 1);
  }
  return counts;
}

it('executes every node of every run once through a 20 s outage of Postgres', async () => {
  const log = join(dir, 'executions.log');
  const runs: { threadId: string; runId: string; tag: string }[] = [];
  for (let i = 0; i < RUNS; i++) {
    const server = servers[i % 2]!;
    const tag = `run${i}`;
    const thread = await post<{ thread_id: string }>(`${server.url}/threads`, {});
    // Half write every checkpoint before going on (sync), half write behind (async, the default).
    const run = await post<{ run_id: string }>(`${server.url}/threads/${thread.thread_id}/runs`, {
      assistant_id: 'steps',
      input: { tag, log, delay_ms: 2000 },
      ...(i % 4 < 2 ? { durability: 'sync' } : {}),
    });
    runs.push({ threadId: thread.thread_id, runId: run.run_id, tag });
  }
  // Every run is in its first node (or past it): Postgres goes away under them.
  await until('every run to start', async () => ((await executions(log)).size >= RUNS ? true : undefined), 30_000);
  await postgres.stop();
  const said = (msg: string) => logs.lines().some((l) => l.msg === msg);
  // The graphs go on: a node that ends saves its checkpoint, which waits for the database.
  await until('a checkpoint write to wait for the database', async () => said('checkpoint write failed: the database is unreachable') || undefined, 30_000);
  // 20 s pass by the lease clock, four leases: every renewal and liveness probe due meanwhile fails.
  for (let second = 0; second < 20; second++) await clock.advance(1000);
  await until(
    'a lease renewal to fail',
    async () => said('run lease renewal failed: the run goes on, and the lease is renewed once the database answers') || undefined,
    30_000,
  );
  await postgres.start();

  const sql = new pg.Pool({ connectionString: postgres.connectionString });
  try {
    const ended = await until(
      'every run to end',
      async () => {
        // Time goes on by the clock too, half a second a probe: the workers reconnect, renew their
        // leases and sweep, as they would as real time passes.
        await clock.advance(500);
        const { rows } = await sql.query<{ run_id: string; status: string; attempt: number }>(
          'SELECT run_id::text, status, attempt FROM agent.runs WHERE run_id = ANY($1::uuid[])',
          [runs.map((r) => r.runId)],
        );
        return rows.every((r) => r.status !== 'pending' && r.status !== 'running') ? rows : undefined;
      },
      90_000,
      500,
    );
    expect(ended.filter((r) => r.status !== 'success' || r.attempt !== 1)).toEqual([]);
    const counts = await executions(log);
    const twice = [...counts].filter(([, n]) => n !== 1);
    expect(twice).toEqual([]);
    expect(counts.size).toBe(RUNS * NODES.length);
    // The thread states hold each node once.
    const { rows } = await sql.query<{ trail: string[] }>(`SELECT "values"->'trail' AS trail FROM agent.threads WHERE thread_id = ANY($1::uuid[])`, [
      runs.map((r) => r.threadId),
    ]);
    expect(rows.map((r) => r.trail)).toEqual(runs.map(() => NODES));
  } finally {
    await sql.end();
  }
  // The workers said what happened: renewals failed, and succeeded again.
  const messages = new Set(logs.lines().map((l) => l.msg));
  expect(messages).toContain('run lease renewed again');
  expect(messages).toContain('checkpoint write succeeded after the database came back');
  expect(logs.lines().filter((l) => String(l.msg).startsWith('lease lost'))).toEqual([]);
}, 240_000);
