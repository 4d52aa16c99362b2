/**
 * RunStore.create's claim (migrations/0003): a run that may start at once is created running for
 * the worker that asked, in the same statement; anything else is created pending as before. And
 * the lease rules (@berth/lease, migration 0008) in SQL: who may take a run over, and the fence
 * that refuses an attempt's writes once another attempt holds the run.
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createPool, migrate } from '@berth/db';
import { silentLogger } from '@berth/log';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import type pg from 'pg';
import { ManualClock } from '@berth/clock';
import { OwnerLiveness } from '@berth/lease';
import { AssistantStore } from './assistants.js';
import { FENCE_KEY, RunFencedError } from './checkpoint-batch.js';
import { BerthPostgresSaver } from './checkpointer.js';
import { RunStore, type CreateRun } from './runs.js';
import { ThreadStore } from './threads.js';

const SCHEMA = 'runs_test';
let db: TestDatabase;
let pool: pg.Pool;
let runs: RunStore;
let threads: ThreadStore;
const assistantId = randomUUID();

beforeAll(async () => {
  db = await createTestDatabase('runs');
  await migrate({ connectionString: db.url, schema: SCHEMA, directory: fileURLToPath(new URL('../../migrations', import.meta.url)) });
  pool = createPool({ connectionString: db.url, schema: SCHEMA });
  await new BerthPostgresSaver(pool, SCHEMA).setup();
  await new AssistantStore(pool).ensureSystem(assistantId, 'echo');
  runs = new RunStore(pool);
  threads = new ThreadStore(pool);
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

async function newRun(threadId: string, extra: Partial<CreateRun> = {}) {
  return runs.create({
    run_id: randomUUID(),
    thread_id: threadId,
    assistant_id: assistantId,
    graph_id: 'echo',
    metadata: {},
    kwargs: { stream_mode: ['values'], stream_subgraphs: false, stream_resumable: false, temporary: false },
    multitask_strategy: 'enqueue',
    after_seconds: 0,
    claimFor: { owner: 'worker-a', leaseMs: 5000 },
    ...extra,
  });
}

async function row(runId: string) {
  const { rows } = await pool.query('SELECT status, attempt, lease_owner, lease_expires_at > now() AS leased, started FROM runs WHERE run_id = $1', [runId]);
  return rows[0];
}

describe('RunStore.create with claimFor', () => {
  it('creates a run on an idle thread running for the asking worker, with its assistant', async () => {
    const threadId = randomUUID();
    await threads.create({ thread_id: threadId, metadata: {}, if_exists: 'raise' });
    const { run, claimed } = await newRun(threadId);
    expect(claimed?.run.run_id).toBe(run.run_id);
    expect(claimed?.assistant).toMatchObject({ assistant_id: assistantId, graph_id: 'echo' });
    expect(claimed?.assistant?.created_at).toBeInstanceOf(Date);
    expect(await row(run.run_id)).toEqual({ status: 'running', attempt: 1, lease_owner: 'worker-a', leased: true, started: true });
    // A worker that claims it again (a duplicate dispatch) gets nothing: it is held.
    expect(await runs.claim(run.run_id, 'worker-b', 5000, { allowed: true, holdMs: 0 })).toBeUndefined();

    // The thread is busy now: the next run waits its turn, unclaimed.
    const second = await newRun(threadId);
    expect(second.claimed).toBeUndefined();
    expect(await row(second.run.run_id)).toMatchObject({ status: 'pending', attempt: 0, lease_owner: null, started: false });
  });

  it('leaves delayed runs and runs without claimFor pending', async () => {
    for (const extra of [{ after_seconds: 60 }, { claimFor: undefined }] as Partial<CreateRun>[]) {
      const threadId = randomUUID();
      await threads.create({ thread_id: threadId, metadata: {}, if_exists: 'raise' });
      const { run, claimed } = await newRun(threadId, extra);
      expect(claimed).toBeUndefined();
      expect(await row(run.run_id)).toMatchObject({ status: 'pending', lease_owner: null });
    }
  });
});

describe("a run's end and the next run's creation on its thread", () => {
  /** Sessions of this database waiting for a lock (the thread's row, in these tests). */
  const waitingForLocks = (n: number) =>
    until(
      `${n} sessions waiting for the thread's row`,
      async () => {
        const { rows } = await pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        );
        return rows[0]!.n === n;
      },
      10_000,
      10,
    );
  const lockThread = async (client: pg.PoolClient, threadId: string) => {
    await client.query('BEGIN');
    return client.query('SELECT 1 FROM threads WHERE thread_id = $1 FOR UPDATE', [threadId]);
  };

  // CI once saw the second of two runs created back to back on a thread start only when a
  // worker's sweeper found it (thread-lifecycle.test.ts). The interleaving, driven by hand:
  // the next run is created while the first one ends, and its creator's own dispatch comes
  // after that creation committed but before the end did.
  it('hands the thread on to a run created while the previous run ended, which its creator could not start', async () => {
    const threadId = randomUUID();
    await threads.create({ thread_id: threadId, metadata: {}, if_exists: 'raise' });
    const first = await newRun(threadId);
    expect(first.claimed).toBeDefined();

    // `holder` holds the thread's row, so that the creation, `gate` and the end queue on it in that
    // order (Postgres grants a row's waiters in turn): once the creation has committed, `gate` holds
    // the row while the end still waits — the moment in which the creator dispatches its run.
    const holder = await pool.connect();
    const gate = await pool.connect();
    try {
      await lockThread(holder, threadId);
      const secondId = randomUUID();
      const creating = newRun(threadId, { run_id: secondId });
      await waitingForLocks(1);
      const gated = lockThread(gate, threadId);
      await waitingForLocks(2);
      const ending = runs.complete({
        runId: first.run.run_id,
        owner: 'worker-a',
        attempt: 1,
        status: 'success',
        output: null,
        failed: false,
        interrupted: false,
        error: null,
      });
      await waitingForLocks(3);
      await holder.query('COMMIT');

      // Created while the first run was still running: pending, not claimed by its creator...
      const second = await creating;
      expect(second.claimed).toBeUndefined();
      await gated;
      // ...whose dispatch finds the first run still running, and leaves the second to that run's end.
      expect(await runs.claim(secondId, 'worker-b', 5000)).toBeUndefined();
      await gate.query('COMMIT');

      // The end hands the thread on (its worker dispatches the second run, no sweep needed), and
      // the thread stays busy (the end used to mark it idle, a run pending on it).
      expect(await ending).toEqual({ finished: true, nextRunId: secondId });
      expect((await threads.get(threadId)).status).toBe('busy');
      expect((await runs.claim(secondId, 'worker-b', 5000))?.run.run_id).toBe(secondId);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await gate.query('ROLLBACK').catch(() => undefined);
      holder.release();
      gate.release();
    }
  });

  // Cancelling a thread's only pending run marks the thread idle; a run created on the thread at
  // that moment must keep it busy (the check and the mark used to be two steps with a gap).
  it('keeps a thread busy when a run is created on it while its cancelled run leaves it', async () => {
    const threadId = randomUUID();
    await threads.create({ thread_id: threadId, metadata: {}, if_exists: 'raise' });
    const { run } = await newRun(threadId, { claimFor: undefined });
    expect(await runs.cancelPending(run.run_id, 'interrupt')).toBe(true);

    const holder = await pool.connect();
    try {
      await lockThread(holder, threadId);
      const creating = newRun(threadId, { claimFor: undefined });
      await waitingForLocks(1);
      const idling = threads.idleWhenNoRuns(threadId);
      await waitingForLocks(2);
      await holder.query('COMMIT');
      const created = await creating;
      expect(await idling).toBe(false);
      expect((await threads.get(threadId)).status).toBe('busy');
      expect((await runs.nextOnThread(threadId))?.run_id).toBe(created.run.run_id);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
    // With no run left, the thread is idle.
    await runs.cancelPending((await runs.nextOnThread(threadId))!.run_id, 'interrupt');
    expect(await threads.idleWhenNoRuns(threadId)).toBe(true);
    expect((await threads.get(threadId)).status).toBe('idle');
  });
});

