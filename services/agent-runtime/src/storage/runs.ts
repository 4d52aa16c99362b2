/**
 * Runs: queued per thread (the oldest unfinished run of a thread goes first, one at a time),
 * claimed by workers under a lease that a dead worker lets expire, so another takes over.
 */
import type pg from 'pg';
import { systemClock, type Clock } from '@berth/clock';
import { ConflictError, NotFoundError } from '@berth/errors';
import { leaseExpiry, NO_TAKEOVER, takeoverCondition, type Takeover } from '@berth/lease';
import { ASSISTANT_COLUMNS, type Assistant } from './assistants.js';
import { isTransientDbError } from './retry.js';
import { filterClauses, jsonParam, UNFINISHED, type Json, type JsonObject, type MetadataFilter } from './sql.js';

export type RunStatus = 'pending' | 'running' | 'success' | 'error' | 'timeout' | 'interrupted';
export type MultitaskStrategy = 'reject' | 'interrupt' | 'rollback' | 'enqueue';

/** What a protocol v2 run records in its kwargs (see protocol/events.ts). */
export interface ProtocolRun {
  /** The graph, named in the run's root lifecycle events. */
  graph: string;
  /** The interrupts the run resumes (its `input.answered`). */
  answered: string[];
}

/** What the run was asked to do (the request body, as stored). */
export interface RunKwargs {
  input?: Json;
  command?: { resume?: Json; update?: Json; goto?: Json } | null;
  config?: JsonObject;
  context?: JsonObject;
  stream_mode: string[];
  stream_subgraphs: boolean;
  stream_resumable: boolean;
  interrupt_before?: string[] | '*';
  interrupt_after?: string[] | '*';
  checkpoint_id?: string;
  durability?: 'sync' | 'async' | 'exit';
  on_completion?: 'delete' | 'keep';
  temporary: boolean;
  /** Request headers passed on to the graph's configurable (x-* and user-agent). */
  headers?: Record<string, string>;
  /** Where the run is POSTed when it ends. */
  webhook?: string;
  /** Started through protocol v2: the run publishes protocol events (see protocol/events.ts). */
  protocol?: ProtocolRun;
}

/** How a run ended (or where it is): its status and, once finished, its final values. */
export interface RunResult {
  status: RunStatus;
  output: Json | null;
}

/** A run a worker has just taken, with what it needs to start it. */
export interface ClaimedRun {
  run: Run;
  /** The run's assistant; undefined when it was deleted meanwhile. */
  assistant?: Assistant;
  /** A cancel asked for before the worker listened for one. */
  cancel?: 'interrupt' | 'rollback';
}

export type { Takeover } from '@berth/lease';

/** SQL: run `row` is running under a lease that `takeover` may take over at `now` (see @berth/lease). */
const takenOver = (row: string, now: number, takeover: Takeover) => `(${row}.status = 'running' AND ${takeoverCondition(row, now, takeover)})`;

/** How a run ended, as its attempt records it (RunStore.complete). */
export interface RunEnding {
  runId: string;
  owner: string;
  /** The attempt that ends it: refused when another attempt holds the run. */
  attempt: number;
  status: Exclude<RunStatus, 'pending' | 'running'>;
  output: Json | null;
  failed: boolean;
  interrupted: boolean;
  values?: Json;
  interrupts?: JsonObject;
  error: Json | null;
}

export interface Run {
  run_id: string;
  thread_id: string;
  assistant_id: string;
  status: RunStatus;
  metadata: JsonObject;
  kwargs: RunKwargs;
  multitask_strategy: MultitaskStrategy;
  attempt: number;
  available_at: Date;
  created_at: Date;
  updated_at: Date;
  /** Set by {@link RunStore.claim}: the thread's latest checkpoint when the run first started. */
  start_checkpoint_id?: string | null;
}

