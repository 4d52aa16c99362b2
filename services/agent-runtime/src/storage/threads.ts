/**
 * Threads: durable conversation state. The state itself lives in checkpoints; the thread row
 * keeps metadata, status and a copy of the latest values for search and GET.
 */
import type pg from 'pg';
import { ConflictError, NotFoundError } from '@berth/errors';
import { containsClause, filterClauses, inTransaction, jsonParam, orderBy, UNFINISHED, type Json, type JsonObject, type MetadataFilter } from './sql.js';
import { PRUNABLE, pruneLocked, type PruneStrategy } from './thread-ttl.js';

export type ThreadStatus = 'idle' | 'busy' | 'interrupted' | 'error';

/** A thread's time to live: it expires `minutes` after its last activity and is then pruned by `strategy`. */
export interface ThreadTtl {
  strategy: PruneStrategy;
  minutes: number;
}

export interface Thread {
  thread_id: string;
  metadata: JsonObject;
  config: JsonObject;
  status: ThreadStatus;
  values: Json | null;
  interrupts: JsonObject;
  error: Json | null;
  temporary: boolean;
  created_at: Date;
  updated_at: Date;
  state_updated_at: Date;
  ttl_strategy: PruneStrategy | null;
  ttl_minutes: number | null;
  /** When the sweeper prunes the thread (unless a run is active then); null: not due. */
  expires_at: Date | null;
}

export interface ThreadQuery {
  ids?: string[];
  metadata?: JsonObject;
  values?: JsonObject;
  status?: ThreadStatus;
  limit: number;
  offset: number;
  sort_by?: string;
  sort_order?: string;
  /** Authorization filter on the thread's metadata: only matching threads are found. */
  filter?: MetadataFilter;
}

const SORTABLE = ['thread_id', 'status', 'created_at', 'updated_at', 'state_updated_at'] as const;
const COLUMNS =
  'thread_id, metadata, config, status, "values", interrupts, error, temporary, created_at, updated_at, state_updated_at, ttl_strategy, ttl_minutes, expires_at';
/** SQL: the expiry of a thread with TTL `$minutes` whose activity is now. */
const expiry = (minutes: string) => `now() + ${minutes}::float8 * interval '1 minute'`;

export interface ThreadStoreOptions {
  /** The TTL of threads created without one (langgraph.json checkpointer.ttl). @default none: they live until deleted */
  defaultTtl?: ThreadTtl;
}