describe('leases: takeover and fencing', () => {
  const expire = (runId: string, secondsAgo = 1) =>
    pool.query('UPDATE runs SET lease_expires_at = now() - make_interval(secs => $2) WHERE run_id = $1', [runId, secondsAgo]);
  const takeover = (holdMs: number) => ({ allowed: true, holdMs });

  async function runHeldBy(owner: string) {
    const threadId = randomUUID();
    await threads.create({ thread_id: threadId, metadata: {}, if_exists: 'raise' });
    const { run } = await newRun(threadId, { claimFor: { owner, leaseMs: 5000 } });
    return { threadId, runId: run.run_id };
  }

  it('refuses every write of an attempt once another attempt took the run over: renewal, checkpoint, end', async () => {
    const { threadId, runId } = await runHeldBy('worker-old');
    await expire(runId);
    // worker-old has no liveness session: it is dead, the run is taken at once.
    const taken = await runs.claim(runId, 'worker-new', 5000, takeover(60_000));
    expect(taken?.run.attempt).toBe(2);

    expect(await runs.heartbeat(runId, 'worker-old', 1, 5000)).toEqual({ held: false });
    const saver = new BerthPostgresSaver(pool, SCHEMA);
    const fenced = (attempt: number) => ({ configurable: { thread_id: threadId, checkpoint_ns: '', [FENCE_KEY]: { runId, attempt } } });
    const checkpoint = (step: number) => ({ ...emptyCheckpoint(), id: uuid6(step), channel_values: { step }, channel_versions: { step: step + 1 } });
    await expect(saver.put(fenced(1), checkpoint(0), { source: 'loop', step: 0, parents: {} }, { step: 1 })).rejects.toBeInstanceOf(RunFencedError);
    await expect(saver.putWrites({ configurable: { ...fenced(1).configurable, checkpoint_id: 'x' } }, [['step', 1]], 'task')).rejects.toBeInstanceOf(
      RunFencedError,
    );
    const rows = async () =>
      (
        await pool.query(
          'SELECT (SELECT count(*) FROM checkpoints WHERE thread_id = $1)::int + (SELECT count(*) FROM checkpoint_writes WHERE thread_id = $1)::int + (SELECT count(*) FROM checkpoint_blobs WHERE thread_id = $1)::int AS n',
          [threadId],
        )
      ).rows[0].n;
    expect(await rows()).toBe(0);
    // The new attempt writes.
    await saver.put(fenced(2), checkpoint(0), { source: 'loop', step: 0, parents: {} }, { step: 1 });
    expect(await rows()).toBe(2);

    const ending = { runId, status: 'success' as const, output: null, failed: false, interrupted: false, error: null };
    expect(await runs.complete({ ...ending, owner: 'worker-old', attempt: 1 })).toEqual({ finished: false });
    expect((await runs.complete({ ...ending, owner: 'worker-new', attempt: 2 })).finished).toBe(true);
  });

  it("leaves a live owner's expired run alone for the hold period, and takes a dead owner's at once", async () => {
    const liveness = new OwnerLiveness({ connectionString: db.url, owner: 'worker-live', applicationName: 'runs-test-liveness', log: silentLogger() });
    await liveness.start();
    try {
      const live = await runHeldBy('worker-live');
      const dead = await runHeldBy('worker-gone');
      await expire(live.runId, 2);
      await expire(dead.runId, 2);
      expect(await runs.orphaned(takeover(10_000))).toEqual(expect.not.arrayContaining([live.runId]));
      expect(await runs.orphaned(takeover(10_000))).toEqual(expect.arrayContaining([dead.runId]));
      expect(await runs.claim(live.runId, 'worker-b', 5000, takeover(10_000))).toBeUndefined();
      expect((await runs.claim(dead.runId, 'worker-b', 5000, takeover(10_000)))?.run.attempt).toBe(2);
      // Past the hold, a live owner that renews nothing loses the run too.
      expect((await runs.claim(live.runId, 'worker-b', 5000, takeover(1000)))?.run.attempt).toBe(2);
    } finally {
      liveness.close();
    }
  });

  it('takes nothing over for a worker not yet allowed to', async () => {
    const { runId } = await runHeldBy('worker-gone-too');
    await expire(runId);
    expect(await runs.claim(runId, 'worker-b', 5000, { allowed: false, holdMs: 0 })).toBeUndefined();
    expect(await runs.orphaned({ allowed: false, holdMs: 0 })).not.toContain(runId);
  });
});

