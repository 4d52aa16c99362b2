/**
 * BerthPostgresSaver against real Postgres: batched writes, write-behind for async-durability runs
 * (reads and flushThread see them; a failed write surfaces), commit-before-resolve otherwise.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { emptyCheckpoint, uuid6, type Checkpoint } from '@langchain/langgraph-checkpoint';
import { createPool } from '@berth/db';
import { captureLogger, createTestDatabase, until, type TestDatabase } from '@berth/testing';
import type pg from 'pg';
import { BerthPostgresSaver } from './checkpointer.js';

const SCHEMA = 'cp_test';
let db: TestDatabase;
let pool: pg.Pool;
let lazyPool: pg.Pool;
let other: pg.Pool;
/** Statements the saver sent (through either pool). */
let statements = 0;

beforeAll(async () => {
  db = await createTestDatabase('checkpointer');
  other = createPool({ connectionString: db.url, schema: 'public' });
  await other.query(`CREATE SCHEMA ${SCHEMA}`);
  pool = createPool({ connectionString: db.url, schema: SCHEMA });
  lazyPool = createPool({ connectionString: db.url, schema: SCHEMA, synchronousCommit: false });
  for (const p of [pool, lazyPool]) {
    const query = p.query.bind(p) as (...args: unknown[]) => unknown;
    (p as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      statements += 1;
      return query(...args);
    };
  }
  await new BerthPostgresSaver(pool, SCHEMA).setup();
}, 60_000);
afterAll(async () => {
  await Promise.all([pool?.end(), lazyPool?.end(), other?.end()]);
  await db?.drop();
});

function checkpoint(step: number): Checkpoint {
  const c = emptyCheckpoint();
  return { ...c, id: uuid6(step), channel_values: { step }, channel_versions: { step: step + 1 } };
}

const config = (threadId: string, checkpointId?: string) => ({
  configurable: { thread_id: threadId, checkpoint_ns: '', ...(checkpointId ? { checkpoint_id: checkpointId } : {}) },
});
const meta = (step: number) => ({ source: 'loop' as const, step, parents: {} });

