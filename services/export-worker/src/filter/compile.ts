/**
 * Compiles a parsed filter to a boolean SQL condition over the `runs` table. Every value the user
 * wrote is a bound parameter; column names and operators come from the fixed tables below, never
 * from the filter text.
 */
import { sql, type RawBuilder } from '@berth/db';
import type { Comparator, FilterField, FilterNode, Literal } from './parse.js';

type Condition = RawBuilder<unknown>;

const OPERATORS: Record<Comparator, string> = { eq: '=', neq: '<>', gt: '>', gte: '>=', lt: '<', lte: '<=' };

/**
 * Run metadata lives in `extra.metadata`, as LangSmith clients send it. The payload columns are
 * stored as `json` (text; cheap to export), so the object a filter tests is cast to jsonb here.
 */
const METADATA = sql`(CASE WHEN json_typeof(extra->'metadata') = 'object' THEN (extra->'metadata')::jsonb ELSE '{}'::jsonb END)`;

/** The metadata keys naming the thread of a run, in LangSmith's order of preference. */
export const THREAD_KEYS = ['thread_id', 'session_id', 'conversation_id'] as const;

/**
 * The thread a run names (SQL), NULL when none: the first of THREAD_KEYS its metadata gives a
 * non-empty value. `alias` qualifies the run's columns (unqualified: the runs being filtered).
 */
export function threadSql(alias?: string) {
  const extra = alias ? `${alias}.extra` : 'extra';
  return sql.raw(
    `COALESCE(${THREAD_KEYS.map((key) => `CASE WHEN json_typeof(${extra}->'metadata') = 'object' THEN NULLIF(${extra}->'metadata'->>'${key}', '') END`).join(', ')})`,
  );
}

/** SQL of each plain field (metadata and feedback fields are compiled on their own). */
const COLUMNS: Partial<Record<FilterField, Condition>> = {
  id: sql`id`,
  trace_id: sql`trace_id`,
  name: sql`name`,
  run_type: sql`run_type`,
  status: sql`status`,
  error: sql`error`,
  start_time: sql`start_time`,
  end_time: sql`end_time`,
  latency: sql`EXTRACT(EPOCH FROM (end_time - start_time))`,
  total_tokens: sql`total_tokens`,
  prompt_tokens: sql`prompt_tokens`,
  completion_tokens: sql`completion_tokens`,
  total_cost: sql`total_cost`,
  prompt_cost: sql`prompt_cost`,
  completion_cost: sql`completion_cost`,
  is_root: sql`is_root`,
  thread_id: threadSql(),
};

const CASTS: Partial<Record<FilterField, string>> = {
  id: 'uuid',
  trace_id: 'uuid',
  start_time: 'timestamptz',
  end_time: 'timestamptz',
  latency: 'float8',
  total_tokens: 'numeric',
  prompt_tokens: 'numeric',
  completion_tokens: 'numeric',
  total_cost: 'numeric',
  prompt_cost: 'numeric',
  completion_cost: 'numeric',
  feedback_score: 'float8',
  is_root: 'boolean',
};

const FEEDBACK = sql`(CASE WHEN json_typeof(feedback_stats) = 'object' THEN feedback_stats::jsonb ELSE '{}'::jsonb END)`;

