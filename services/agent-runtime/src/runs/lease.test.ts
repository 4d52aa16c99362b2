/**
 * A worker that loses a run's lease stops executing the run and says so, so the run is not
 * executed twice; a worker that merely cannot renew it for a while (the database is away) keeps
 * it and renews it afterwards. Real Postgres; the lease is taken or stalled in the database. (The
 * timing of a lease that cannot be renewed for longer than lease + hold: run-lease.test.ts.)
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import pg from 'pg';
import { captureLogger, createTestDatabase, type TestDatabase } from '@berth/testing';
import { startAgentServer, type RunningAgentServer } from '../server.js';
import { serverProject, sleep, until } from '../__tests__/fixtures.js';

// Long enough that a renewal answers in time on a busy machine (renewals go every third of it).
const LEASE_MS = 2000;
let db: TestDatabase;
let server: RunningAgentServer;
let sql: pg.Pool;
const logs = captureLogger('agent');

beforeAll(async () => {
  db = await createTestDatabase('agent_lease');
  server = await startAgentServer({ configPath: serverProject, databaseUrl: db.url, host: '127.0.0.1', port: 0, workers: 2, leaseMs: LEASE_MS }, logs.logger);
  sql = new pg.Pool({ connectionString: db.url });
}, 60_000);
afterAll(async () => {
  await server?.close();
  await sql?.end();
  await db?.drop();
});

interface RunRow {
  status: string;
  attempt: number;
  lease_owner: string | null;
}
const runRow = async (runId: string) => (await sql.query<RunRow>('SELECT status, attempt, lease_owner FROM agent.runs WHERE run_id = $1', [runId])).rows[0]!;
const leaseLost = (runId: string) => logs.lines().filter((l) => l.runId === runId && String(l.msg).startsWith('lease lost'));

/** Starts a run of the `slow` graph (its node waits `delayMs`, honouring the abort signal) and waits until it runs. */
async function startSlowRun(delayMs: number): Promise<string> {
  const json = { 'content-type': 'application/json' };
  const thread = (await (await fetch(`${server.url}/threads`, { method: 'POST', headers: json, body: '{}' })).json()) as { thread_id: string };
  const response = await fetch(`${server.url}/threads/${thread.thread_id}/runs`, {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ assistant_id: 'slow', input: {}, context: { delay_ms: delayMs } }),
  });
  expect(response.status).toBe(200);
  const { run_id } = (await response.json()) as { run_id: string };
  expect(
    (
      await until(
        () => runRow(run_id),
        (r) => r.status === 'running',
      )
    ).status,
  ).toBe('running');
  return run_id;
}

it('stops a run whose lease another worker took, logs `lease lost`, and leaves the run to that worker', async () => {
  const runId = await startSlowRun(2500);
  const worker = (await runRow(runId)).lease_owner;
  await sql.query("UPDATE agent.runs SET lease_owner = 'thief', lease_expires_at = now() + interval '1 hour' WHERE run_id = $1", [runId]);
  const stolenAt = Date.now();

  const [line] = await until(
    async () => leaseLost(runId),
    (l) => l.length > 0,
    5_000,
  );
  expect(line).toMatchObject({ level: 50, reason: 'taken', owner: worker });
  expect(Date.now() - stolenAt).toBeLessThan(LEASE_MS);
  // Past the graph's own end, the worker has neither finished nor touched the run: the thief holds it.
  await sleep(3000);
  expect(await runRow(runId)).toEqual({ status: 'running', attempt: 1, lease_owner: 'thief' });

  // The thief dies: its lease runs out, a worker takes the run over and completes it, once.
  await sql.query("UPDATE agent.runs SET lease_expires_at = now() - interval '1 second' WHERE run_id = $1", [runId]);
  const done = await until(
    () => runRow(runId),
    (r) => r.status === 'success',
    15_000,
  );
  expect(done).toEqual({ status: 'success', attempt: 2, lease_owner: null });
  expect(leaseLost(runId)).toHaveLength(1);
}, 30_000);

it('keeps a run whose lease it cannot renew for longer than the lease, and renews it once the database answers', async () => {
  const runId = await startSlowRun(4000);
  // The run's row is locked (as by a stalled transaction): renewals wait, and are cut off as a
  // broken connection would fail them, for one and a half leases.
  const locker = await sql.connect();
  const stalledAt = Date.now();
  try {
    await locker.query('BEGIN');
    await locker.query('SELECT 1 FROM agent.runs WHERE run_id = $1 FOR UPDATE', [runId]);
    await until(
      async () => {
        await sql.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE runs SET lease_expires_at%'`,
        );
        return Date.now() - stalledAt;
      },
      (ms) => ms > LEASE_MS * 1.5,
      10_000,
    );
  } finally {
    await locker.query('ROLLBACK');
    locker.release();
  }
  const failures = logs.lines().filter((l) => l.runId === runId && String(l.msg).startsWith('run lease renewal failed'));
  expect(failures[0]).toMatchObject({ level: 40, err: { message: expect.stringMatching(/terminat/) } });
  await until(
    async () => logs.lines().filter((l) => l.runId === runId && l.msg === 'run lease renewed again'),
    (l) => l.length > 0,
    5_000,
  );

  // The run went on and completes on its first attempt; nothing was lost or taken over.
  const done = await until(
    () => runRow(runId),
    (r) => r.status === 'success',
    15_000,
  );
  expect(done).toEqual({ status: 'success', attempt: 1, lease_owner: null });
  expect(leaseLost(runId)).toHaveLength(0);
}, 30_000);
