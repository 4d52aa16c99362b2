/**
 * The run query of POST /runs/query (LangSmith's `listRuns`): typed conditions, filter
 * expressions on the run, on its trace's root and on any run of its trace, and keyset paging on
 * (start_time, id) in either direction — each page is an index range, never an OFFSET.
 */
import { sql, type RawBuilder } from '@berth/db';
import { compileFilter, threadSql } from '../filter/compile.js';
import type { FilterNode } from '../filter/parse.js';
import { isUuid } from '@berth/ids';
import { RUN_COLUMN_NAMES } from './run-fields.js';
import type { RunRow } from './trace-store.js';

/** The columns of a run row a query may read. */
const READABLE_COLUMNS: ReadonlySet<string> = new Set<string>([...RUN_COLUMN_NAMES, 'id', 'start_time', 'status', 'is_root']);

/** Where a page ends: the last run it holds. */
export interface RunCursor {
  start_time: Date;
  id: string;
}

export interface RunQuery {
  /** Runs of any of these projects; any of the tenant's when empty. */
  sessionIds?: string[];
  ids?: string[];
  traceId?: string;
  parentRunId?: string;
  referenceExampleId?: string;
  runType?: string;
  /** true: runs with an error; false: runs without one. */
  error?: boolean;
  isRoot?: boolean;
  /** Root runs of this thread (run-threads.ts). */
  threadId?: string;
  /** Inclusive bound on start_time. */
  start?: Date;
  /** Exclusive bound on start_time. */
  end?: Date;
  filter?: FilterNode;
  /** Filter on the root run of each run's trace. */
  traceFilter?: FilterNode;
  /** Filter on any run of each run's trace. */
  treeFilter?: FilterNode;
  /** Text searched in name, error, inputs and outputs. */
  search?: FilterNode;
  after?: RunCursor;
  ascending?: boolean;
  limit: number;
  /**
   * Fields of the run shape to read (id and start_time always: the cursor needs them); names that
   * are no column are ignored. Every column when absent.
   */
  columns?: string[];
}

export interface RunQueryPage {
  runs: RunRow[];
  /** Set when more runs follow. */
  next?: RunCursor;
}

/**
 * The query: one row more than the page, which tells whether another page follows. Filters of
 * the trace compile inside a subquery over `runs AS t`, where their unqualified columns name t.
 */
export function runQuery(tenantId: string, q: RunQuery): RawBuilder<RunRow> {
  const where = [sql`r.tenant_id = ${tenantId}::uuid`];
  // One project (the runs table) is an equality: Postgres 15 reads an index in order only under
  // `=`, not `= ANY(array)`, and without that order every page sorts all of the project's runs.
  if (q.sessionIds?.length === 1) where.push(sql`r.session_id = ${q.sessionIds[0]}::uuid`);
  else if (q.sessionIds && q.sessionIds.length > 0) where.push(sql`r.session_id = ANY(${q.sessionIds}::uuid[])`);
  if (q.ids && q.ids.length > 0) where.push(sql`r.id = ANY(${q.ids}::uuid[])`);
  if (q.traceId) where.push(sql`r.trace_id = ${q.traceId}::uuid`);
  if (q.parentRunId) where.push(sql`r.parent_run_id = ${q.parentRunId}::uuid`);
  if (q.referenceExampleId) where.push(sql`r.reference_example_id = ${q.referenceExampleId}::uuid`);
  if (q.runType) where.push(sql`r.run_type = ${q.runType}`);
  if (q.error !== undefined) where.push(q.error ? sql`r.error IS NOT NULL` : sql`r.error IS NULL`);
  if (q.isRoot !== undefined) where.push(sql`r.is_root = ${q.isRoot}`);
  if (q.threadId) where.push(sql`r.is_root AND ${threadSql('r')} = ${q.threadId}`);
  if (q.start) where.push(sql`r.start_time >= ${q.start.toISOString()}::timestamptz`);
  if (q.end) where.push(sql`r.start_time < ${q.end.toISOString()}::timestamptz`);
  if (q.filter) where.push(compileFilter(q.filter));
  if (q.search) where.push(compileFilter(q.search));
  if (q.traceFilter) {
    where.push(sql`EXISTS (SELECT 1 FROM runs t WHERE t.tenant_id = r.tenant_id AND t.id = r.trace_id AND t.is_root AND ${compileFilter(q.traceFilter)})`);
  }
  if (q.treeFilter) {
    where.push(sql`EXISTS (SELECT 1 FROM runs t WHERE t.tenant_id = r.tenant_id AND t.trace_id = r.trace_id AND ${compileFilter(q.treeFilter)})`);
  }
  const direction = sql.raw(q.ascending ? 'ASC' : 'DESC');
  if (q.after) {
    const position = sql`(${q.after.start_time.toISOString()}::timestamptz, ${q.after.id}::uuid)`;
    where.push(q.ascending ? sql`(r.start_time, r.id) > ${position}` : sql`(r.start_time, r.id) < ${position}`);
  }
  const names = q.columns && new Set(['id', 'start_time', ...q.columns.filter((c) => READABLE_COLUMNS.has(c))]);
  const columns = names ? sql.join([...names].map((c) => sql.ref(`r.${c}`))) : sql`r.*`;
  return sql<RunRow>`SELECT ${columns} FROM runs r WHERE ${sql.join(where, sql` AND `)}
    ORDER BY r.start_time ${direction}, r.id ${direction} LIMIT ${q.limit + 1}`;
}

/** A cursor as clients carry it: opaque text. */
export function encodeCursor(cursor: RunCursor): string {
  return Buffer.from(JSON.stringify([cursor.start_time.toISOString(), cursor.id])).toString('base64url');
}

/** The cursor of `text`, or undefined when it is not one this store made. */
export function decodeCursor(text: string): RunCursor | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
    if (!Array.isArray(value) || value.length !== 2 || typeof value[0] !== 'string' || typeof value[1] !== 'string') return undefined;
    const start = new Date(value[0]);
    if (Number.isNaN(start.getTime()) || !isUuid(value[1])) return undefined;
    return { start_time: start, id: value[1] };
  } catch {
    return undefined;
  }
}
