/**
 * RunStore.create's claim (migrations/0003): a run that may start at once is created running for
 * the worker that asked, in the same statement; anything else is created pending as before.
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createPool, migrate } from '@berth/db';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type pg from 'pg';
import { AssistantStore } from './assistants.js';
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
    expect(await runs.claim(run.run_id, 'worker-b', 5000)).toBeUndefined();

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
