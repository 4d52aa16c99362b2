/**
 * Checkpoint rows of the LangGraph Postgres checkpointer, handled as whole threads: deleting a
 * thread's checkpoints, copying them to a new thread.
 */
import type pg from 'pg';
import { inTransaction } from './sql.js';

const TABLES = ['checkpoints', 'checkpoint_blobs', 'checkpoint_writes'] as const;

export async function deleteCheckpoints(pool: pg.Pool, threadId: string): Promise<void> {
  await inTransaction(pool, (client) => deleteCheckpointsOf(client, [threadId]));
}

/** Deletes the checkpoints of several threads, in the caller's transaction. */
export async function deleteCheckpointsOf(client: pg.PoolClient, threadIds: readonly string[]): Promise<void> {
  for (const table of TABLES) await client.query(`DELETE FROM ${table} WHERE thread_id = ANY($1::text[])`, [threadIds]);
}

export async function copyCheckpoints(pool: pg.Pool, fromThreadId: string, toThreadId: string): Promise<void> {
  await inTransaction(pool, async (client) => {
    for (const table of TABLES) {
      const { rows } = await client.query<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name <> 'thread_id'`,
        [table],
      );
      const columns = rows.map((r) => `"${r.column_name}"`).join(', ');
      await client.query(`INSERT INTO ${table} (thread_id, ${columns}) SELECT $2, ${columns} FROM ${table} WHERE thread_id = $1`, [fromThreadId, toThreadId]);
    }
  });
}

/**
 * Removes the checkpoints a run wrote (everything after `afterCheckpointId`; all when null).
 * A cancelled graph's loop can still be writing its last checkpoint when the run's stream has
 * already ended, so this first waits (briefly) until the thread's checkpoints stop changing.
 */
export async function deleteCheckpointsAfter(pool: pg.Pool, threadId: string, afterCheckpointId: string | null): Promise<void> {
  let previous = '';
  for (let stable = 0, i = 0; stable < 2 && i < 40; i++) {
    const { rows } = await pool.query<{ latest: string | null; n: number }>(
      'SELECT max(checkpoint_id) AS latest, count(*)::int AS n FROM checkpoint_writes WHERE thread_id = $1',
      [threadId],
    );
    const { rows: cps } = await pool.query<{ latest: string | null }>('SELECT max(checkpoint_id) AS latest FROM checkpoints WHERE thread_id = $1', [threadId]);
    const current = `${cps[0]?.latest}/${rows[0]?.latest}/${rows[0]?.n}`;
    stable = current === previous ? stable + 1 : 0;
    previous = current;
    if (stable < 2) await new Promise((resolve) => setTimeout(resolve, 25));
  }
  await inTransaction(pool, async (client) => {
    for (const table of ['checkpoints', 'checkpoint_writes'] as const) {
      await client.query(`DELETE FROM ${table} WHERE thread_id = $1 AND ($2::text IS NULL OR checkpoint_id > $2)`, [threadId, afterCheckpointId]);
    }
  });
}

/** The thread's latest checkpoint id in the root namespace, if it has one. */
export async function latestCheckpoint(pool: pg.Pool, threadId: string): Promise<string | null> {
  const { rows } = await pool.query<{ id: string | null }>("SELECT max(checkpoint_id) AS id FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = ''", [
    threadId,
  ]);
  return rows[0]?.id ?? null;
}
