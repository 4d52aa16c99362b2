/**
 * Threads of traces (LangSmith's threads view, `client.threads.query()`): a project's traces — its
 * root runs — grouped by the thread their metadata names, `thread_id`, else `session_id`, else
 * `conversation_id`, as LangSmith groups them. Each thread's stats come in one statement: the
 * matching roots grouped by thread (a root carries its trace's tokens and costs, rollups.ts),
 * with the totals over every thread matching from the same rows via GROUPING SETS.
 */
import { sql, type Kysely, type RawBuilder } from '@berth/db';
import { compileFilter, threadSql } from '../filter/compile.js';
import type { FilterNode } from '../filter/parse.js';
import { statsOf, type AggregateRow, type RunStats } from './run-stats.js';
import type { TraceTables } from './trace-store.js';

export interface ThreadQuery {
  sessionId: string;
  /** Inclusive bound on a trace's start_time. */
  start?: Date;
  /** Exclusive bound on a trace's start_time. */
  end?: Date;
  threadId?: string;
  /** On each trace's root run. */
  filter?: FilterNode;
  limit: number;
  /** The last thread of the previous page (most recently active first). */
  after?: ThreadCursor;
}

export interface ThreadCursor {
  last_start_time: Date;
  thread_id: string;
}

export interface ThreadRow {
  thread_id: string;
  /** Of its traces (run_count: how many; error_count: those that failed); tokens and costs of their llm runs. */
  stats: RunStats;
  first_start_time: Date;
  last_end_time: Date | null;
  first_trace_id: string;
  last_trace_id: string;
}

export interface ThreadPage {
  threads: ThreadRow[];
  next?: ThreadCursor;
  /** Over every thread matching; undefined when none does. */
  totals?: ThreadRow;
  threadCount: number;
}

type Raw = AggregateRow & {
  thread_id: string | null;
  is_total: boolean;
  thread_count: string;
  first_start_time: Date;
  last_end_time: Date | null;
  first_trace_id: string;
  last_trace_id: string;
};

/** The traces of the query's threads: root runs naming a thread, with that thread. */
function tracesOf(tenantId: string, q: ThreadQuery): RawBuilder<unknown> {
  const where = [sql`r.tenant_id = ${tenantId}::uuid`, sql`r.session_id = ${q.sessionId}::uuid`, sql`r.is_root`];
  if (q.start) where.push(sql`r.start_time >= ${q.start.toISOString()}::timestamptz`);
  if (q.end) where.push(sql`r.start_time < ${q.end.toISOString()}::timestamptz`);
  if (q.filter) where.push(compileFilter(q.filter));
  const thread = threadSql('r');
  where.push(q.threadId ? sql`${thread} = ${q.threadId}` : sql`${thread} IS NOT NULL`);
  return sql`SELECT r.id, r.start_time, r.end_time, r.status, r.prompt_tokens, r.completion_tokens, r.total_tokens, r.prompt_cost,
    r.completion_cost, r.total_cost, ${thread} AS thread_id FROM runs r WHERE ${sql.join(where, sql` AND `)}`;
}

export async function queryThreads(db: Kysely<TraceTables>, tenantId: string, q: ThreadQuery): Promise<ThreadPage> {
  const after = q.after ? sql`(last_run_start_time, thread_id) < (${q.after.last_start_time.toISOString()}::timestamptz, ${q.after.thread_id})` : sql`true`;
  // Per thread and in total (thread_id NULL): the totals are over every thread, not this page.
  const { rows } = await sql<Raw>`
    WITH traces AS (${tracesOf(tenantId, q)}),
    grouped AS (
      SELECT t.thread_id, GROUPING(t.thread_id) = 1 AS is_total, count(*) AS run_count,
        count(*) FILTER (WHERE t.status = 'error') AS error_count,
        min(t.start_time) AS first_start_time, max(t.start_time) AS last_run_start_time, max(t.end_time) AS last_end_time,
        (array_agg(t.id ORDER BY t.start_time, t.id))[1] AS first_trace_id,
        (array_agg(t.id ORDER BY t.start_time DESC, t.id DESC))[1] AS last_trace_id,
        percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM (t.end_time - t.start_time))::float8) AS latency_p50,
        percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM (t.end_time - t.start_time))::float8) AS latency_p99,
        coalesce(sum(t.prompt_tokens), 0) AS prompt_tokens, coalesce(sum(t.completion_tokens), 0) AS completion_tokens,
        coalesce(sum(t.total_tokens), 0) AS total_tokens, coalesce(sum(t.prompt_cost), 0) AS prompt_cost,
        coalesce(sum(t.completion_cost), 0) AS completion_cost, coalesce(sum(t.total_cost), 0) AS total_cost,
        count(DISTINCT t.thread_id) AS thread_count
      FROM traces t
      GROUP BY GROUPING SETS ((t.thread_id), ())
    )
    (SELECT * FROM grouped WHERE is_total)
    UNION ALL
    (SELECT * FROM grouped WHERE NOT is_total AND ${after} ORDER BY last_run_start_time DESC, thread_id DESC LIMIT ${q.limit + 1})`.execute(db);
  const total = rows.find((row) => row.is_total);
  const threads = rows.filter((row) => !row.is_total).map(threadOf);
  const page = threads.slice(0, q.limit);
  const last = page.at(-1);
  const threadCount = total ? Number(total.thread_count) : 0;
  return {
    threads: page,
    ...(threads.length > q.limit && last ? { next: { last_start_time: last.stats.last_run_start_time!, thread_id: last.thread_id } } : {}),
    ...(total && threadCount > 0 ? { totals: threadOf(total) } : {}),
    threadCount,
  };
}

function threadOf(row: Raw): ThreadRow {
  return {
    thread_id: row.thread_id ?? '',
    stats: statsOf(row),
    first_start_time: row.first_start_time,
    last_end_time: row.last_end_time,
    first_trace_id: row.first_trace_id,
    last_trace_id: row.last_trace_id,
  };
}

/** A cursor as clients carry it: opaque text. */
export function encodeThreadCursor(cursor: ThreadCursor): string {
  return Buffer.from(JSON.stringify(['t', cursor.last_start_time.toISOString(), cursor.thread_id])).toString('base64url');
}

/** The cursor of `text`, or undefined when it is not one this store made. */
export function decodeThreadCursor(text: string): ThreadCursor | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
    if (!Array.isArray(value) || value.length !== 3 || value[0] !== 't' || typeof value[1] !== 'string' || typeof value[2] !== 'string') return undefined;
    const last = new Date(value[1]);
    if (Number.isNaN(last.getTime())) return undefined;
    return { last_start_time: last, thread_id: value[2] };
  } catch {
    return undefined;
  }
}