async function savedSteps(threadId: string): Promise<number> {
  const { rows } = await other.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.checkpoints WHERE thread_id = $1`, [threadId]);
  return rows[0].n as number;
}

describe('BerthPostgresSaver', () => {
  it('a write outside an async run resolves once committed', async () => {
    const saver = new BerthPostgresSaver(pool, SCHEMA, lazyPool);
    await saver.put(config('t-sync'), checkpoint(0), meta(0), { step: 1 });
    expect(await savedSteps('t-sync')).toBe(1);
  });

  it('an async-durability run writes behind in one statement, readable by the run, saved by flushThread', async () => {
    const saver = new BerthPostgresSaver(pool, SCHEMA, lazyPool, { lazyDelayMs: 60_000 });
    const release = saver.runDurability('t-async', 'async');
    const before = statements;
    let parent: string | undefined;
    for (let step = 0; step < 5; step++) {
      const c = checkpoint(step);
      await saver.put(config('t-async', parent), c, meta(step), { step: step + 1 });
      await saver.putWrites(config('t-async', c.id), [['step', step]], `task-${step}`);
      parent = c.id;
    }
    // Resolved without a round trip each: nothing has been sent yet (the delay is a minute).
    expect(statements).toBe(before);
    expect(await savedSteps('t-async')).toBe(0);
    // A read of the thread waits for its queued writes.
    const latest = await saver.getTuple(config('t-async'));
    expect(latest?.checkpoint.channel_values).toEqual({ step: 4 });
    expect(latest?.pendingWrites).toEqual([['task-4', 'step', 4]]);
    expect(await savedSteps('t-async')).toBe(5);
    await saver.flushThread('t-async');
    release();
    expect(statements - before).toBe(2); // the batch, then the read
  });

  it('flushThread sends queued writes at once and surfaces a failed one', async () => {
    const saver = new BerthPostgresSaver(pool, SCHEMA, lazyPool, { lazyDelayMs: 60_000 });
    const release = saver.runDurability('t-bad\u0000', 'async');
    // Postgres refuses NUL in text: the statement fails after `put` already resolved.
    await saver.put(config('t-bad\u0000'), checkpoint(0), meta(0), { step: 1 });
    await expect(saver.flushThread('t-bad\u0000')).rejects.toThrow();
    release();

    const good = new BerthPostgresSaver(pool, SCHEMA, lazyPool, { lazyDelayMs: 60_000 });
    const done = good.runDurability('t-flush', 'async');
    await good.put(config('t-flush'), checkpoint(0), meta(0), { step: 1 });
    await good.flushThread('t-flush');
    done();
    expect(await savedSteps('t-flush')).toBe(1);
  });

  it('queued writes leave by themselves after the delay', async () => {
    const saver = new BerthPostgresSaver(pool, SCHEMA, lazyPool, { lazyDelayMs: 20 });
    const release = saver.runDurability('t-timer', 'async');
    await saver.put(config('t-timer'), checkpoint(0), meta(0), { step: 1 });
    await until('the queued write to leave', async () => ((await savedSteps('t-timer')) > 0 ? true : undefined), 5_000, 10);
    release();
    expect(await savedSteps('t-timer')).toBe(1);
  });

  it('answers the first read of a thread primed as empty without a query, and only that read', async () => {
    const saver = new BerthPostgresSaver(pool, SCHEMA, lazyPool);
    const release = saver.primeEmpty('t-empty');
    const before = statements;
    expect(await saver.getTuple(config('t-empty'))).toBeUndefined();
    expect(statements).toBe(before);
    // A write ends what the prime knew; reads query again.
    saver.primeEmpty('t-empty');
    await saver.put(config('t-empty'), checkpoint(0), meta(0), { step: 1 });
    expect((await saver.getTuple(config('t-empty')))?.checkpoint.channel_values).toEqual({ step: 0 });
    release();
  });

  it('flushAll writes every queued write at once (server shutdown)', async () => {
    const saver = new BerthPostgresSaver(pool, SCHEMA, lazyPool, { lazyDelayMs: 60_000 });
    const release = saver.runDurability('t-all', 'async');
    await saver.put(config('t-all'), checkpoint(0), meta(0), { step: 1 });
    expect(await savedSteps('t-all')).toBe(0);
    await saver.flushAll();
    release();
    expect(await savedSteps('t-all')).toBe(1);
  });

  it('fails only the thread whose write Postgres refuses, not the others of its statement', async () => {
    const saver = new BerthPostgresSaver(pool, SCHEMA, lazyPool);
    // Both puts are queued in the same turn of the event loop: one statement.
    const [bad, good] = await Promise.allSettled([
      saver.put(config('t-refused\u0000'), checkpoint(0), meta(0), { step: 1 }),
      saver.put(config('t-kept'), checkpoint(0), meta(0), { step: 1 }),
    ]);
    expect(bad).toMatchObject({ status: 'rejected', reason: { name: 'CheckpointWriteError', threadId: 't-refused\u0000' } });
    expect(good.status).toBe('fulfilled');
    expect(await savedSteps('t-kept')).toBe(1);
  });

  it('refuses a state value that cannot be stored, naming its channel', async () => {
    const saver = new BerthPostgresSaver(pool, SCHEMA, lazyPool, { maxValueBytes: 1000 });
    const put = (value: unknown) => saver.put(config('t-unstorable'), { ...checkpoint(0), channel_values: { answer: value } }, meta(0), { answer: 1 });
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    await expect(put({ n: 1n })).rejects.toThrow(/^state channel "answer" cannot be stored: it holds a BigInt/);
    await expect(put(cycle)).rejects.toThrow(/^state channel "answer" cannot be stored: it is a circular structure/);
    await expect(put('x'.repeat(2000))).rejects.toThrow(/^state channel "answer" cannot be stored: it is 2002 bytes, more than the limit of 1000/);
    let deep: unknown = 'leaf';
    for (let i = 0; i < 1001; i++) deep = [deep];
    await expect(saver.put(config('t-unstorable'), { ...checkpoint(0), channel_values: { answer: deep } }, meta(0), { answer: 1 })).rejects.toThrow(
      /nested deeper than 1000 levels/,
    );
    // A string that merely reads "[Circular]" is a value like any other.
    await saver.put(config('t-unstorable'), { ...checkpoint(0), channel_values: { answer: '[Circular]' } }, meta(0), { answer: 1 });
    expect(await savedSteps('t-unstorable')).toBe(1);
  });

  it('logs a failed write that no one waits for (written behind, flushed at shutdown)', async () => {
    const logs = captureLogger();
    const saver = new BerthPostgresSaver(pool, SCHEMA, lazyPool, { lazyDelayMs: 60_000, log: logs.logger });
    const release = saver.runDurability('t-lost\u0000', 'async');
    await saver.put(config('t-lost\u0000'), checkpoint(0), meta(0), { step: 1 });
    release();
    await saver.flushAll();
    expect(logs.lines()).toMatchObject([
      { level: 50, msg: 'checkpoint write failed', threadIds: ['t-lost\u0000'], operations: 1, err: { message: expect.stringMatching(/0x00|invalid byte/) } },
    ]);
  });
});
