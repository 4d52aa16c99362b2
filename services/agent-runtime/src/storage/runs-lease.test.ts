/**
 * Agent runs keep the lease contract of @berth/lease (claim, renew, expiry, takeover only of a
 * dead owner's run or after the hold, the fence on a stale attempt's checkpoint writes), on real
 * Postgres with the RunStore's lease clock moved by hand.
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, it } from '@jest/globals';
import { ManualClock } from '@berth/clock';
import { createPool, migrate } from '@berth/db';
import { leaseContract, type LeaseContractHarness } from '@berth/lease';
import { silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import type pg from 'pg';
import { AssistantStore } from './assistants.js';
import { FENCE_KEY, RunFencedError } from './checkpoint-batch.js';
import { BerthPostgresSaver } from './checkpointer.js';
import { RunStore } from './runs.js';
import { ThreadStore } from './threads.js';

const SCHEMA = 'runs_lease';
let db: TestDatabase;
let pool: pg.Pool;
let harness: LeaseContractHarness;

beforeAll(async () => {
  db = await createTestDatabase('runs_lease');
  await migrate({ connectionString: db.url, schema: SCHEMA, directory: fileURLToPath(new URL('../../migrations', import.meta.url)) });
  pool = createPool({ connectionString: db.url, schema: SCHEMA });
  const saver = new BerthPostgresSaver(pool, SCHEMA);
  await saver.setup();
  const assistantId = randomUUID();
  await new AssistantStore(pool).ensureSystem(assistantId, 'echo');
  const clock = new ManualClock(Date.now());
  const runs = new RunStore(pool, { clock });
  const threads = new ThreadStore(pool);
  const threadOf = new Map<string, string>();
  let step = 0;
  harness = {
    clock,
    async create() {
      const threadId = randomUUID();
      await threads.create({ thread_id: threadId, metadata: {}, if_exists: 'raise' });
      const { run } = await runs.create({
        run_id: randomUUID(),
        thread_id: threadId,
        assistant_id: assistantId,
        graph_id: 'echo',
        metadata: {},
        kwargs: { stream_mode: ['values'], stream_subgraphs: false, stream_resumable: false, temporary: false },
        multitask_strategy: 'enqueue',
        after_seconds: 0,
      });
      threadOf.set(run.run_id, threadId);
      return run.run_id;
    },
    rows: {
      async claim(id, owner, { leaseMs, takeover }) {
        const claimed = await runs.claim(id, owner, leaseMs, takeover);
        return claimed && { owner, token: claimed.run.attempt };
      },
      async renew(id, holder, { leaseMs }) {
        return (await runs.heartbeat(id, holder.owner, holder.token, leaseMs)).held;
      },
      // A checkpoint of the run's graph: the writes a run makes while it executes.
      async write(id, holder) {
        step += 1;
        const config = { configurable: { thread_id: threadOf.get(id)!, checkpoint_ns: '', [FENCE_KEY]: { runId: id, attempt: holder.token } } };
        const checkpoint = { ...emptyCheckpoint(), id: uuid6(step), channel_values: { step }, channel_versions: { step } };
        try {
          await saver.put(config, checkpoint, { source: 'loop', step, parents: {} }, { step });
          return true;
        } catch (error) {
          if (error instanceof RunFencedError) return false;
          throw error;
        }
      },
    },
    connectionString: db.url,
    log: silentLogger(),
  };
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

describe('agent runs: the lease contract', () => {
  for (const c of leaseContract(() => harness)) it(c.name, () => c.run());
});