export class ThreadStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly options: ThreadStoreOptions = {},
  ) {}

  /**
   * Creates a thread. An existing thread is a conflict with `if_exists: 'raise'`, and also when it
   * does not match `filter` (the caller may not see it); otherwise it is returned as it is.
   */
  async create(
    input: { thread_id: string; metadata: JsonObject; if_exists: 'raise' | 'do_nothing'; temporary?: boolean; ttl?: ThreadTtl },
    filter?: MetadataFilter,
  ): Promise<Thread> {
    const created = await this.insert(input);
    if (created) return created;
    const existing = await this.find(input.thread_id, filter);
    if (input.if_exists === 'do_nothing' && existing) return existing;
    throw new ConflictError(`Thread ${input.thread_id} already exists`);
  }

  /** Inserts a thread unless one with that id exists; undefined when it did. */
  async insert(input: { thread_id: string; metadata: JsonObject; temporary?: boolean; ttl?: ThreadTtl }): Promise<Thread | undefined> {
    const { rows } = await this.pool.query<Thread>(
      `INSERT INTO threads (thread_id, metadata, temporary, ttl_strategy, ttl_minutes, expires_at)
       VALUES ($1, $2::jsonb, $3, $4, $5::float8, ${expiry('$5')})
       ON CONFLICT (thread_id) DO NOTHING RETURNING ${COLUMNS}`,
      [input.thread_id, jsonParam(input.metadata), input.temporary ?? false, ...this.ttlParams(input.ttl)],
    );
    return rows[0];
  }

  /** The thread; NotFoundError when it does not exist or does not match `filter`. */
  async get(threadId: string, filter?: MetadataFilter): Promise<Thread> {
    const thread = await this.find(threadId, filter);
    if (!thread) throw new NotFoundError(`Thread with ID ${threadId} not found`);
    return thread;
  }

  /**
   * Merges `metadata` over the thread's metadata and, with `ttl`, replaces its TTL (counted from
   * now); NotFoundError when missing or not matching `filter`.
   */
  async patch(threadId: string, patch: { metadata?: JsonObject; ttl?: ThreadTtl | null }, filter?: MetadataFilter): Promise<Thread> {
    const params: unknown[] = [threadId, jsonParam(patch.metadata ?? {}), patch.ttl !== undefined, patch.ttl?.strategy ?? null, patch.ttl?.minutes ?? null];
    const where = ['thread_id = $1', ...filterClauses('metadata', filter, params)].join(' AND ');
    const { rows } = await this.pool.query<Thread>(
      `UPDATE threads SET metadata = metadata || $2::jsonb, updated_at = now(),
         ttl_strategy = CASE WHEN $3 THEN $4 ELSE ttl_strategy END,
         ttl_minutes = CASE WHEN $3 THEN $5::float8 ELSE ttl_minutes END,
         expires_at = CASE WHEN $3 THEN ${expiry('$5')} ELSE expires_at END
       WHERE ${where} RETURNING ${COLUMNS}`,
      params,
    );
    if (!rows[0]) throw new NotFoundError(`Thread with ID ${threadId} not found`);
    return rows[0];
  }

  /** The number the thread's next protocol v2 event gets when its broker stream starts again (0 for a missing thread). */
  async eventSeq(threadId: string): Promise<number> {
    const { rows } = await this.pool.query<{ event_seq: string }>('SELECT event_seq FROM threads WHERE thread_id = $1', [threadId]);
    return rows[0] ? Number(rows[0].event_seq) : 0;
  }

  /** Records that the thread's protocol v2 events were numbered up to `next - 1` (never lowers it). */
  async raiseEventSeq(threadId: string, next: number): Promise<void> {
    await this.pool.query('UPDATE threads SET event_seq = GREATEST(event_seq, $2::bigint) WHERE thread_id = $1', [threadId, next]);
  }

  /** Deletes the thread and its runs (checkpoints are the checkpointer's to delete). */
  async delete(threadId: string, filter?: MetadataFilter): Promise<void> {
    const params: unknown[] = [threadId];
    const where = ['thread_id = $1', ...filterClauses('metadata', filter, params)].join(' AND ');
    const { rowCount } = await this.pool.query(`DELETE FROM threads WHERE ${where}`, params);
    if (!rowCount) throw new NotFoundError(`Thread with ID ${threadId} not found`);
  }

  /**
   * Prunes the threads of `threadIds` that match `filter` and have no pending or running run
   * (those are left alone: cancel their runs first); returns how many were pruned.
   */
  async prune(threadIds: readonly string[], strategy: PruneStrategy, filter?: MetadataFilter): Promise<number> {
    return inTransaction(this.pool, async (client) => {
      const params: unknown[] = [threadIds];
      const where = ['thread_id = ANY($1::uuid[])', PRUNABLE, ...filterClauses('metadata', filter, params)].join(' AND ');
      const { rows } = await client.query<{ thread_id: string }>(`SELECT thread_id FROM threads WHERE ${where} FOR UPDATE SKIP LOCKED`, params);
      await pruneLocked(
        client,
        rows.map((r) => r.thread_id),
        strategy,
      );
      return rows.length;
    });
  }

  /**
   * Prunes, each by its own strategy, at most `limit` threads whose TTL expired at `now` and that
   * have no pending or running run (they are swept once it ended); returns how many.
   */
  async sweepExpired(now: Date, limit: number): Promise<{ deleted: number; trimmed: number }> {
    return inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<{ thread_id: string; ttl_strategy: PruneStrategy }>(
        `SELECT thread_id, ttl_strategy FROM threads WHERE expires_at <= $1 AND ${PRUNABLE}
         ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
        [now, limit],
      );
      const of = (strategy: PruneStrategy) => rows.filter((r) => r.ttl_strategy === strategy).map((r) => r.thread_id);
      const [deleted, trimmed] = [of('delete'), of('keep_latest')];
      await pruneLocked(client, deleted, 'delete');
      await pruneLocked(client, trimmed, 'keep_latest');
      return { deleted: deleted.length, trimmed: trimmed.length };
    });
  }

  /** A new thread with the same metadata and values (the caller copies checkpoints). */
  async copy(threadId: string, newThreadId: string, filter?: MetadataFilter): Promise<Thread> {
    const params: unknown[] = [threadId, newThreadId, ...this.ttlParams(undefined)];
    const where = ['thread_id = $1', ...filterClauses('metadata', filter, params)].join(' AND ');
    // The copy is a new thread: it gets the default TTL, not the original's.
    const { rows } = await this.pool.query<Thread>(
      `INSERT INTO threads (thread_id, metadata, config, status, "values", interrupts, error, ttl_strategy, ttl_minutes, expires_at)
       SELECT $2, metadata, config, CASE WHEN status = 'busy' THEN 'idle' ELSE status END, "values", interrupts, error, $3, $4::float8, ${expiry('$4')}
       FROM threads WHERE ${where} RETURNING ${COLUMNS}`,
      params,
    );
    if (!rows[0]) throw new NotFoundError(`Thread with ID ${threadId} not found`);
    return rows[0];
  }

  async search(query: ThreadQuery): Promise<Thread[]> {
    const params: unknown[] = [];
    const where = this.filters(query, params);
    params.push(query.limit, query.offset);
    const { rows } = await this.pool.query<Thread>(
      `SELECT ${COLUMNS} FROM threads ${where} ORDER BY ${orderBy(query.sort_by, SORTABLE, 'created_at', query.sort_order)}, thread_id
       LIMIT $${params.length - 1} OFFSET $${params.length}`,
      params,
    );
    return rows;
  }

  async count(query: Omit<ThreadQuery, 'limit' | 'offset'>): Promise<number> {
    const params: unknown[] = [];
    const { rows } = await this.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM threads ${this.filters(query, params)}`, params);
    return rows[0]!.n;
  }

  /** Records the outcome of a run: status, latest values and open interrupts. */
  async setState(
    threadId: string,
    state: { status: ThreadStatus; values?: Json | null; interrupts?: JsonObject; error?: Json | null },
    client: pg.Pool | pg.PoolClient = this.pool,
  ): Promise<void> {
    await client.query(
      `UPDATE threads SET status = $2,
         "values" = CASE WHEN $3::boolean THEN $4::jsonb ELSE "values" END,
         interrupts = COALESCE($5::jsonb, interrupts), error = $6::jsonb,
         updated_at = now(), state_updated_at = CASE WHEN $3::boolean THEN now() ELSE state_updated_at END,
         expires_at = ${expiry('ttl_minutes')}
       WHERE thread_id = $1`,
      [
        threadId,
        state.status,
        state.values !== undefined,
        jsonParam(state.values ?? null),
        state.interrupts !== undefined ? jsonParam(state.interrupts) : null,
        state.error !== undefined && state.error !== null ? jsonParam(state.error) : null,
      ],
    );
  }

  /**
   * Marks the thread idle when none of its runs is pending or running (after a pending run was
   * cancelled). Decided under the thread's row lock, which a run's creation holds while it inserts
   * its run: a run created meanwhile keeps the thread busy. Returns whether it did.
   */
  async idleWhenNoRuns(threadId: string): Promise<boolean> {
    return inTransaction(this.pool, async (client) => {
      await client.query('SELECT 1 FROM threads WHERE thread_id = $1 FOR NO KEY UPDATE', [threadId]);
      // A statement of its own: its snapshot is taken once the lock is held.
      const { rowCount } = await client.query(`SELECT 1 FROM runs WHERE thread_id = $1 AND ${UNFINISHED} LIMIT 1`, [threadId]);
      if (rowCount) return false;
      await this.setState(threadId, { status: 'idle' }, client);
      return true;
    });
  }

  /** The thread, or undefined when it does not exist or does not match `filter`. */
  async find(threadId: string, filter?: MetadataFilter): Promise<Thread | undefined> {
    const params: unknown[] = [threadId];
    const where = ['thread_id = $1', ...filterClauses('metadata', filter, params)].join(' AND ');
    const { rows } = await this.pool.query<Thread>(`SELECT ${COLUMNS} FROM threads WHERE ${where}`, params);
    return rows[0];
  }

  /** `[strategy, minutes]` of a new thread: `ttl`, else the default (nulls: none). */
  private ttlParams(ttl: ThreadTtl | undefined): [PruneStrategy | null, number | null] {
    const effective = ttl ?? this.options.defaultTtl;
    return [effective?.strategy ?? null, effective?.minutes ?? null];
  }

  private filters(query: Omit<ThreadQuery, 'limit' | 'offset'>, params: unknown[]): string {
    const where = [
      ...containsClause('metadata', query.metadata, params),
      ...containsClause('"values"', query.values, params),
      ...filterClauses('metadata', query.filter, params),
    ];
    where.push('NOT temporary');
    if (query.ids?.length) {
      params.push(query.ids);
      where.push(`thread_id = ANY($${params.length}::uuid[])`);
    }
    if (query.status) {
      params.push(query.status);
      where.push(`status = $${params.length}`);
    }
    return `WHERE ${where.join(' AND ')}`;
  }
}
