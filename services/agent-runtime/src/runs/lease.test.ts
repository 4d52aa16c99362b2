/**
 * A worker that loses a run's lease stops executing the run and says so, so the run is not
 * executed twice; a worker that merely cannot renew it for a while (the database is away) keeps
 * it and renews it afterwards. Real Postgres; the lease is taken or stalled in the database, and
 * the server's lease clock is moved by hand: renewals, sweeps and expiry happen only as the test
 * moves it. (The timing of a lease that cannot be renewed for longer than lease + hold:
 * run-lease.test.ts.)
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { Client } from '@langchain/langgraph-sdk';
import pg from 'pg';
import { ManualClock } from '@berth/clock';
import { captureLogger, createTestDatabase, type TestDatabase } from '@berth/testing';
import { startAgentServer, type RunningAgentServer } from '../server.js';
import { human, lastText, serverProject, until } from '../__tests__/fixtures.js';

const LEASE_MS = 2000;
/** A run's lease is renewed every third of it. */
const RENEW_MS = Math.floor(LEASE_MS / 3);
const clock = new ManualClock(Date.now());
let db: TestDatabase;
let server: RunningAgentServer;
let client: Client;
let sql: pg.Pool;
const logs = captureLogger('agent');

beforeAll(async () => {
  db = await createTestDatabase('agent_lease');
  // One run slot: a run of another thread starts only once the slot's run has stopped.
  server = await startAgentServer(
    { configPath: serverProject, databaseUrl: db.url, host: '127.0.0.1', port: 0, workers: 1, leaseMs: LEASE_MS, clock },
    logs.logger,
  );
  client = new Client({ apiUrl: server.url });
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

/**
 * Starts a run of the `slow` graph waiting an hour (honouring the abort signal), and waits until
 * its graph executes (a checkpoint of it is saved), so its worker holds the lease and renews it.
 */
async function startSlowRun(): Promise<{ threadId: string; runId: string }> {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, 'slow', { input: {}, context: { delay_ms: 3_600_000 } });
  await until(
    async () => (await sql.query('SELECT 1 FROM agent.checkpoints WHERE thread_id = $1', [thread.thread_id])).rowCount,
    (n) => n !== null && n > 0,
  );
  expect(await runRow(run.run_id)).toMatchObject({ status: 'running', attempt: 1 });
  return { threadId: thread.thread_id, runId: run.run_id };
}

it('stops a run whose lease another worker took at its next renewal, logs `lease lost`, and leaves the run to that worker', async () => {
  const { threadId, runId } = await startSlowRun();
  const worker = (await runRow(runId)).lease_owner;
  await sql.query("UPDATE agent.runs SET lease_owner = 'thief', lease_expires_at = $2 WHERE run_id = $1", [runId, new Date(clock.now() + 3_600_000)]);

  // The next renewal, a third of a lease later by the clock, finds the run taken.
  await clock.advance(RENEW_MS);
  const [line] = await until(
    async () => leaseLost(runId),
    (l) => l.length > 0,
  );
  expect(line).toMatchObject({ level: 50, reason: 'taken', owner: worker });
  // Its hour-long graph stopped: the worker's only slot takes a run of another thread, and the
  // stopped run's worker, done with it, wrote nothing of it: the thief holds it.
  const other = await client.threads.create();
  expect(lastText(await client.runs.wait(other.thread_id, 'echo', { input: human('next') }))).toBe('echo: next');
  expect(await runRow(runId)).toEqual({ status: 'running', attempt: 1, lease_owner: 'thief' });

  // The thief dies (no liveness session): once its lease has run out, the worker's next sweep
  // takes the run over (past its own takeover grace of a lease, by the clock).
  await sql.query('UPDATE agent.runs SET lease_expires_at = $2 WHERE run_id = $1', [runId, new Date(clock.now() - 1)]);
  await clock.advance(LEASE_MS);
  expect(
    await until(
      () => runRow(runId),
      (r) => r.attempt === 2,
    ),
  ).toEqual({ status: 'running', attempt: 2, lease_owner: worker });
  // The taken-over run executes its hour-long wait again; cancelled, it ends there, once.
  await client.runs.cancel(threadId, runId, true);
  expect(await runRow(runId)).toEqual({ status: 'interrupted', attempt: 2, lease_owner: null });
  expect(leaseLost(runId)).toHaveLength(1);
});

it('keeps a run whose lease it cannot renew for longer than the lease, and renews it once the database answers', async () => {
  const { threadId, runId } = await startSlowRun();
  const worker = (await runRow(runId)).lease_owner;
  // The run's row is locked (as by a stalled transaction): the next renewal waits for it, past
  // one and a half leases by the clock (the renewals due meanwhile are not doubled), and is cut
  // off as a broken connection would fail it.
  const locker = await sql.connect();
  try {
    await locker.query('BEGIN');
    await locker.query('SELECT 1 FROM agent.runs WHERE run_id = $1 FOR UPDATE', [runId]);
    await clock.advance(RENEW_MS);
    const waiting = async () =>
      (
        await sql.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE runs SET lease_expires_at%'`,
        )
      ).rows;
    const [renewal] = await until(waiting, (rows) => rows.length === 1);
    await clock.advance(LEASE_MS * 1.5);
    await sql.query('SELECT pg_terminate_backend($1)', [renewal!.pid]);
    const [failure] = await until(
      async () => logs.lines().filter((l) => l.runId === runId && String(l.msg).startsWith('run lease renewal failed')),
      (l) => l.length > 0,
    );
    expect(failure).toMatchObject({ level: 40, err: { message: expect.stringMatching(/terminat/) } });
  } finally {
    await locker.query('ROLLBACK');
    locker.release();
  }
  // The next renewal goes through: the lease went unconfirmed for longer than a lease and a half.
  await clock.advance(RENEW_MS);
  const [renewed] = await until(
    async () => logs.lines().filter((l) => l.runId === runId && l.msg === 'run lease renewed again'),
    (l) => l.length > 0,
  );
  expect(renewed!.unconfirmedMs as number).toBeGreaterThan(LEASE_MS * 1.5);

  // The run went on, on its first attempt; nothing was lost or taken over.
  expect(await runRow(runId)).toEqual({ status: 'running', attempt: 1, lease_owner: worker });
  await client.runs.cancel(threadId, runId, true);
  expect(await runRow(runId)).toEqual({ status: 'interrupted', attempt: 1, lease_owner: null });
  expect(leaseLost(runId)).toHaveLength(0);
});
