/**
 * How a batch of run writes becomes a few statements: the writes are merged in memory into the
 * rows the batch creates, the changes it makes to rows already stored, and the patches that must
 * wait for their create; the store then applies all of them in one statement. Statements per run
 * were what limited ingest (docs/benchmarks.md, "Where ingest's time goes").
 *
 * Merging in memory keeps the store's semantics exactly: a create fills only what the row lacks,
 * a patch overwrites what it carries, in the batch's order, and patches that waited for a run's
 * create are applied right after it (before the batch's later writes to that run).
 */
import { sql, type RawBuilder } from '@berth/db';
import { JsonText, RUN_COLUMN_NAMES, RUN_COLUMNS, ancestorsFromDottedOrder, toDate, type RunColumn, type RunFields, type RunWrite } from './run-fields.js';

/** Where a stored run lives (its run_keys row), and its project when a scoped write needs it. */
export interface StoredKey {
  tenant_id: string;
  /** As Postgres printed it (microseconds kept): passed back as is to find the row. */
  start_time: string;
  session_id?: string | null;
}

/** A patch that waited for its create (pending_run_patches), oldest first. */
export type WaitingPatches = Map<string, RunWrite[]>;

/** Where a statement runs: a database or a transaction. */
type Executor = Parameters<RawBuilder<unknown>['execute']>[0];
type Outcome = 'stored' | 'pending' | 'foreign';
type Row = Partial<Record<RunColumn, unknown>>;
/** A change to one column of a stored row: the last overwrite, else the first fill. */
type Change = { overwrite: unknown } | { fill: unknown };

export interface BatchPlan {
  /** What became of each write, in the batch's order. */
  outcomes: Outcome[];
  /** New runs: id → start_time (ISO) and the row's columns. */
  inserts: Map<string, { startTime: string; row: Row }>;
  /** Stored runs: id → start_time as stored and the changes per column. */
  updates: Map<string, { startTime: string; changes: Map<RunColumn, Change> }>;
  /** Patches whose create has not arrived, to keep in pending_run_patches. */
  pending: RunWrite[];
}

const isArrayColumn = (column: RunColumn) => RUN_COLUMNS[column].endsWith('[]');

/** A column's value as the statement binds it (times as ISO text), or null when absent. */
function stored(column: RunColumn, value: unknown): unknown {
  if (value === undefined || value === null) return null;
  return RUN_COLUMNS[column] === 'timestamptz' ? toDate(value, column).toISOString() : value;
}

/** The write with what its other fields imply: trace id and ancestors from the dotted order. */
function derived(write: RunFields): RunFields {
  const filled = { ...write };
  if (filled.parent_run_ids == null && filled.dotted_order) filled.parent_run_ids = ancestorsFromDottedOrder(filled.dotted_order);
  if (filled.trace_id == null) {
    if (!filled.parent_run_id && !filled.dotted_order && (write as RunWrite).op === 'create') filled.trace_id = filled.id;
    else if (filled.dotted_order) filled.trace_id = filled.dotted_order.split('.')[0]!.slice(-36);
  }
  return filled;
}

/** Applies a write to a row held in memory: `fill` sets what the row lacks, `overwrite` what the write carries. */
function applyToRow(row: Row, write: RunFields, mode: 'fill' | 'overwrite'): void {
  const run = derived(write) as unknown as Record<string, unknown>;
  for (const column of RUN_COLUMN_NAMES) {
    const value = stored(column, run[column]);
    if (value === null) continue;
    const current = row[column];
    const lacks = current == null || (isArrayColumn(column) && (current as unknown[]).length === 0);
    if (mode === 'overwrite' || lacks) row[column] = value;
  }
}

/** Adds a write to the changes of a stored row (see {@link Change}). */
function applyToChanges(changes: Map<RunColumn, Change>, write: RunFields, mode: 'fill' | 'overwrite'): void {
  const run = derived(write) as unknown as Record<string, unknown>;
  for (const column of RUN_COLUMN_NAMES) {
    const value = stored(column, run[column]);
    if (value === null) continue;
    if (mode === 'overwrite') {
      changes.set(column, { overwrite: value });
      continue;
    }
    if (isArrayColumn(column) && (value as unknown[]).length === 0) continue; // filling an empty list with an empty list
    const change = changes.get(column);
    // A fill after an overwrite changes the row only where the overwrite left an empty list.
    if (!change || ('overwrite' in change && isArrayColumn(column) && (change.overwrite as unknown[]).length === 0)) {
      changes.set(column, change && 'overwrite' in change ? { overwrite: value } : { fill: value });
    }
  }
}

/**
 * Merges the batch (all writes valid, of `tenantId`) given the stored keys of its runs and the
 * patches that waited for them.
 */
export function planBatch(tenantId: string, writes: RunWrite[], keys: Map<string, StoredKey>, waiting: WaitingPatches): BatchPlan {
  const plan: BatchPlan = { outcomes: [], inserts: new Map(), updates: new Map(), pending: [] };
  /** This batch's patches of runs not created yet, oldest first. */
  const early = new Map<string, RunWrite[]>();
  for (const write of writes) {
    const key = keys.get(write.id);
    const created = plan.inserts.get(write.id);
    const mode = write.op === 'create' ? 'fill' : 'overwrite';
    if (key) {
      if (key.tenant_id !== tenantId || (write.scope_session_id && key.session_id !== write.scope_session_id)) {
        plan.outcomes.push('foreign');
        continue;
      }
      let update = plan.updates.get(write.id);
      if (!update) plan.updates.set(write.id, (update = { startTime: key.start_time, changes: new Map() }));
      applyToChanges(update.changes, write, mode);
      plan.outcomes.push('stored');
    } else if (created) {
      if (write.scope_session_id && created.row.session_id !== write.scope_session_id) {
        plan.outcomes.push('foreign');
        continue;
      }
      applyToRow(created.row, write, mode);
      plan.outcomes.push('stored');
    } else if (write.op === 'patch') {
      early.set(write.id, [...(early.get(write.id) ?? []), write]);
      plan.outcomes.push('pending');
    } else {
      const row: Row = {};
      applyToRow(row, write, 'fill');
      for (const patch of [...(waiting.get(write.id) ?? []), ...(early.get(write.id) ?? [])]) {
        // A bound writer's patch applies only if the create landed in its project.
        if (patch.scope_session_id && patch.scope_session_id !== row.session_id) continue;
        applyToRow(row, patch, 'overwrite');
      }
      early.delete(write.id);
      plan.inserts.set(write.id, { startTime: toDate(write.start_time, 'start_time').toISOString(), row });
      plan.outcomes.push('stored');
    }
  }
  for (const patches of early.values()) plan.pending.push(...patches);
  return plan;
}

