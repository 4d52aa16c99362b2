/**
 * The official LangGraph Postgres checkpointer with its write path batched: `put` (blobs +
 * checkpoint) and `putWrites` queue up, and everything queued while a batch is in flight goes to
 * Postgres as ONE atomic statement — across the steps of one run and across concurrent runs
 * (group commit). A single write still goes out at once. Reads, tables and migrations are the
 * upstream saver's.
 *
 * Writes of runs with `durability: "async"` (LangGraph's default: checkpoints are saved while the
 * run goes on) commit without waiting for the WAL flush (`synchronous_commit=off`): a machine
 * crash may lose their last fraction of a second, never their consistency; a crashed worker loses
 * nothing. Runs with `sync` or `exit` durability, and every write outside a run, wait for it.
 */
import type { RunnableConfig } from '@langchain/core/runnables';
import { WRITES_IDX_MAP, type ChannelVersions, type Checkpoint, type CheckpointMetadata, type PendingWrite } from '@langchain/langgraph-checkpoint';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import type pg from 'pg';

/** Rows of one batch, column by column (they go to Postgres as arrays and come out with unnest). */
class Rows {
  readonly columns: unknown[][];
  private readonly index = new Map<string, number>();
  constructor(width: number, private readonly keep: 'first' | 'last') {
    this.columns = Array.from({ length: width }, () => []);
  }

  /** Adds a row; a row with the same key replaces the earlier one (`last`) or is dropped (`first`). */
  add(key: string, row: unknown[]): void {
    const at = this.index.get(key);
    if (at === undefined) {
      this.index.set(key, this.columns[0]!.length);
      row.forEach((value, c) => this.columns[c]!.push(value));
    } else if (this.keep === 'last') row.forEach((value, c) => (this.columns[c]![at] = value));
  }

  get size(): number {
    return this.index.size;
  }
}

/** One batch: what a single statement writes, and who waits for it. */
class Batch {
  // Blobs are immutable by (thread, ns, channel, version): the first copy wins, as ON CONFLICT DO NOTHING.
  readonly blobs = new Rows(6, 'first');
  // A checkpoint written twice keeps its last content, as ON CONFLICT DO UPDATE.
  readonly checkpoints = new Rows(6, 'last');
  // Special channels (errors, interrupts, resumes) overwrite; ordinary writes are kept as first written.
  readonly overwrites = new Rows(8, 'last');
  readonly writes = new Rows(8, 'first');
  readonly waiters: { resolve(): void; reject(error: unknown): void }[] = [];
  /** Every write in it may commit without waiting for the WAL flush. */
  lazy = true;
}

/** Most operations (puts + putWrites calls) in one statement. */
const MAX_BATCH_OPERATIONS = 200;

const BATCH_SQL = `
WITH blobs AS (
  INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[])
  ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
), checkpoint_rows AS (
  INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
  SELECT * FROM unnest($7::text[], $8::text[], $9::text[], $10::text[], $11::jsonb[], $12::jsonb[])
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata
), overwrites AS (
  INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
  SELECT * FROM unnest($13::text[], $14::text[], $15::text[], $16::text[], $17::int[], $18::text[], $19::text[], $20::bytea[])
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE
    SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob
)
INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
SELECT * FROM unnest($21::text[], $22::text[], $23::text[], $24::text[], $25::int[], $26::text[], $27::text[], $28::bytea[])
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING`;

export class BerthPostgresSaver extends PostgresSaver {
  /** Batches waiting to be written; the first is the next to go. */
  private readonly queue: Batch[] = [];
  private pumping: Promise<void> | undefined;
  private scheduled = false;
  /** Threads whose running run has `async` durability (one run per thread runs at a time). */
  private readonly lazyThreads = new Map<string, number>();

  /**
   * @param writePool the pool of the service's schema
   * @param lazyPool the same, with `synchronous_commit=off`; without it every write waits for the flush
   */
  constructor(private readonly writePool: pg.Pool, schema: string, private readonly lazyPool?: pg.Pool) {
    super(writePool, undefined, { schema });
  }

