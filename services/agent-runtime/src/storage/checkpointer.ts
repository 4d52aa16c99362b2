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
 *
 * A run's writes carry its fence (see checkpoint-batch.ts): once another attempt holds the run they
 * are refused. They are retried through an outage of the database (for `retryWritesMs`), so a run
 * whose worker lost Postgres for a while keeps its checkpoints; writes outside a run (the API's)
 * fail at once instead. A value that cannot be stored — one that does not serialize, or larger
 * than `maxValueBytes` — fails its `put`/`putWrites` with an {@link UnstorableValueError} naming
 * the channel, and a write Postgres refuses for good fails its writers with a
 * {@link CheckpointWriteError}; either fails the run, never the other threads of its statement.
 */
import type { RunnableConfig } from '@langchain/core/runnables';
import { WRITES_IDX_MAP, type ChannelVersions, type Checkpoint, type CheckpointMetadata, type PendingWrite } from '@langchain/langgraph-checkpoint';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { silentLogger, type Logger } from '@berth/log';
import type pg from 'pg';
import { batchStatement, FENCE_KEY, RunFencedError, type WriteFence, type WriteOp } from './checkpoint-batch.js';
import { MAX_VALUE_DEPTH, nestedDeeperThan, toJsonb, UnstorableValueError } from './json-codec.js';
import { backoffMs, isTransientDbError, sleep } from './retry.js';
import { secondsSince } from '@berth/metrics';
import { checkpointWrite } from '../runs/metrics.js';

/** Postgres refused a checkpoint write for a reason that retrying does not change. */
export class CheckpointWriteError extends Error {
  constructor(
    readonly threadId: string,
    cause: unknown,
  ) {
    super(`the checkpoint of thread ${threadId} could not be stored: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'CheckpointWriteError';
  }
}

export interface BerthPostgresSaverOptions {
  /**
   * Longest an `async`-durability run's write waits in the queue before it is sent.
   * @default 10
   */
  lazyDelayMs?: number;
  /**
   * How long a run's write is retried while the database is unreachable (a write outside a run
   * is not retried). Beyond it, the run's lease is lost anyway.
   * @default 65_000
   */
  retryWritesMs?: number;
  /**
   * Largest serialized value of one state channel (the broker's default event limit: a larger
   * value could not be streamed either).
   * @default 16 MiB
   */
  maxValueBytes?: number;
  /**
   * Where a failed write is logged, once for its batch (its writers get the error too, a run
   * writing behind at its end).
   * @default silentLogger()
   */
  log?: Logger;
}

/** Most operations (puts + putWrites calls) in one statement. */
const MAX_BATCH_OPERATIONS = 200;

/** What the upstream serializer writes when JSON.stringify failed (a BigInt…), and where it found a cycle. */
const SERDE_FAILED = Buffer.from(JSON.stringify('[unable to serialize, circular reference is too complex to analyze]'));
const CIRCULAR = Buffer.from('"[Circular]"');

/** Why JSON cannot represent `value`; undefined when it can. */
function jsonProblem(value: unknown): string | undefined {
  try {
    JSON.stringify(value);
    return undefined;
  } catch (error) {
    const message = (error as Error).message;
    if (/BigInt/.test(message)) return 'it holds a BigInt, which JSON cannot represent (convert it to a number or a string)';
    if (/circular/i.test(message)) return `it is a circular structure (${message.replace(/\s+/g, ' ')})`;
    return `it does not serialize (${message})`;
  }
}

/** Writes of one statement, and when they are all settled. */
class Batch {
  readonly ops: WriteOp[] = [];
  readonly done: Promise<void>;
  finish!: () => void;
  constructor() {
    this.done = new Promise<void>((resolve) => (this.finish = resolve));
  }
}

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
  /** The first failure of a thread's writes behind, for its run's flushThread. */
  private readonly threadFailures = new Map<string, unknown>();
  private readonly lazyDelayMs: number;
  private readonly retryWritesMs: number;
  private readonly maxValueBytes: number;
  private readonly log: Logger;

  /**
   * @param writePool the pool of the service's schema
   * @param lazyPool the same, with `synchronous_commit=off`; without it no run writes behind
   */
  constructor(
    private readonly writePool: pg.Pool,
    schema: string,
    private readonly lazyPool?: pg.Pool,
    options: BerthPostgresSaverOptions = {},
  ) {
    super(writePool, undefined, { schema });
    this.lazyDelayMs = options.lazyDelayMs ?? 10;
    this.retryWritesMs = options.retryWritesMs ?? 65_000;
    this.maxValueBytes = options.maxValueBytes ?? 16 * 1024 * 1024;
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

  /**
   * The next version of a channel: one more than `current`, plus a random fraction. A run from an
   * older checkpoint (a fork) makes the same steps as the branch it leaves, and with whole numbers
   * the same versions: values are stored by (channel, version), first copy wins, so the fork's
   * state would read back as the original branch's. Versions stay numbers, compared as numbers
   * with those of checkpoints written before (whole ones).
   */
  override getNextVersion(current: number | undefined): number {
    return (typeof current === 'number' ? Math.floor(current) : 0) + 1 + Math.random();
  }

  override async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    if (config.configurable === undefined) throw new Error('Missing "configurable" field in "config" param');
    const { thread_id, checkpoint_ns = '', checkpoint_id } = config.configurable as Record<string, string | undefined>;
    const values = checkpoint.channel_values;
    const blobs = await Promise.all(
      Object.entries(newVersions).map(async ([channel, version]) => {
        const [type, blob] = channel in values ? await this.dump(channel, values[channel]) : ['empty', null];
        return [thread_id, checkpoint_ns, channel, String(version), type, blob ? Buffer.from(blob) : null];
      }),
    );
    // The run's metadata (the executor puts it in the config) goes into every checkpoint it
    // writes, as the LangGraph servers do: history can then be filtered by it.
    const serializedMetadata = await this._dumpMetadata({ ...(config.metadata as CheckpointMetadata | undefined), ...metadata });
    const row = [thread_id, checkpoint_ns, checkpoint.id, checkpoint_id ?? null, toJsonb(this._dumpCheckpoint(checkpoint)), toJsonb(serializedMetadata)];
    await this.enqueue(config, { blobs, checkpoints: [row], overwrites: [], writes: [] });
    return { configurable: { thread_id, checkpoint_ns, checkpoint_id: checkpoint.id } };
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string): Promise<void> {
    if (writes.length === 0) return;
    const c = config.configurable as Record<string, string | undefined>;
    const rows = await Promise.all(
      (writes as [string, unknown][]).map(async ([channel, value], idx) => {
        const [type, blob] = await this.dump(channel, value);
        return [c.thread_id, c.checkpoint_ns ?? '', c.checkpoint_id, taskId, WRITES_IDX_MAP[channel] ?? idx, channel, type, Buffer.from(blob)];
      }),
    );
    const upsert = writes.every((w) => w[0] in WRITES_IDX_MAP);
    await this.enqueue(config, { blobs: [], checkpoints: [], overwrites: upsert ? rows : [], writes: upsert ? [] : rows });
  }

  /**
   * Resolves once every write queued so far for the thread has committed; rejects when one written
   * behind failed since the last call. Executors call it at the end of a run.
   */
  async flushThread(threadId: string): Promise<void> {
    await this.settled(threadId);
    const failure = this.threadFailures.get(threadId);
    if (failure === undefined) return;
    this.threadFailures.delete(threadId);
    throw failure;
  }

  /** Resolves once every write queued so far for the thread has been sent (committed or failed). */
  async settled(threadId: string): Promise<void> {
    const tail = this.threadTail.get(threadId);
    if (!tail) return;
    this.schedule('now');
    await tail.done;
  }

  /** Sends every queued write now and resolves once they are written (failures are logged and go to their writers). */
  async flushAll(): Promise<void> {
    const last = this.queue.at(-1);
    if (!last) return this.pumping;
    this.schedule('now');
    await last.done;
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
    await this.settled(c.thread_id as string);
    return super.getTuple(config);
  }

  override async *list(config: RunnableConfig, options?: Parameters<PostgresSaver['list']>[1]) {
    if (config.configurable?.thread_id) await this.settled(config.configurable.thread_id as string);
    yield* super.list(config, options);
  }

  /** A channel's value serialized, or an UnstorableValueError saying why it cannot be stored. */
  private async dump(channel: string, value: unknown): Promise<[string, Uint8Array]> {
    const where = `state channel ${JSON.stringify(channel)}`;
    let typed: [string, Uint8Array];
    try {
      typed = await this.serde.dumpsTyped(value);
    } catch (error) {
      const problem =
        error instanceof RangeError ? `it is nested deeper than ${MAX_VALUE_DEPTH} levels` : `it does not serialize (${(error as Error).message})`;
      throw new UnstorableValueError(where, problem, { cause: error });
    }
    const [type, bytes] = typed;
    if (type === 'json') {
      // The upstream serializer hides these (a placeholder string instead of the value): say so.
      const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      if (text.equals(SERDE_FAILED)) throw new UnstorableValueError(where, jsonProblem(value) ?? 'it does not serialize');
      if (text.includes(CIRCULAR)) {
        const problem = jsonProblem(value);
        if (problem) throw new UnstorableValueError(where, problem);
      }
      if (nestedDeeperThan(bytes, MAX_VALUE_DEPTH)) throw new UnstorableValueError(where, `it is nested deeper than ${MAX_VALUE_DEPTH} levels`);
    }
    if (bytes.byteLength > this.maxValueBytes)
      throw new UnstorableValueError(where, `it is ${bytes.byteLength} bytes, more than the limit of ${this.maxValueBytes}`);
    return typed;
  }

  /**
   * Adds an operation to the next batch. Resolves once the statement holding it has committed —
   * or at once for a thread whose run writes behind (see the class comment).
   */
  private enqueue(config: RunnableConfig, rows: Pick<WriteOp, 'blobs' | 'checkpoints' | 'overwrites' | 'writes'>): Promise<void> {
    const threadId = config.configurable!.thread_id as string;
    const fence = config.configurable?.[FENCE_KEY] as WriteFence | undefined;
    let batch = this.queue.at(-1);
    if (!batch || batch.ops.length >= MAX_BATCH_OPERATIONS) this.queue.push((batch = new Batch()));
    this.emptyThreads.delete(threadId);
    this.threadTail.set(threadId, batch);
    const behind = this.lazyPool !== undefined && this.lazyThreads.has(threadId);
    const op: WriteOp = { threadId, ...rows, lazy: behind, retryUntil: fence ? Date.now() + this.retryWritesMs : 0, ...(fence ? { fence } : {}) };
    batch.ops.push(op);
    const done = behind ? Promise.resolve() : new Promise<void>((resolve, reject) => (op.waiter = { resolve, reject }));
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

  /** Sends the queued batches one statement at a time, in order, until none is left. */
  private async pump(): Promise<void> {
    try {
      for (let batch = this.queue.shift(); batch; batch = this.queue.shift()) {
        await this.write(batch.ops);
        for (const op of batch.ops) if (this.threadTail.get(op.threadId) === batch) this.threadTail.delete(op.threadId);
        batch.finish();
      }
    } finally {
      this.pumping = undefined;
    }
  }

  /**
   * Writes `ops` in one statement. Through an outage of the database the run's writes are retried
   * (the others fail at once); a write refused for good is retried thread by thread, so that only
   * the threads whose writes Postgres refuses fail.
   */
  private async write(ops: WriteOp[]): Promise<void> {
    for (let attempt = 0; ops.length > 0; attempt++) {
      const { text, values, fences } = batchStatement(ops);
      try {
        // One statement at a time (the queue is sequential), so the two pools cannot reorder writes.
        const pool = ops.every((op) => op.lazy) && this.lazyPool ? this.lazyPool : this.writePool;
        const started = performance.now();
        const { rows } = await pool.query<{ refused: string }>(text, values);
        checkpointWrite.observe(secondsSince(started));
        if (attempt > 0) this.log.info({ attempts: attempt + 1, threadIds: threadsOf(ops) }, 'checkpoint write succeeded after the database came back');
        const refused = new Set(rows.map((r) => r.refused));
        for (const op of ops) {
          if (op.fence && refused.has(`${op.fence.runId}/${op.fence.attempt}`)) this.fail(op, new RunFencedError(op.fence));
          else op.waiter?.resolve();
        }
        if (fences.length && refused.size) this.log.warn({ refused: [...refused] }, 'checkpoint writes of runs taken over were refused');
        return;
      } catch (error) {
        if (isTransientDbError(error)) {
          const now = Date.now();
          const waiting = ops.filter((op) => op.retryUntil > now);
          for (const op of ops) if (op.retryUntil <= now) this.fail(op, error);
          if (attempt === 0 || waiting.length === 0)
            this.log.warn({ err: error, threadIds: threadsOf(ops), retrying: waiting.length }, 'checkpoint write failed: the database is unreachable');
          ops = waiting;
          if (ops.length) await sleep(backoffMs(attempt));
          continue;
        }
        const threads = threadsOf(ops);
        if (threads.length > 1) {
          for (const threadId of threads) await this.write(ops.filter((op) => op.threadId === threadId));
          return;
        }
        this.log.error({ err: error, threadIds: threads, operations: ops.length }, 'checkpoint write failed');
        for (const op of ops) this.fail(op, new CheckpointWriteError(op.threadId, error));
        return;
      }
    }
  }

  /** Fails an op: its writer gets the error, or the run's flushThread for a write behind. */
  private fail(op: WriteOp, error: unknown): void {
    if (op.waiter) op.waiter.reject(error);
    else if (!this.threadFailures.has(op.threadId)) this.threadFailures.set(op.threadId, error);
  }
}

function threadsOf(ops: readonly WriteOp[]): string[] {
  return [...new Set(ops.map((op) => op.threadId))];
}
