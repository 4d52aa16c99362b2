/**
 * Only a dead worker's runs move, from their last saved checkpoint, and the worker they moved
 * from can never write again (issue 24, defect 6). A worker process is killed mid-run: another
 * takes the run over promptly and executes only what was not saved (the node in progress, and
 * those after it). A worker process is frozen mid-run (SIGSTOP: alive, its sessions open, renewing
 * nothing): its run is left to it for the hold period, then taken over; when it wakes up its
 * writes are refused by the fence and it stops. Executions are counted by the graph in a file.
 *
 * The taker is in this process, on a lease clock the test moves (the workers it takes runs from
 * are child processes on the system clock): lease and hold pass without the test waiting for them.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ManualClock } from '@berth/clock';
import { captureLogger, createTestDatabase, testEnv, until, type TestDatabase } from '@berth/testing';
import pg from 'pg';
import { startAgentServer, type RunningAgentServer } from '../server.js';
import { durabilityProject, spawnAgentServer } from '../__tests__/fixtures.js';

// Both sides: 1 s leases (a dead worker's run moves within a few seconds), 2 s hold.
const LEASE = { leaseMs: 1000, leaseHoldMs: 2000 };
/** The taker's lease clock. */
const clock = new ManualClock(Date.now());

let db: TestDatabase;
let dir: string;
let taker: RunningAgentServer;
let sql: pg.Pool;
const logs = captureLogger('agent');

beforeAll(async () => {
  db = await createTestDatabase('agent_takeover');
  dir = await mkdtemp(join(testEnv('tmpDir'), 'takeover-'));
  sql = new pg.Pool({ connectionString: db.url });
}, 60_000);
afterAll(async () => {
  await taker?.close();
  await sql?.end();
  await db?.drop();
  await rm(dir, { recursive: true, force: true });
});

