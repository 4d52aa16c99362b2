/**
 * The writable fields of a run (LangSmith's run shape) and how each is stored. One list drives the
 * store's INSERT and UPDATE statements, so a new field is added here once.
 */

/** A run as a create or a patch carries it; absent or null fields leave the stored value alone. */
export interface RunFields {
  id: string;
  session_id?: string | null;
  trace_id?: string | null;
  dotted_order?: string | null;
  parent_run_id?: string | null;
  parent_run_ids?: string[] | null;
  reference_example_id?: string | null;
  name?: string | null;
  run_type?: string | null;
  start_time?: Date | string | null;
  end_time?: Date | string | null;
  inputs?: unknown;
  outputs?: unknown;
  error?: string | null;
  extra?: Record<string, unknown> | null;
  events?: unknown[] | null;
  tags?: string[] | null;
  feedback_stats?: Record<string, unknown> | null;
  prompt_tokens?: number | null;
  completion_tokens?: number | null;
  total_tokens?: number | null;
  prompt_cost?: number | string | null;
  completion_cost?: number | string | null;
  total_cost?: number | string | null;
  first_token_time?: Date | string | null;
  trace_tier?: string | null;
}

/** A create (POST /runs, `post` of a batch) or a patch (PATCH /runs/{id}, `patch` of a batch). */
export type RunWrite = RunFields & {
  op: 'create' | 'patch';
  /**
   * Set for a writer bound to one project: the write applies only to a run of that project (a
   * run of another is refused), and a patch waiting for its create applies only if the create
   * lands there.
   */
  scope_session_id?: string;
};

type StoredType = 'uuid' | 'uuid[]' | 'text' | 'text[]' | 'json' | 'timestamptz' | 'bigint' | 'numeric';

/** Every stored column a write may set, except id and start_time (the row's key). */
export const RUN_COLUMNS = {
  session_id: 'uuid',
  trace_id: 'uuid',
  dotted_order: 'text',
  parent_run_id: 'uuid',
  parent_run_ids: 'uuid[]',
  reference_example_id: 'uuid',
  name: 'text',
  run_type: 'text',
  end_time: 'timestamptz',
  inputs: 'json',
  outputs: 'json',
  error: 'text',
  extra: 'json',
  events: 'json',
  tags: 'text[]',
  feedback_stats: 'json',
  prompt_tokens: 'bigint',
  completion_tokens: 'bigint',
  total_tokens: 'bigint',
  prompt_cost: 'numeric',
  completion_cost: 'numeric',
  total_cost: 'numeric',
  first_token_time: 'timestamptz',
  trace_tier: 'text',
} as const satisfies Record<string, StoredType>;

export type RunColumn = keyof typeof RUN_COLUMNS;
export const RUN_COLUMN_NAMES = Object.keys(RUN_COLUMNS) as RunColumn[];

/**
 * JSON text already parsed once and found storable as it is: stored verbatim rather than
 * serialized again (see run-batch.ts). Anything else serializing it gets the value.
 */
export class JsonText {
  constructor(readonly text: string) {}

  toJSON(): unknown {
    return JSON.parse(this.text);
  }
}

/**
 * A time as writers send it: a Date, epoch milliseconds (the langsmith client's `Date.now()`), or
 * ISO 8601 text; text without a zone is UTC, as LangSmith reads it.
 */
export function toDate(value: unknown, field: string): Date {
  let date: Date;
  if (value instanceof Date) date = value;
  else if (typeof value === 'number') date = new Date(Number.isFinite(value) ? value : NaN);
  else if (typeof value === 'string') date = new Date(/T.*(Z|[+-]\d{2}:?\d{2})$|^\d{4}-\d{2}-\d{2}$/i.test(value) ? value : `${value}Z`);
  else date = new Date(NaN);
  if (Number.isNaN(date.getTime())) throw new Error(`${field} is not a time: ${JSON.stringify(value)}`);
  return date;
}

/**
 * The ancestors named by a dotted order (`<time><uuid>` segments joined by `.`, the run itself
 * last), for writers that send dotted_order but not parent_run_ids.
 */
export function ancestorsFromDottedOrder(dottedOrder: string): string[] {
  return dottedOrder
    .split('.')
    .slice(0, -1)
    .map((segment) => segment.slice(-36));
}
