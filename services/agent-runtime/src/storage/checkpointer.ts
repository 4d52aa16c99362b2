/**
 * The official LangGraph Postgres checkpointer with its write path batched: `put` (blobs +
 * checkpoint) and `putWrites` queue up, and everything queued while a batch is in flight goes to
 * Postgres as ONE atomic statement — across the steps of one run and across concurrent runs
 * (group commit). Reads, tables and migrations are the upstream saver's.
 *
 * Runs with `durability: "async"` (LangGraph's default: checkpoints are saved while the run goes
 * on) write behind: their writes resolve once queued, in order, and leave at most
 * `lazyDelayMs` later or when the run's executor calls `flushThread` at its end (which surfaces a
 * failed write); reads of a thread first wait for its queued writes. They also commit without
 * waiting for the WAL flush (`synchronous_commit=off`): a crashed worker loses at most its last
 * `lazyDelayMs` of checkpoints (the run is taken over from the one before), a machine crash the
 * last fraction of a second, never their consistency. Runs with `sync` or `exit` durability, and
 * every write outside a run, resolve only once committed and flushed.
 */
import type { RunnableConfig } from '@langchain/core/runnables';
import { WRITES_IDX_MAP, type ChannelVersions, type Checkpoint, type CheckpointMetadata, type PendingWrite } from '@langchain/langgraph-checkpoint';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { silentLogger, type Logger } from '@berth/log';
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
  /** put/putWrites calls in it. */
  operations = 0;
  /** Every write in it may commit without waiting for the WAL flush. */
  lazy = true;
  /** Threads with writes in it. */
  readonly threads = new Set<string>();
  /** Settles when the statement has committed (or failed). */
  readonly done: Promise<void>;
  settle!: (error?: unknown) => void;
  constructor() {
    this.done = new Promise<void>((resolve, reject) => (this.settle = (error) => (error === undefined ? resolve() : reject(error))));
    this.done.catch(() => undefined); // surfaced by the waiters and by flushThread
  }
}

export interface BerthPostgresSaverOptions {
  /**
   * Longest an `async`-durability run's write waits in the queue before it is sent.
   * @default 10
   */
  lazyDelayMs?: number;
  /**
   * Where a failed write is logged, once for its batch (its writers get the error too, a run
   * writing behind at its end).
   * @default silentLogger()
   */
  log?: Logger;
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
  /** The pending send: `now` on the next event-loop turn, `lazy` after lazyDelayMs. */
  private scheduled: { kind: 'now' | 'lazy'; timer: NodeJS.Immediate | NodeJS.Timeout } | undefined;
  /** Threads whose running run has `async` durability (one run per thread runs at a time). */
  private readonly lazyThreads = new Map<string, number>();
  /** Threads known to have no checkpoint yet: their next root read needs no query (see primeEmpty). */
  private readonly emptyThreads = new Set<string>();
  /** The last queued or in-flight batch holding writes of a thread. */
  private readonly threadTail = new Map<string, Batch>();
  private readonly lazyDelayMs: number;
  private readonly log: Logger;