/** `<node> <pid>` of every execution of `tag`'s nodes, in order. */
async function executions(log: string, tag: string): Promise<string[]> {
  const text = await readFile(log, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${tag} `))
    .map((l) => l.slice(tag.length + 1));
}

async function startRun(url: string, tag: string, log: string): Promise<{ threadId: string; runId: string }> {
  const json = { 'content-type': 'application/json' };
  const thread = (await (await fetch(`${url}/threads`, { method: 'POST', headers: json, body: '{}' })).json()) as { thread_id: string };
  const response = await fetch(`${url}/threads/${thread.thread_id}/runs`, {
    method: 'POST',
    headers: json,
    // Each checkpoint is saved before the next node starts.
    body: JSON.stringify({ assistant_id: 'steps', input: { tag, log, delay_ms: 1500 }, durability: 'sync' }),
  });
  expect(response.status).toBe(200);
  return { threadId: thread.thread_id, runId: ((await response.json()) as { run_id: string }).run_id };
}

const runRow = async (runId: string) =>
  (await sql.query<{ status: string; attempt: number }>('SELECT status, attempt FROM agent.runs WHERE run_id = $1', [runId])).rows[0]!;
const leaseExpiry = async (runId: string) =>
  (await sql.query<{ lease_expires_at: Date }>('SELECT lease_expires_at FROM agent.runs WHERE run_id = $1', [runId])).rows[0]!.lease_expires_at.getTime();

/**
 * Moves the taker's clock, from the time the worker's leases were written by (the system's), a
 * quarter lease a probe until the taker has taken the run over; then leaves it where it is (the
 * taker's own lease does not expire while it executes the run).
 */
async function takenOver(runId: string): Promise<void> {
  await clock.advanceTo(Date.now());
  await until('the takeover', async () => {
    await clock.advance(LEASE.leaseMs / 4);
    return (await runRow(runId)).attempt === 2;
  });
}

async function ended(runId: string) {
  return until(
    'the run to end',
    async () => {
      const row = await runRow(runId);
      return row.status === 'running' || row.status === 'pending' ? undefined : row;
    },
    30_000,
  );
}

async function threadValues(threadId: string): Promise<{ trail: string[]; pids: number[] }> {
  return (await sql.query('SELECT "values" FROM agent.threads WHERE thread_id = $1', [threadId])).rows[0].values;
}

describe('a worker and a taker', () => {
  beforeAll(async () => {
    taker = await startAgentServer(
      { configPath: durabilityProject, databaseUrl: db.url, host: '127.0.0.1', port: 0, workers: 2, ...LEASE, clock },
      logs.logger,
    );
  }, 60_000);

  it("takes a killed worker's run over from its last checkpoint: the node in progress executes again, none before it", async () => {
    const worker = await spawnAgentServer(db.url, { configPath: durabilityProject, config: LEASE });
    const log = join(dir, 'killed.log');
    const { threadId, runId } = await startRun(worker.url, 'k', log);
    const pid = worker.child.pid!;
    // Node `one` is saved; `two` is executing.
    await until('node two to start', async () => ((await executions(log, 'k')).length === 2 ? true : undefined), 15_000);
    worker.child.kill('SIGKILL');
    await worker.stop();

    await takenOver(runId);
    expect(await ended(runId)).toEqual({ status: 'success', attempt: 2 });
    expect(await executions(log, 'k')).toEqual([`one ${pid}`, `two ${pid}`, `two ${process.pid}`, `three ${process.pid}`]);
    expect(await threadValues(threadId)).toMatchObject({ trail: ['one', 'two', 'three'], pids: [pid, process.pid, process.pid] });
  }, 60_000);

  it('leaves a frozen worker its run for the hold period, then takes it; the woken worker is fenced off and stops', async () => {
    const worker = await spawnAgentServer(db.url, { configPath: durabilityProject, config: LEASE, logLevel: 'warn' });
    const log = join(dir, 'frozen.log');
    const { threadId, runId } = await startRun(worker.url, 'f', log);
    const pid = worker.child.pid!;
    try {
      await until('node two to start', async () => ((await executions(log, 'f')).length === 2 ? true : undefined), 15_000);
      // process.kill, not child.kill: the test child would count as signalled and never be stopped.
      process.kill(pid, 'SIGSTOP');
      // Its lease as it left it (a renewal it sent before the freeze may still extend it).
      const frozenLeaseEnd = await leaseExpiry(runId);
      // Its liveness session is open: the taker waits out lease and hold before taking the run.
      await takenOver(runId);
      // The taker's claim (its lease runs a lease from it, by its clock) came once the frozen
      // worker's lease had run out and the hold had passed.
      expect((await leaseExpiry(runId)) - LEASE.leaseMs).toBeGreaterThanOrEqual(frozenLeaseEnd + LEASE.leaseHoldMs);
      // Woken while the taker executes the run: its node `two` ends, and its write is refused.
      process.kill(pid, 'SIGCONT');
      expect(await ended(runId)).toEqual({ status: 'success', attempt: 2 });
      // The taker's attempt wrote the end state; the woken worker wrote nothing and went no further.
      expect(await threadValues(threadId)).toMatchObject({ trail: ['one', 'two', 'three'], pids: [pid, process.pid, process.pid] });
      const { rows } = await sql.query<{ attempt: string | null; step: string }>(
        "SELECT metadata->>'run_attempt' AS attempt, metadata->>'step' AS step FROM agent.checkpoints WHERE thread_id = $1 AND checkpoint_ns = '' ORDER BY checkpoint_id",
        [threadId],
      );
      // Attempt 1 saved the input and node one; everything after is attempt 2's.
      expect(rows.filter((r) => r.attempt === '1').map((r) => r.step)).toEqual(['-1', '0', '1']);
      expect(rows.filter((r) => r.attempt === '2').length).toBeGreaterThan(0);
      // The woken worker learned it lost the run (its renewal or its checkpoint write was refused)
      // and executed nothing more.
      await worker.waitForOutput(/lease lost: stopping the run here|checkpoint writes of runs taken over were refused/, { timeoutMs: 10_000 });
      expect((await executions(log, 'f')).filter((e) => e.endsWith(` ${pid}`))).toEqual([`one ${pid}`, `two ${pid}`]);
    } finally {
      process.kill(pid, 'SIGCONT');
      await worker.stop();
    }
  }, 60_000);
});