  /**
   * Declares the durability of the run now executing on a thread, for the commit mode of its
   * writes; returns the function to call when the run ends.
   */
  runDurability(threadId: string, durability: 'sync' | 'async' | 'exit'): () => void {
    if (durability !== 'async' || !this.lazyPool) return () => undefined;
    this.lazyThreads.set(threadId, (this.lazyThreads.get(threadId) ?? 0) + 1);
    return () => {
      const left = (this.lazyThreads.get(threadId) ?? 1) - 1;
      if (left > 0) this.lazyThreads.set(threadId, left);
      else this.lazyThreads.delete(threadId);
    };
  }

  override async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    if (config.configurable === undefined) throw new Error('Missing "configurable" field in "config" param');
    const { thread_id, checkpoint_ns = '', checkpoint_id } = config.configurable as Record<string, string | undefined>;
    const [blobs, serializedMetadata] = await Promise.all([
      this._dumpBlobs(thread_id!, checkpoint_ns, checkpoint.channel_values, newVersions),
      this._dumpMetadata(metadata),
    ]);
    await this.enqueue(thread_id!, (batch) => {
      for (const b of blobs) batch.blobs.add(JSON.stringify([b[0], b[1], b[2], b[3]]), [b[0], b[1], b[2], b[3], b[4], b[5] ? Buffer.from(b[5]) : null]);
      batch.checkpoints.add(JSON.stringify([thread_id, checkpoint_ns, checkpoint.id]), [
        thread_id,
        checkpoint_ns,
        checkpoint.id,
        checkpoint_id ?? null,
        JSON.stringify(this._dumpCheckpoint(checkpoint)),
        JSON.stringify(serializedMetadata),
      ]);
    });
    return { configurable: { thread_id, checkpoint_ns, checkpoint_id: checkpoint.id } };
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string): Promise<void> {
    if (writes.length === 0) return;
    const c = config.configurable as Record<string, string | undefined>;
    const rows = await this._dumpWrites(c.thread_id!, c.checkpoint_ns ?? '', c.checkpoint_id!, taskId, writes as [string, unknown][]);
    const upsert = writes.every((w) => w[0] in WRITES_IDX_MAP);
    await this.enqueue(c.thread_id!, (batch) => {
      for (const r of rows) {
        const row = [r[0], r[1], r[2], r[3], r[4], r[5], r[6], Buffer.from(r[7])];
        (upsert ? batch.overwrites : batch.writes).add(JSON.stringify(row.slice(0, 5)), row);
      }
    });
  }

  /** Adds an operation to the next batch; resolves once the statement holding it has committed. */
  private enqueue(threadId: string, add: (batch: Batch) => void): Promise<void> {
    let batch = this.queue.at(-1);
    if (!batch || batch.waiters.length >= MAX_BATCH_OPERATIONS) this.queue.push((batch = new Batch()));
    add(batch);
    if (!this.lazyThreads.has(threadId)) batch.lazy = false;
    const done = new Promise<void>((resolve, reject) => batch.waiters.push({ resolve, reject }));
    // Sent on the next turn of the event loop, not at once: a run's steps between two pieces of
    // I/O (a node that only computes, the puts of one step) then share one statement.
    if (!this.scheduled && !this.pumping) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.pumping ??= this.pump();
      });
    }
    return done;
  }

  /** Sends the queued batches one statement at a time, in order, until none is left. */
  private async pump(): Promise<void> {
    try {
      for (let batch = this.queue.shift(); batch; batch = this.queue.shift()) await this.write(batch);
    } finally {
      this.pumping = undefined;
    }
  }

  private async write(batch: Batch): Promise<void> {
    try {
      // One statement at a time (the queue is sequential), so the two pools cannot reorder writes.
      await (batch.lazy && this.lazyPool ? this.lazyPool : this.writePool).query(BATCH_SQL, [
        ...batch.blobs.columns,
        ...batch.checkpoints.columns,
        ...batch.overwrites.columns,
        ...batch.writes.columns,
      ]);
      for (const waiter of batch.waiters) waiter.resolve();
    } catch (error) {
      for (const waiter of batch.waiters) waiter.reject(error);
    }
  }
}