  /**
   * @param writePool the pool of the service's schema
   * @param lazyPool the same, with `synchronous_commit=off`; without it no run writes behind
   */
  constructor(private readonly writePool: pg.Pool, schema: string, private readonly lazyPool?: pg.Pool, options: BerthPostgresSaverOptions = {}) {
    super(writePool, undefined, { schema });
    this.lazyDelayMs = options.lazyDelayMs ?? 10;
    this.log = options.log ?? silentLogger();
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
      // The run's metadata (the executor puts it in the config) goes into every checkpoint it
      // writes, as the LangGraph servers do: history can then be filtered by it.
      this._dumpMetadata({ ...(config.metadata as CheckpointMetadata | undefined), ...metadata }),
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

  /**
   * Resolves once every write queued so far for the thread has committed; rejects when one failed.
   * Executors call it at the end of a run (its writes may have been written behind).
   */
  async flushThread(threadId: string): Promise<void> {
    const tail = this.threadTail.get(threadId);
    if (!tail) return;
    this.schedule('now');
    try {
      await tail.done;
    } finally {
      if (this.threadTail.get(threadId) === tail) this.threadTail.delete(threadId);
    }
  }

  /** Sends every queued write now and resolves once they are written (failures are logged and go to their writers). */
  async flushAll(): Promise<void> {
    const last = this.queue.at(-1);
    if (!last) return this.pumping;
    this.schedule('now');
    await last.done.catch(() => undefined);
  }

  /**
   * Declares that a thread has no checkpoint (a run claimed it and found none, and nothing else
   * writes a thread while its run is running), so the run's first read of its latest root
   * checkpoint is answered without a query. Lasts until that read, a write, or the release.
   */
  primeEmpty(threadId: string): () => void {
    this.emptyThreads.add(threadId);
    return () => this.emptyThreads.delete(threadId);
  }

  override async getTuple(config: RunnableConfig) {
    const c = config.configurable ?? {};
    if (!c.checkpoint_id && !c.checkpoint_ns && this.emptyThreads.delete(c.thread_id as string)) return undefined;
    await this.flushThread(c.thread_id as string);
    return super.getTuple(config);
  }

  override async *list(config: RunnableConfig, options?: Parameters<PostgresSaver['list']>[1]) {
    if (config.configurable?.thread_id) await this.flushThread(config.configurable.thread_id as string);
    yield* super.list(config, options);
  }

  /**
   * Adds an operation to the next batch. Resolves once the statement holding it has committed —
   * or at once for a thread whose run writes behind (see the class comment).
   */
  private enqueue(threadId: string, add: (batch: Batch) => void): Promise<void> {
    let batch = this.queue.at(-1);
    if (!batch || batch.operations >= MAX_BATCH_OPERATIONS) this.queue.push((batch = new Batch()));
    add(batch);
    batch.operations += 1;
    this.emptyThreads.delete(threadId);
    batch.threads.add(threadId);
    this.threadTail.set(threadId, batch);
    const behind = this.lazyPool !== undefined && this.lazyThreads.has(threadId);
    if (!behind) batch.lazy = false;
    const done = behind ? Promise.resolve() : new Promise<void>((resolve, reject) => batch.waiters.push({ resolve, reject }));
    // Sent on the next turn of the event loop at the earliest: a run's steps between two pieces
    // of I/O (a node that only computes, the puts of one step) then share one statement.
    this.schedule(behind ? 'lazy' : 'now');
    return done;
  }

  private schedule(kind: 'now' | 'lazy'): void {
    if (this.pumping) return; // the pump takes whatever is queued when its statement returns
    if (this.scheduled && (this.scheduled.kind === 'now' || kind === 'lazy')) return;
    if (this.scheduled) clearTimeout(this.scheduled.timer as NodeJS.Timeout);
    const send = () => {
      this.scheduled = undefined;
      this.pumping ??= this.pump();
    };
    this.scheduled = kind === 'now' ? { kind, timer: setImmediate(send) } : { kind, timer: setTimeout(send, this.lazyDelayMs) };
  }

  private forget(batch: Batch, when: (threadId: string) => boolean): void {
    for (const threadId of batch.threads) if (this.threadTail.get(threadId) === batch && when(threadId)) this.threadTail.delete(threadId);
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
      batch.settle();
      for (const waiter of batch.waiters) waiter.resolve();
      this.forget(batch, () => true);
    } catch (error) {
      this.log.error({ err: error, threadIds: [...batch.threads], operations: batch.operations }, 'checkpoint write failed');
      batch.settle(error);
      for (const waiter of batch.waiters) waiter.reject(error);
      // A run writing behind learns of the failure from flushThread; other writers had their waiters.
      this.forget(batch, (threadId) => !this.lazyThreads.has(threadId));
    }
  }
}