describe('OwnerLiveness', () => {
  const alive = async (owner: string) => (await pool.query<{ alive: boolean }>('SELECT lease_owner_alive($1) AS alive', [owner])).rows[0]!.alive;

  it('holds its lock while its session lasts, allows takeovers only after the grace, and reconnects', async () => {
    const clock = new ManualClock();
    const liveness = new OwnerLiveness({ connectionString: db.url, owner: 'worker-probe', applicationName: 'runs-test-liveness', log: silentLogger(), clock });
    await liveness.start();
    try {
      expect(await alive('worker-probe')).toBe(true);
      expect(await alive('worker-other')).toBe(false);
      expect(liveness.mayTakeOver(5000)).toBe(false);
      await clock.advance(5000);
      expect(liveness.mayTakeOver(5000)).toBe(true);

      // Its session ends (as in a restart of Postgres): the lock is gone at once, and the worker
      // takes nothing over until it has been back for the grace.
      await pool.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', ['runs-test-liveness']);
      await until('the lock to go with the session', async () => ((await alive('worker-probe')) ? undefined : true), 5000);
      await clock.advance(1000); // the probe finds the session gone
      expect(liveness.mayTakeOver(5000)).toBe(false);
      await until(
        'the lock to be held again',
        async () => {
          await clock.advance(1000);
          return (await alive('worker-probe')) ? true : undefined;
        },
        10_000,
      );
      expect(liveness.mayTakeOver(5000)).toBe(false);
      await clock.advance(5000);
      expect(liveness.mayTakeOver(5000)).toBe(true);
    } finally {
      liveness.close();
    }
    await until('the lock to be released', async () => ((await alive('worker-probe')) ? undefined : true), 5000);
  });
});
