/**
 * Checkpoint rows of the LangGraph Postgres checkpointer, handled as whole threads: deleting a
 * thread's checkpoints, copying them to a new thread.
 */
import type pg from 'pg';
import { inTransaction } from './sql.js';

const TABLES = ['checkpoints', 'checkpoint_blobs', 'checkpoint_writes'] as const;

export async function deleteCheckpoints(pool: pg.Pool, threadId: string): Promise<void> {
  await inTransaction(pool, async (client) => {
    for (const table of TABLES) await client.query(`DELETE FROM ${table} WHERE thread_id = $1`, [threadId]);
  });
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