export function compileFilter(node: FilterNode): Condition {
  switch (node.kind) {
    case 'and':
      return group(pairUp(node.args), 'AND');
    case 'or':
      return group(node.args.map(compileFilter), 'OR');
    case 'compare':
      return compare(node.field, node.op, node.value);
    case 'in':
      return group(
        node.values.map((value) => compare(node.field, 'eq', value)),
        'OR',
      );
    case 'has':
      return sql`tags @> ARRAY[${node.value}]::text[]`;
    case 'search': {
      const pattern = `%${node.value.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
      if (node.field) return sql`${COLUMNS[node.field]!} ILIKE ${pattern}`;
      return sql`(name ILIKE ${pattern} OR error ILIKE ${pattern} OR inputs::text ILIKE ${pattern} OR outputs::text ILIKE ${pattern})`;
    }
  }
}

function group(conditions: Condition[], joiner: 'AND' | 'OR'): Condition {
  return sql`(${sql.join(conditions, sql.raw(` ${joiner} `))})`;
}

/**
 * Within one `and`, `metadata_key` is paired with the `metadata_value` that follows it (and
 * `feedback_key` with `feedback_score`), as LangSmith reads `and(eq(metadata_key, "user"),
 * eq(metadata_value, "bob"))`: the value of that key, not any key's value.
 */
function pairUp(args: FilterNode[]): Condition[] {
  const out: Condition[] = [];
  const used = new Set<FilterNode>();
  for (const [keyField, valueField] of [
    ['metadata_key', 'metadata_value'],
    ['feedback_key', 'feedback_score'],
  ] as const) {
    const keys = args.filter((a) => a.kind === 'compare' && a.field === keyField && a.op === 'eq');
    const values = args.filter((a) => (a.kind === 'compare' || a.kind === 'in') && a.field === valueField);
    for (let i = 0; i < Math.min(keys.length, values.length); i++) {
      const key = keys[i] as Extract<FilterNode, { kind: 'compare' }>;
      const value = values[i]!;
      used.add(key).add(value);
      out.push(pairCondition(valueField, String(key.value), value));
    }
  }
  return [...out, ...args.filter((a) => !used.has(a)).map(compileFilter)];
}

function pairCondition(field: 'metadata_value' | 'feedback_score', key: string, node: FilterNode): Condition {
  const target = field === 'metadata_value' ? sql`(${METADATA}->>${key}::text)` : score(sql`${FEEDBACK}->${key}::text`);
  const test = (op: Comparator, value: Literal) => sql`${target} ${sql.raw(OPERATORS[op])} ${bound(field, value)}`;
  if (node.kind === 'in')
    return group(
      node.values.map((v) => test('eq', v)),
      'OR',
    );
  const { op, value } = node as Extract<FilterNode, { kind: 'compare' }>;
  return value === null ? sql`${target} IS ${sql.raw(op === 'eq' ? '' : 'NOT ')}NULL` : test(op, value);
}

/** A feedback entry's average score, or NULL when it is not a number. */
function score(entry: Condition): Condition {
  return sql`(CASE WHEN jsonb_typeof(${entry}->'avg') = 'number' THEN (${entry}->>'avg')::float8 END)`;
}

function bound(field: FilterField, value: Literal): Condition {
  const v = value instanceof Date ? value.toISOString() : value;
  const cast = CASTS[field];
  return cast ? sql`${v}::${sql.raw(cast)}` : sql`${v}`;
}

function compare(field: FilterField, op: Comparator, value: Literal): Condition {
  const sqlOp = sql.raw(OPERATORS[op]);
  switch (field) {
    case 'metadata_key': {
      const present = sql`(${METADATA}->${String(value)}::text) IS NOT NULL`;
      return op === 'eq' ? present : sql`NOT ${present}`;
    }
    case 'metadata_value':
      return sql`EXISTS (SELECT 1 FROM jsonb_each_text(${METADATA}) m WHERE m.value ${sqlOp} ${String(value)}::text)`;
    case 'feedback_key': {
      const present = sql`(${FEEDBACK}->${String(value)}::text) IS NOT NULL`;
      return op === 'eq' ? present : sql`NOT ${present}`;
    }
    case 'feedback_score':
      if (value === null)
        return sql`${op === 'eq' ? sql.raw('NOT ') : sql.raw('')}EXISTS (SELECT 1 FROM jsonb_each(${FEEDBACK}) f WHERE ${score(sql`f.value`)} IS NOT NULL)`;
      return sql`EXISTS (SELECT 1 FROM jsonb_each(${FEEDBACK}) f WHERE ${score(sql`f.value`)} ${sqlOp} ${bound(field, value)})`;
    default: {
      const column = COLUMNS[field]!;
      if (value === null) return sql`${column} IS ${sql.raw(op === 'eq' ? '' : 'NOT ')}NULL`;
      // neq keeps runs whose field is empty: "error is not X" includes runs without an error
      if (op === 'neq') return sql`${column} IS DISTINCT FROM ${bound(field, value)}`;
      return sql`${column} ${sqlOp} ${bound(field, value)}`;
    }
  }
}
