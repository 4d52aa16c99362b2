/**
 * One statement of BerthPostgresSaver's write path: the rows of many `put`/`putWrites` calls (of
 * many threads and runs) as column arrays, unnested into the upstream saver's three tables. Writes
 * made by a run carry its fence (run id and attempt): the statement takes a share lock on each such
 * run's row and writes their rows only while that attempt still holds the run, so that a worker
 * whose run was taken over can never write after the takeover (the claim's update waits for the
 * lock, or the statement sees the claim and writes nothing of that run).
 */

/** The attempt of a run that made a write; the write is refused once another attempt holds the run. */
export interface WriteFence {
  runId: string;
  attempt: number;
}

/** The configurable key under which a run's config carries its {@link WriteFence}. */
export const FENCE_KEY = '__berth_fence';

/** A write of a run whose attempt no longer holds it (taken over, or ended): nothing of it was written. */
export class RunFencedError extends Error {
  constructor(readonly fence: WriteFence) {
    super(`run ${fence.runId} is no longer held by its attempt ${fence.attempt}: its checkpoint write was refused`);
    this.name = 'RunFencedError';
  }
}

/** One put or putWrites call: its rows, who waits for it, and how long it may be retried. */
export interface WriteOp {
  threadId: string;
  fence?: WriteFence;
  blobs: unknown[][];
  checkpoints: unknown[][];
  overwrites: unknown[][];
  writes: unknown[][];
  /** Resolved once committed; absent for a write behind (its failure goes to flushThread). */
  waiter?: { resolve(): void; reject(error: unknown): void };
  /** The op may commit without waiting for the WAL flush. */
  lazy: boolean;
  /** Retried through an outage of the database until then (ms since the epoch). */
  retryUntil: number;
}

/** Rows of one table, column by column; a row with the same key replaces the earlier one (`last`) or is dropped (`first`). */
class Columns {
  readonly columns: unknown[][];
  private readonly index = new Map<string, number>();
  constructor(
    width: number,
    private readonly keyWidth: number,
    private readonly keep: 'first' | 'last',
  ) {
    this.columns = Array.from({ length: width }, () => []);
  }

  add(row: unknown[]): void {
    const key = JSON.stringify(row.slice(0, this.keyWidth));
    const at = this.index.get(key);
    if (at === undefined) {
      this.index.set(key, this.columns[0]!.length);
      row.forEach((value, c) => this.columns[c]!.push(value));
    } else if (this.keep === 'last') row.forEach((value, c) => (this.columns[c]![at] = value));
  }
}

/** The statement and parameters writing `ops` (in order), and the fences it checks. */
export function batchStatement(ops: readonly WriteOp[]): { text: string; values: unknown[]; fences: WriteFence[] } {
  const fences = new Map<string, WriteFence>();
  for (const op of ops) if (op.fence) fences.set(`${op.fence.runId}/${op.fence.attempt}`, op.fence);
  // Blobs are immutable by (thread, ns, channel, version): the first copy wins, as ON CONFLICT DO NOTHING.
  const blobs = new Columns(7, 4, 'first');
  // A checkpoint written twice keeps its last content, as ON CONFLICT DO UPDATE.
  const checkpoints = new Columns(7, 3, 'last');
  // Special channels (errors, interrupts, resumes) overwrite; ordinary writes are kept as first written.
  const overwrites = new Columns(9, 5, 'last');
  const writes = new Columns(9, 5, 'first');
  for (const op of ops) {
    const fence = op.fence ? `${op.fence.runId}/${op.fence.attempt}` : null;
    for (const row of op.blobs) blobs.add([...row, fence]);
    for (const row of op.checkpoints) checkpoints.add([...row, fence]);
    for (const row of op.overwrites) overwrites.add([...row, fence]);
    for (const row of op.writes) writes.add([...row, fence]);
  }
  const values = [...blobs.columns, ...checkpoints.columns, ...overwrites.columns, ...writes.columns];
  if (fences.size === 0) return { text: UNFENCED_SQL, values, fences: [] };
  const held = [...fences.values()];
  return {
    text: FENCED_SQL,
    values: [...values, held.map((f) => f.runId), held.map((f) => f.attempt)],
    fences: held,
  };
}

/** The four inserts; `$allowed` is the condition a row's fence (column `fence`) must meet. */
function inserts(allowed: string): string {
  return `blobs AS (
  INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
  SELECT thread_id, checkpoint_ns, channel, version, type, blob
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::text[])
    AS b (thread_id, checkpoint_ns, channel, version, type, blob, fence)
  WHERE ${allowed}
  ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
), checkpoint_rows AS (
  INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
  SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata
  FROM unnest($8::text[], $9::text[], $10::text[], $11::text[], $12::jsonb[], $13::jsonb[], $14::text[])
    AS c (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, fence)
  WHERE ${allowed}
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata
), overwrites AS (
  ${writesInsert(15, allowed, 'DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob')}
), writes AS (
  ${writesInsert(24, allowed, 'DO NOTHING')}
)`;
}

/** An insert into checkpoint_writes of the 9 columns from parameter `$first` on. */
function writesInsert(first: number, allowed: string, onConflict: string): string {
  const types = ['text', 'text', 'text', 'text', 'int', 'text', 'text', 'bytea', 'text'];
  return `INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
  SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob
  FROM unnest(${types.map((type, i) => `$${first + i}::${type}[]`).join(', ')})
    AS w (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, fence)
  WHERE ${allowed}
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) ${onConflict}`;
}

const UNFENCED_SQL = `WITH ${inserts('true')}
SELECT NULL::text AS refused WHERE false`;

// The share lock is what fences: a claim (an UPDATE of the row) either committed before it, and the
// attempt no longer matches, or waits until this statement has committed.
const FENCED_SQL = `WITH held AS (
  SELECT r.run_id::text || '/' || r.attempt AS fence
  FROM runs r JOIN unnest($33::uuid[], $34::int[]) AS f (run_id, attempt) ON r.run_id = f.run_id AND r.attempt = f.attempt
  WHERE r.status = 'running'
  FOR SHARE OF r
), ${inserts('fence IS NULL OR fence IN (SELECT fence FROM held)')}
SELECT f.run_id::text || '/' || f.attempt AS refused FROM unnest($33::uuid[], $34::int[]) AS f (run_id, attempt)
WHERE f.run_id::text || '/' || f.attempt NOT IN (SELECT fence FROM held)`;