const COLUMNS = 'run_id, thread_id, assistant_id, status, metadata, kwargs, multitask_strategy, attempt, available_at, created_at, updated_at';
/** A run's place in its thread's queue: its creation time at full precision (as text) and its id. */
export interface RunCursor {
  created: string;
  run_id: string;
}

export interface CreateRun {
  run_id: string;
  thread_id: string;
  assistant_id: string;
  /** Stamped into the thread's metadata by its first run, so its state can be read later. */
  graph_id: string;
  metadata: JsonObject;
  kwargs: RunKwargs;
  multitask_strategy: MultitaskStrategy;
  after_seconds: number;
  /** Authorization filter on the thread's metadata: a thread that does not match is "not found". */
  threadFilter?: MetadataFilter;
  /** Claim the run for this worker in the same statement when it may start at once (see claim). */
  claimFor?: { owner: string; leaseMs: number };
}

type AssistantRow = Omit<Assistant, 'created_at' | 'updated_at'> & { created_at: string; updated_at: string };
const assistantOf = (row: AssistantRow | null): Assistant | undefined =>
  row ? { ...row, created_at: new Date(row.created_at), updated_at: new Date(row.updated_at) } : undefined;

/** What a run naming no existing assistant (nor graph) is told; worded as the LangGraph API words it. */
export function noAssistantFor(ref: string): string {
  return `No assistant found for "${ref}". Make sure the assistant ID is for a valid assistant or a valid graph ID.`;
}

/** SQL: the run's thread matches the authorization filter (its values appended to `params`). */
const threadMatches = (filter: MetadataFilter, params: unknown[]) =>
  `EXISTS (SELECT 1 FROM threads t WHERE t.thread_id = runs.thread_id AND ${filterClauses('t.metadata', filter, params).join(' AND ')})`;

export interface RunStoreOptions {
  /** The lease clock: leases are written and compared in its time. @default systemClock */
  clock?: Clock;
}

export class RunStore {
  private readonly clock: Clock;

