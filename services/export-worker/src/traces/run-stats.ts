/**
 * Statistics of projects' runs (the console's project charts, LangSmith's `include_stats`): run
 * and error counts, latency percentiles, tokens and cost, as totals per project and, when asked,
 * per equal time bucket — all in one statement over the (session_id, start_time) index range,
 * grouped twice with GROUPING SETS rather than read twice.
 */
import { sql, type Kysely } from '@berth/db';
import { compileFilter } from '../filter/compile.js';
import type { FilterNode } from '../filter/parse.js';
import type { TraceTables } from './trace-store.js';

/** Aggregates of a set of runs; latency (seconds) is of the finished ones, null when none is. */
export interface RunStats {
  run_count: number;
  error_count: number;
  latency_p50: number | null;
  latency_p99: number | null;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_cost: number;
  completion_cost: number;
  total_cost: number;
  last_run_start_time: Date | null;
}

export const EMPTY_STATS: RunStats = {
  run_count: 0,
  error_count: 0,
  latency_p50: null,
  latency_p99: null,
  prompt_tokens: 0,
  completion_tokens: 0,
  total_tokens: 0,
  prompt_cost: 0,
  completion_cost: 0,
  total_cost: 0,
  last_run_start_time: null,
};

export interface StatsQuery {
  sessionIds: string[];
  /** Inclusive bound on start_time; every run before `end` when absent. */
  start?: Date;
  /** Exclusive bound on start_time. */
  end?: Date;
  /** Buckets of this many seconds from `start` (which is then required); totals only when absent. */
  bucketSeconds?: number;
  filter?: FilterNode;
  isRoot?: boolean;
}

export interface ProjectStats {
  totals: RunStats;
  /** Bucket index (0 from `start`) → its stats; buckets without runs are absent. */
  buckets: Map<number, RunStats>;
}

/** A bucket size a person reads easily, giving at most this many buckets. */
export const TARGET_BUCKETS = 120;
/** The most buckets one request may ask for. */
export const MAX_BUCKETS = 1000;
const NICE_SECONDS = [1, 5, 10, 30, 60, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400, 7 * 86_400, 30 * 86_400];

/** The bucket size for a range: the smallest "nice" one giving at most TARGET_BUCKETS buckets. */
export function bucketSecondsFor(rangeMs: number): number {
  const seconds = rangeMs / 1000;
  return NICE_SECONDS.find((size) => Math.ceil(seconds / size) <= TARGET_BUCKETS) ?? Math.ceil(seconds / TARGET_BUCKETS);
}

/** Aggregates as Postgres returns them (sums and counts of bigint as strings). */
export interface AggregateRow {
  run_count: string;
  error_count: string;
  latency_p50: number | null;
  latency_p99: number | null;
  prompt_tokens: string | null;
  completion_tokens: string | null;
  total_tokens: string | null;
  prompt_cost: string | null;
  completion_cost: string | null;
  total_cost: string | null;
  last_run_start_time: Date | null;
}

const USAGE = ['prompt_tokens', 'completion_tokens', 'total_tokens', 'prompt_cost', 'completion_cost', 'total_cost'] as const;

type StatsRow = AggregateRow & { session_id: string; bucket: number | null };

/** Stats per project of `tenantId` (projects without runs in the range are absent). */
export async function projectStats(db: Kysely<TraceTables>, tenantId: string, q: StatsQuery): Promise<Map<string, ProjectStats>> {
  const result = new Map<string, ProjectStats>();
  if (q.sessionIds.length === 0) return result;
  const where = [sql`tenant_id = ${tenantId}::uuid`, sql`session_id = ANY(${q.sessionIds}::uuid[])`];
  if (q.start) where.push(sql`start_time >= ${q.start.toISOString()}::timestamptz`);
  if (q.end) where.push(sql`start_time < ${q.end.toISOString()}::timestamptz`);
  if (q.isRoot !== undefined) where.push(sql`is_root = ${q.isRoot}`);
  if (q.filter) where.push(compileFilter(q.filter));
  const bucket =
    q.bucketSeconds && q.start
      ? sql`floor(extract(epoch FROM (start_time - ${q.start.toISOString()}::timestamptz)) / ${q.bucketSeconds})::int`
      : sql`NULL::int`;
  const groups = q.bucketSeconds && q.start ? sql`GROUPING SETS ((session_id), (session_id, bucket))` : sql`session_id, bucket`;
  const latency = sql`extract(epoch FROM (end_time - start_time))::float8`;
  // A root carries the sums of its trace's llm runs (rollups.ts), so tokens and costs are counted
  // once: of the roots (their traces') unless a filter or is_root=false picks runs within traces,
  // then of the llm runs picked.
  const counted = q.isRoot === true || (q.isRoot === undefined && !q.filter) ? sql`is_root` : sql`run_type = 'llm'`;
  // The bucket is computed once in the inner query: the grouping names it, not a second copy of
  // the expression (whose parameters would make it a different expression to the planner).
  const { rows } = await sql<StatsRow>`
    SELECT session_id, bucket, count(*) AS run_count, count(*) FILTER (WHERE status = 'error') AS error_count,
      percentile_cont(0.5) WITHIN GROUP (ORDER BY latency) AS latency_p50,
      percentile_cont(0.99) WITHIN GROUP (ORDER BY latency) AS latency_p99,
      ${sql.join(USAGE.map((f) => sql`sum(${sql.id(f)}) FILTER (WHERE counted) AS ${sql.id(f)}`))},
      max(start_time) AS last_run_start_time
    FROM (SELECT session_id, start_time, status, ${sql.join(USAGE.map((f) => sql.id(f)))},
        ${counted} AS counted, ${latency} AS latency, ${bucket} AS bucket
      FROM runs WHERE ${sql.join(where, sql` AND `)}) AS r
    GROUP BY ${groups}`.execute(db);
  for (const row of rows) {
    let project = result.get(row.session_id);
    if (!project) result.set(row.session_id, (project = { totals: EMPTY_STATS, buckets: new Map() }));
    const stats = statsOf(row);
    if (row.bucket === null) project.totals = stats;
    else project.buckets.set(row.bucket, stats);
  }
  return result;
}

export function statsOf(row: AggregateRow): RunStats {
  const n = (value: string | null) => (value === null ? 0 : Number(value));
  return {
    run_count: n(row.run_count),
    error_count: n(row.error_count),
    latency_p50: row.latency_p50,
    latency_p99: row.latency_p99,
    prompt_tokens: n(row.prompt_tokens),
    completion_tokens: n(row.completion_tokens),
    total_tokens: n(row.total_tokens),
    prompt_cost: n(row.prompt_cost),
    completion_cost: n(row.completion_cost),
    total_cost: n(row.total_cost),
    last_run_start_time: row.last_run_start_time,
  };
}