/** JSON of records whose values may be {@link JsonText} (spliced in as it is). */
function recordsJson(records: Record<string, unknown>[]): string {
  const json = (value: unknown) => (value instanceof JsonText ? value.text : JSON.stringify(value));
  return `[${records
    .map(
      (record) =>
        `{${Object.entries(record)
          .map(([key, value]) => `"${key}":${json(value)}`)
          .join(',')}}`,
    )
    .join(',')}]`;
}

const columnList = (prefix: string, columns: readonly RunColumn[]) => columns.map((c) => `${prefix}${c} ${RUN_COLUMNS[c]}`).join(', ');
const INSERT_RECORD = `id uuid, start_time timestamptz, ${columnList('', RUN_COLUMN_NAMES)}`;
const INSERT_COLUMNS = RUN_COLUMN_NAMES.join(', ');
const INSERT_VALUES = RUN_COLUMN_NAMES.map((c) => (isArrayColumn(c) ? `COALESCE(${c}, '{}')` : c)).join(', ');

/** The new value of a stored row's column: `o_` carries an overwrite, `f_` a fill. */
function setExpression(column: RunColumn): string {
  if (isArrayColumn(column)) {
    return `${column} = CASE WHEN u.o_${column} IS NOT NULL THEN u.o_${column} WHEN cardinality(r.${column}) = 0 AND u.f_${column} IS NOT NULL THEN u.f_${column} ELSE r.${column} END`;
  }
  return `${column} = COALESCE(u.o_${column}, r.${column}, u.f_${column})`;
}

/**
 * Writes a planned batch in one statement: new keys and rows, the waiting patches they consumed
 * deleted, patches that must wait inserted, stored rows updated. The parts touch different rows (a
 * run is either new or stored), so that they all see the statement's one snapshot does not matter.
 */
export async function writeBatch(trx: Executor, tenantId: string, plan: BatchPlan): Promise<void> {
  const parts: RawBuilder<unknown>[] = [];
  const tenant = sql`${tenantId}::uuid`;
  if (plan.inserts.size > 0) {
    const rows = recordsJson([...plan.inserts].map(([id, { startTime, row }]) => ({ id, start_time: startTime, ...row })));
    parts.push(
      sql`new_rows AS (SELECT * FROM json_to_recordset(${rows}::json) AS v(${sql.raw(INSERT_RECORD)}))`,
      sql`new_keys AS (INSERT INTO run_keys (id, tenant_id, start_time) SELECT id, ${tenant}, start_time FROM new_rows)`,
      sql`inserted AS (INSERT INTO runs (id, tenant_id, start_time, ${sql.raw(INSERT_COLUMNS)})
        SELECT id, ${tenant}, start_time, ${sql.raw(INSERT_VALUES)} FROM new_rows)`,
      sql`consumed AS (DELETE FROM pending_run_patches WHERE run_id IN (SELECT id FROM new_rows) AND tenant_id = ${tenant})`,
    );
  }
  if (plan.pending.length > 0) {
    parts.push(
      sql`waiting AS (INSERT INTO pending_run_patches (run_id, tenant_id, patch)
        SELECT (p ->> 'id')::uuid, ${tenant}, p FROM jsonb_array_elements(${JSON.stringify(plan.pending)}::jsonb) WITH ORDINALITY AS w(p, n) ORDER BY n)`,
    );
  }
  const updates = [...plan.updates].filter(([, u]) => u.changes.size > 0);
  if (updates.length > 0) {
    const columns = RUN_COLUMN_NAMES.filter((c) => updates.some(([, u]) => u.changes.has(c)));
    const rows = updates.map(([id, { startTime, changes }]) => {
      const record: Record<string, unknown> = { id, start_time: startTime };
      for (const [column, change] of changes) {
        if ('overwrite' in change) record[`o_${column}`] = change.overwrite;
        else record[`f_${column}`] = change.fill;
      }
      return record;
    });
    const record = `id uuid, start_time timestamptz, ${columnList('o_', columns)}, ${columnList('f_', columns)}`;
    const startTimes = [...new Set(updates.map(([, u]) => u.startTime))];
    parts.push(
      // The start_time list lets the planner read only the partitions of these runs.
      sql`updated AS (UPDATE runs r SET ${sql.raw([...columns.map(setExpression), 'updated_at = now()'].join(', '))}
        FROM json_to_recordset(${recordsJson(rows)}::json) AS u(${sql.raw(record)})
        WHERE r.id = u.id AND r.start_time = u.start_time AND r.start_time = ANY(${startTimes}::timestamptz[]))`,
    );
  }
  if (parts.length === 0) return;
  // Data-modifying parts run whether or not the query reads them.
  await sql`WITH ${sql.join(parts, sql`, `)} SELECT 1`.execute(trx);
}