  constructor(
    private readonly pool: pg.Pool,
    options: RunStoreOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /**
   * Queues a run on its thread and marks the thread busy. With `reject` a thread that has an
   * unfinished run is a conflict; with `interrupt`/`rollback` the unfinished runs are returned so
   * the caller can stop them.
   */
  async create(input: CreateRun): Promise<{ run: Run; superseded: Pick<Run, 'run_id' | 'status'>[]; claimed?: ClaimedRun }> {
    // One round trip: see migrations/0003_create_run_claims.sql.
    const { rows } = await this.pool.query<
      Run & {
        outcome: 'created' | 'not_found' | 'assistant_not_found' | 'busy';
        superseded: Pick<Run, 'run_id' | 'status'>[];
        claimed: boolean | null;
        assistant: AssistantRow | null;
      }
    >('SELECT * FROM create_run_v2($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $8, $9::jsonb, $10, $11::timestamptz)', [
      input.run_id,
      input.thread_id,
      input.assistant_id,
      input.graph_id,
      jsonParam(input.metadata),
      jsonParam(input.kwargs),
      input.multitask_strategy,
      input.after_seconds,
      jsonParam(input.threadFilter ?? []),
      input.claimFor?.owner ?? null,
      input.claimFor ? leaseExpiry(this.clock.now(), input.claimFor.leaseMs) : null,
    ]);
    const { outcome, superseded, claimed, assistant, ...run } = rows[0]!;
    if (outcome === 'not_found') throw new NotFoundError(`Thread with ID ${input.thread_id} not found`);
    if (outcome === 'assistant_not_found') throw new NotFoundError(noAssistantFor(input.assistant_id));
    if (outcome === 'busy') {
      throw new ConflictError(`Thread ${input.thread_id} is busy with run ${superseded[0]!.run_id}; multitask_strategy is reject`);
    }
    return { run, superseded, ...(claimed ? { claimed: { run, assistant: assistantOf(assistant) } } : {}) };
  }

  /** A run of a thread; NotFoundError when missing or when its thread does not match `threadFilter`. */
  async get(threadId: string, runId: string, threadFilter?: MetadataFilter): Promise<Run> {
    const params: unknown[] = [runId, threadId];
    const thread = threadFilter?.length ? ` AND ${threadMatches(threadFilter, params)}` : '';
    const { rows } = await this.pool.query<Run>(`SELECT ${COLUMNS} FROM runs WHERE run_id = $1 AND thread_id = $2${thread}`, params);
    if (!rows[0]) throw new NotFoundError(`Run ${runId} not found`);
    return rows[0];
  }

  async getById(runId: string): Promise<Run | undefined> {
    const { rows } = await this.pool.query<Run>(`SELECT ${COLUMNS} FROM runs WHERE run_id = $1`, [runId]);
    return rows[0];
  }

  async list(threadId: string, query: { limit: number; offset: number; status?: RunStatus }): Promise<Run[]> {
    const params: unknown[] = [threadId, query.limit, query.offset];
    let filter = '';
    if (query.status) {
      params.push(query.status);
      filter = `AND status = $${params.length}`;
    }
    const { rows } = await this.pool.query<Run>(
      `SELECT ${COLUMNS} FROM runs WHERE thread_id = $1 ${filter} ORDER BY created_at DESC LIMIT $2 OFFSET $3`,
      params,
    );
    return rows;
  }

  /**
   * Runs to cancel in bulk, newest first: those of `runIds` (any status, so the caller can tell
   * which do not exist), or the unfinished ones in `statuses`; on `threadId` alone when given, on
   * threads matching `threadFilter`, but not those of `exclude`.
   */
  async findForCancel(query: {
    runIds?: readonly string[];
    statuses?: readonly RunStatus[];
    threadId?: string;
    threadFilter?: MetadataFilter;
    /** Runs already handled (a running run stays running for a moment after its cancel). */
    exclude?: readonly string[];
    limit: number;
  }): Promise<Run[]> {
    const params: unknown[] = [];
    const where: string[] = [];
    const $ = (value: unknown) => `$${params.push(value)}`;
    if (query.runIds) where.push(`run_id = ANY(${$(query.runIds)}::uuid[])`);
    if (query.statuses) where.push(`status = ANY(${$(query.statuses)}::text[])`);
    if (query.threadId) where.push(`thread_id = ${$(query.threadId)}::uuid`);
    if (query.exclude?.length) where.push(`run_id <> ALL(${$(query.exclude)}::uuid[])`);
    if (query.threadFilter?.length) where.push(threadMatches(query.threadFilter, params));
    params.push(query.limit);
    const { rows } = await this.pool.query<Run>(
      `SELECT ${COLUMNS} FROM runs WHERE ${where.length ? where.join(' AND ') : 'true'} ORDER BY created_at DESC, run_id DESC LIMIT $${params.length}`,
      params,
    );
    return rows;
  }

  /**
   * The deployment's unfinished runs in `statuses`, across threads, in queue order (oldest first),
   * on threads matching `threadFilter`; a page of them and how many there are.
   */
  async unfinished(query: {
    statuses: readonly ('pending' | 'running')[];
    threadFilter?: MetadataFilter;
    limit: number;
    offset: number;
  }): Promise<{ runs: Run[]; total: number }> {
    const params: unknown[] = [query.statuses];
    // Only unfinished statuses: the partial index runs_unfinished_by_thread holds them all, however many runs have ended.
    const where = [`status = ANY($1::text[])`, UNFINISHED];
    if (query.threadFilter?.length) where.push(threadMatches(query.threadFilter, params));
    const scope = where.join(' AND ');
    const page = [...params, query.limit, query.offset];
    const [found, counted] = await Promise.all([
      this.pool.query<Run>(
        `SELECT ${COLUMNS} FROM runs WHERE ${scope} ORDER BY created_at, run_id LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
        page,
      ),
      this.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM runs WHERE ${scope}`, params),
    ]);
    return { runs: found.rows, total: counted.rows[0]!.n };
  }

  /**
   * The first run of a thread after `after` in queue order (all of them from the first with
   * null), only unfinished ones with `unfinished`; with its own cursor.
   */
  async nextAfter(threadId: string, after: RunCursor | null, unfinished = false): Promise<(Run & { cursor: RunCursor }) | undefined> {
    const { rows } = await this.pool.query<Run & { created: string }>(
      `SELECT ${COLUMNS}, created_at::text AS created FROM runs
       WHERE thread_id = $1 AND ($2::text IS NULL OR (created_at, run_id) > ($2::timestamptz, $3::uuid)) ${unfinished ? `AND ${UNFINISHED}` : ''}
       ORDER BY created_at, run_id LIMIT 1`,
      [threadId, after?.created ?? null, after?.run_id ?? null],
    );
    const row = rows[0];
    if (!row) return undefined;
    const { created, ...run } = row;
    return { ...run, cursor: { created, run_id: run.run_id } };
  }

  /** The cursor of a run of the thread (`runId`), or of its newest run; undefined when there is none. */
  async cursor(threadId: string, runId?: string): Promise<RunCursor | undefined> {
    const { rows } = await this.pool.query<RunCursor>(
      `SELECT created_at::text AS created, run_id FROM runs WHERE thread_id = $1 AND ($2::uuid IS NULL OR run_id = $2)
       ORDER BY created_at DESC, run_id DESC LIMIT 1`,
      [threadId, runId ?? null],
    );
    return rows[0];
  }

  /** Deletes a finished run; an unfinished one must be cancelled first. */
  async delete(threadId: string, runId: string, threadFilter?: MetadataFilter): Promise<void> {
    const run = await this.get(threadId, runId, threadFilter);
    if (run.status === 'pending' || run.status === 'running') {
      throw new ConflictError(`Run ${runId} is ${run.status}; cancel it before deleting it`);
    }
    await this.pool.query('DELETE FROM runs WHERE run_id = $1', [runId]);
  }

  /**
   * Takes a run for execution when it is due, is the oldest unfinished run of its thread, and is
   * pending — or, when `takeover` allows it, held by a worker whose lease may be taken over (see
   * @berth/lease). Increments its attempt (the fencing token). Returns undefined otherwise.
   */
  async claim(runId: string, owner: string, leaseMs: number, takeover: Takeover = NO_TAKEOVER): Promise<ClaimedRun | undefined> {
    // Also remembers, at the first start, the thread's latest checkpoint (see markStarted), and
    // reads what the worker needs next in the same round trip: the assistant and a cancel that
    // came before the worker listened.
    const now = this.clock.now();
    const { rows } = await this.pool.query<Run & { cancel_action: 'interrupt' | 'rollback' | null; assistant: AssistantRow | null }>(
      `WITH claimed AS (
         UPDATE runs r SET status = 'running', attempt = attempt + 1, lease_owner = $2,
           lease_expires_at = $3::timestamptz, updated_at = now(),
           started = true,
           start_checkpoint_id = CASE WHEN r.started THEN r.start_checkpoint_id
             ELSE (SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = r.thread_id::text AND checkpoint_ns = '') END
         WHERE r.run_id = $1 AND r.available_at <= now()
           AND (r.status = 'pending' OR ${takenOver('r', now, takeover)})
           AND NOT EXISTS (SELECT 1 FROM runs o WHERE o.thread_id = r.thread_id AND o.status IN ('pending', 'running')
                             AND (o.created_at, o.run_id) < (r.created_at, r.run_id))
         RETURNING ${COLUMNS.split(', ')
           .map((c) => `r.${c}`)
           .join(', ')}, r.start_checkpoint_id, r.cancel_action
       )
       SELECT c.*, (SELECT to_jsonb(a) FROM (SELECT ${ASSISTANT_COLUMNS} FROM assistants WHERE assistant_id = c.assistant_id) a) AS assistant
       FROM claimed c`,
      [runId, owner, leaseExpiry(now, leaseMs)],
    );
    const row = rows[0];
    if (!row) return undefined;
    const { cancel_action, assistant, ...run } = row;
    return { run, assistant: assistantOf(assistant), ...(cancel_action ? { cancel: cancel_action } : {}) };
  }

  /**
   * Extends the lease of this attempt. `held` is false when it no longer holds the run (another
   * attempt took it over, or it ended); `cancel` is a cancellation asked for meanwhile.
   */
  async heartbeat(runId: string, owner: string, attempt: number, leaseMs: number): Promise<{ held: boolean; cancel?: 'interrupt' | 'rollback' }> {
    const { rows } = await this.pool.query<{ cancel_action: 'interrupt' | 'rollback' | null }>(
      `UPDATE runs SET lease_expires_at = $4::timestamptz
       WHERE run_id = $1 AND lease_owner = $2 AND attempt = $3 AND status = 'running' RETURNING cancel_action`,
      [runId, owner, attempt, leaseExpiry(this.clock.now(), leaseMs)],
    );
    if (!rows[0]) return { held: false };
    return rows[0].cancel_action ? { held: true, cancel: rows[0].cancel_action } : { held: true };
  }

  /** Records a cancellation of a running run, for its worker to see; false when it is not running. */
  async requestCancel(runId: string, action: 'interrupt' | 'rollback'): Promise<boolean> {
    const { rowCount } = await this.pool.query("UPDATE runs SET cancel_action = $2 WHERE run_id = $1 AND status = 'running'", [runId, action]);
    return rowCount === 1;
  }

  /**
   * Ends a run held by `owner`'s `attempt` and settles its thread in one transaction, under the
   * thread's row lock like the creation of a run (migrations/0013): the thread becomes `error`,
   * `interrupted`, `busy` (more runs queued) or `idle`, and takes the run's final values when it
   * has some. Returns false when the run was taken from this attempt meanwhile, and the thread's
   * next run when there is one — including one created while this run ended, which its creator
   * could not start.
   */
  async complete(input: RunEnding): Promise<{ finished: boolean; nextRunId?: string }> {
    const { rows } = await this.pool.query<{ finished: boolean; next_run_id: string | null }>(
      'SELECT * FROM complete_run($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9::jsonb, $10::jsonb, $11::jsonb)',
      [
        input.runId,
        input.owner,
        input.attempt,
        input.status,
        jsonParam(input.output),
        input.failed,
        input.interrupted,
        input.values !== undefined,
        jsonParam(input.values ?? null),
        jsonParam(input.interrupts ?? {}),
        input.error === null ? null : jsonParam(input.error),
      ],
    );
    const row = rows[0]!;
    return { finished: row.finished, ...(row.next_run_id ? { nextRunId: row.next_run_id } : {}) };
  }

  /**
   * Which part of an ending could not be stored, and why, when `complete` failed for good: each
   * value alone is serialized and then parsed by Postgres. Undefined when each passes alone.
   */
  async unstorable(input: RunEnding): Promise<{ field: string; reason: string } | undefined> {
    const values: Record<string, unknown> = { output: input.output, values: input.values, interrupts: input.interrupts, error: input.error };
    for (const [field, value] of Object.entries(values)) {
      if (value === undefined) continue;
      try {
        await this.pool.query('SELECT $1::jsonb IS NULL', [jsonParam(value)]);
      } catch (error) {
        if (isTransientDbError(error)) throw error;
        return { field, reason: (error as Error).message };
      }
    }
    return undefined;
  }

  /**
   * The end of a run that `complete` may have recorded before its answer was lost (the database
   * went away): when the run is no longer running and still at `attempt`, that attempt ended it.
   */
  async endedBy(runId: string, attempt: number): Promise<{ ended: boolean; nextRunId?: string }> {
    const { rows } = await this.pool.query<{ status: RunStatus; attempt: number; thread_id: string }>(
      'SELECT status, attempt, thread_id FROM runs WHERE run_id = $1',
      [runId],
    );
    const row = rows[0];
    if (!row || row.attempt !== attempt || row.status === 'running' || row.status === 'pending') return { ended: false };
    const next = await this.nextOnThread(row.thread_id);
    return { ended: true, ...(next ? { nextRunId: next.run_id } : {}) };
  }

  async startCheckpoint(runId: string): Promise<string | null> {
    const { rows } = await this.pool.query<{ start_checkpoint_id: string | null }>('SELECT start_checkpoint_id FROM runs WHERE run_id = $1', [runId]);
    return rows[0]?.start_checkpoint_id ?? null;
  }

  /** A run's status and, once it has finished, its final values; undefined when it is gone. */
  async result(runId: string): Promise<RunResult | undefined> {
    const { rows } = await this.pool.query<RunResult>('SELECT status, output FROM runs WHERE run_id = $1', [runId]);
    return rows[0];
  }

  /** Ends a run that never started (cancelled while pending). */
  async cancelPending(runId: string, action: 'interrupt' | 'rollback'): Promise<boolean> {
    const { rowCount } =
      action === 'rollback'
        ? await this.pool.query("DELETE FROM runs WHERE run_id = $1 AND status = 'pending'", [runId])
        : await this.pool.query("UPDATE runs SET status = 'interrupted', updated_at = now() WHERE run_id = $1 AND status = 'pending'", [runId]);
    return rowCount === 1;
  }

  /** Removes a run (rollback of a running run, once its worker stopped it). */
  async remove(runId: string): Promise<void> {
    await this.pool.query('DELETE FROM runs WHERE run_id = $1', [runId]);
  }

  /** The run that should go next on a thread, if any (the oldest unfinished one). */
  async nextOnThread(threadId: string): Promise<Run | undefined> {
    const { rows } = await this.pool.query<Run>(`SELECT ${COLUMNS} FROM runs WHERE thread_id = $1 AND ${UNFINISHED} ORDER BY created_at, run_id LIMIT 1`, [
      threadId,
    ]);
    return rows[0];
  }

  async hasUnfinished(threadId: string): Promise<boolean> {
    const { rowCount } = await this.pool.query(`SELECT 1 FROM runs WHERE thread_id = $1 AND ${UNFINISHED} LIMIT 1`, [threadId]);
    return (rowCount ?? 0) > 0;
  }

  /**
   * Runs waiting (pending) and executing (running), and how long the oldest pending run has waited
   * (by the database's clock, which stamped it): what the metrics report of the queue. Reads only
   * unfinished runs, through their partial index.
   */
  async queueStats(): Promise<{ pending: number; running: number; oldestPendingSeconds: number }> {
    const { rows } = await this.pool.query<{ pending: number; running: number; oldest: number | null }>(
      `SELECT count(*) FILTER (WHERE status = 'pending')::int AS pending, count(*) FILTER (WHERE status = 'running')::int AS running,
              extract(epoch FROM now() - min(created_at) FILTER (WHERE status = 'pending'))::float8 AS oldest
       FROM runs WHERE ${UNFINISHED}`,
    );
    const row = rows[0]!;
    return { pending: row.pending, running: row.running, oldestPendingSeconds: Math.max(0, row.oldest ?? 0) };
  }

  /**
   * Pending runs that are due, and — when `takeover` allows it — runs whose lease may be taken
   * over: candidates to (re)dispatch.
   */
  async orphaned(takeover: Takeover = NO_TAKEOVER, limit = 100): Promise<string[]> {
    const { rows } = await this.pool.query<{ run_id: string }>(
      `SELECT run_id FROM runs r
       WHERE ${takenOver('r', this.clock.now(), takeover)} OR (r.status = 'pending' AND r.available_at <= now() - interval '5 seconds')
       ORDER BY created_at LIMIT $1`,
      [limit],
    );
    return rows.map((r) => r.run_id);
  }
}
