/**
 * Runs as LangSmith clients send and read them (JSON documents), to and from the store's
 * {@link RunWrite} and {@link RunRow}.
 *
 * Ingest is lenient where LangSmith is, strict where a value cannot be stored: a field of the
 * wrong type makes that one run refused with the reason in words (the rest of its batch is kept);
 * a top-level field this store does not know — a newer client's — is kept under
 * `extra.unrecognized_fields` rather than refused, because a client that gets an error status
 * drops its whole batch. Token counts and costs come from the run's usage metadata when the run
 * does not state them, as LangSmith derives them.
 */
import { MAX_JSON_DEPTH, storableStrings, unsafeValueIssues } from '@berth/http';
import { JsonText, RUN_COLUMNS, toDate, type RunColumn, type RunWrite } from './run-fields.js';
import type { RunRow } from './trace-store.js';

/** Where a create asks to go: a project id, or a project name (got or created). */
export type SessionRef = { id: string } | { name: string };

/** A run operation as the transport delivers it (see RunOperation in traces.proto). */
export interface RunOperationInput {
  kind: 'create' | 'patch';
  /** The run object as JSON text. */
  runJson: string;
  /** Fields sent apart (multipart), field name → JSON text. */
  fieldJson?: Record<string, string>;
  /** The id named by the transport, which wins over the document's. */
  id?: string;
}

export type ParsedOperation = { ok: true; write: RunWrite; session: SessionRef | undefined } | { ok: false; id: string; reason: string };

/** LangSmith's default project, where runs naming none go. */
export const DEFAULT_PROJECT_NAME = 'default';

/**
 * Accepted and not stored: the serialized runnable (large, only for LangSmith's playground),
 * fields the store derives itself, and transport details.
 */
const IGNORED = new Set([
  'serialized',
  'child_runs',
  'child_run_ids',
  'direct_child_run_ids',
  'attachments',
  'execution_order',
  'status',
  'is_root',
  'app_path',
  'tenant_id',
  'in_dataset',
  'last_queued_at',
  'share_token',
]);
const SESSION_FIELDS = new Set(['session_id', 'session_name', 'address']);

class Malformed extends Error {}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Malformed(`${what} is not valid JSON: ${(error as Error).message}`);
  }
}

/**
 * Refuses a run Postgres could not store even cleaned (nesting deeper than requests may have): the
 * run alone, with where and what, instead of failing its whole batch.
 */
function refuseUnstorable(doc: Record<string, unknown>): void {
  // Strings are cleaned as the JSON routes' parser does: an odd character must not cost the run.
  storableStrings(doc);
  const [issue] = unsafeValueIssues('body', doc);
  if (!issue) return;
  const where = issue.loc.slice(1).join('.');
  throw new Malformed(where ? `the run's ${where}: ${issue.msg}` : `the run: ${issue.msg}`);
}

/** The value of `column` checked against its stored type (throws Malformed with the reason). */
function checked(column: RunColumn, value: unknown, field: string = column): unknown {
  if (value === null || value === undefined) return null;
  const type = RUN_COLUMNS[column];
  const fail = (expected: string): never => {
    throw new Malformed(`${field} must be ${expected}, not ${JSON.stringify(value)?.slice(0, 80)}`);
  };
  switch (type) {
    case 'uuid':
    case 'text':
      if (column === 'error' && typeof value !== 'string') return JSON.stringify(value);
      return typeof value === 'string' ? value : fail('a string');
    case 'uuid[]':
    case 'text[]':
      return Array.isArray(value) && value.every((v) => typeof v === 'string') ? value : fail('a list of strings');
    case 'timestamptz':
      try {
        return toDate(value, field).toISOString();
      } catch (error) {
        throw new Malformed((error as Error).message);
      }
    case 'bigint':
      return Number.isSafeInteger(value) && (value as number) >= 0 ? value : fail('a whole number');
    case 'numeric':
      if (typeof value === 'number' && Number.isFinite(value)) return value;
      return typeof value === 'string' && /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(value) ? value : fail('a number');
    case 'json':
      if (column === 'extra' || column === 'feedback_stats') return isObject(value) ? value : fail('an object');
      if (column === 'events') return Array.isArray(value) ? value : fail('a list');
      return value;
  }
}

const count = (value: unknown) => (Number.isSafeInteger(value) && (value as number) >= 0 ? (value as number) : undefined);
const cost = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined);

/**
 * Token counts and costs from `usage_metadata` (in outputs, or in extra.metadata where the
 * langsmith client also puts it) or LangChain's `llm_output.token_usage`.
 */
function usageOf(doc: Record<string, unknown>): Partial<Record<RunColumn, number>> {
  const outputs = isObject(doc.outputs) ? doc.outputs : {};
  const metadata = isObject(doc.extra) && isObject(doc.extra.metadata) ? doc.extra.metadata : {};
  const usage = isObject(outputs.usage_metadata) ? outputs.usage_metadata : isObject(metadata.usage_metadata) ? metadata.usage_metadata : undefined;
  const found: Partial<Record<RunColumn, number | undefined>> = {};
  if (usage) {
    found.prompt_tokens = count(usage.input_tokens);
    found.completion_tokens = count(usage.output_tokens);
    found.total_tokens = count(usage.total_tokens);
    found.prompt_cost = cost(usage.input_cost);
    found.completion_cost = cost(usage.output_cost);
    found.total_cost = cost(usage.total_cost);
  } else if (isObject(outputs.llm_output) && isObject(outputs.llm_output.token_usage)) {
    const usage = outputs.llm_output.token_usage;
    found.prompt_tokens = count(usage.prompt_tokens);
    found.completion_tokens = count(usage.completion_tokens);
    found.total_tokens = count(usage.total_tokens);
  }
  if (found.total_tokens === undefined && found.prompt_tokens !== undefined && found.completion_tokens !== undefined) {
    found.total_tokens = found.prompt_tokens + found.completion_tokens;
  }
  if (found.total_cost === undefined && found.prompt_cost !== undefined && found.completion_cost !== undefined) {
    found.total_cost = found.prompt_cost + found.completion_cost;
  }
  return Object.fromEntries(Object.entries(found).filter(([, v]) => v !== undefined)) as Partial<Record<RunColumn, number>>;
}

/** When the first token streamed: the first `new_token` event. */
function firstTokenTime(events: unknown): unknown {
  if (!Array.isArray(events)) return undefined;
  const first = events.find((e) => isObject(e) && e.name === 'new_token' && e.time != null) as Record<string, unknown> | undefined;
  return first?.time;
}

/** Parts whose JSON text may be stored as sent (not merged with anything, read only by the store). */
const VERBATIM_PARTS = new Set(['inputs', 'outputs', 'events']);

/**
 * Whether parsed JSON text can be stored as sent: without any `\u` escape it holds no U+0000 nor
 * unpaired surrogate (the transport decoded it from UTF-8, and raw control characters are not
 * JSON), and with no more brackets than levels allowed it cannot nest deeper.
 */
function storableAsSent(text: string): boolean {
  if (text.includes('\\u')) return false;
  let brackets = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c === 0x7b || c === 0x5b) && ++brackets > MAX_JSON_DEPTH) return false;
  }
  return true;
}

/** One operation as a store write, or the reason it is refused. */
export function parseOperation(op: RunOperationInput): ParsedOperation {
  let id = op.id ?? '';
  try {
    const doc = op.runJson.trim() === '' ? {} : parseJson(op.runJson, 'the run');
    if (!isObject(doc)) throw new Malformed('the run must be a JSON object');
    // Parts storable as sent skip the walk that cleans and checks every string, and are stored verbatim.
    const verbatim = new Map<string, unknown>();
    for (const [field, text] of Object.entries(op.fieldJson ?? {})) {
      const value = parseJson(text, `the ${field} part`);
      if (VERBATIM_PARTS.has(field) && value !== null && storableAsSent(text)) verbatim.set(field, value);
      else doc[field] = value;
    }
    refuseUnstorable(doc);
    for (const [field, value] of verbatim) doc[field] = value;
    if (!id && typeof doc.id === 'string') id = doc.id;
    if (!id) throw new Malformed('the run has no id');
    const write: RunWrite = { op: op.kind, id };
    const unrecognized: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(doc)) {
      if (key === 'id' || SESSION_FIELDS.has(key) || IGNORED.has(key)) continue;
      // start_time is the row's key, not one of the columns a write sets; it is a time all the same.
      const column = (key === 'start_time' ? 'end_time' : key) as RunColumn;
      if (key in RUN_COLUMNS || key === 'start_time') (write as unknown as Record<string, unknown>)[key] = checked(column, value, key);
      else if (value !== undefined) unrecognized[key] = value;
    }
    for (const field of verbatim.keys()) (write as unknown as Record<string, unknown>)[field] = new JsonText(op.fieldJson![field]!);
    // A patch replaces extra whole: one without extra must not wipe the run's by carrying these.
    if (Object.keys(unrecognized).length > 0 && (op.kind === 'create' || write.extra)) {
      write.extra = { ...(write.extra ?? {}), unrecognized_fields: unrecognized };
    }
    for (const [column, value] of Object.entries(usageOf(doc))) {
      const target = write as unknown as Record<string, unknown>;
      target[column] ??= value;
    }
    write.first_token_time ??= checked('first_token_time', firstTokenTime(doc.events)) as string | null;
    return { ok: true, write, session: op.kind === 'create' ? sessionOf(doc) : undefined };
  } catch (error) {
    if (error instanceof Malformed) return { ok: false, id, reason: error.message };
    throw error;
  }
}

/**
 * The project a create names: session_id wins over session_name; an agent address (newer
 * clients, `lrn:agents/<id>/environments/<env>`) is a project of that name; none is "default".
 */
function sessionOf(doc: Record<string, unknown>): SessionRef {
  const { session_id: id, session_name: name, address } = doc;
  if (id != null) {
    if (typeof id !== 'string') throw new Malformed('session_id must be a string');
    return { id };
  }
  if (name != null && name !== '') {
    if (typeof name !== 'string') throw new Malformed('session_name must be a string');
    return { name };
  }
  if (typeof address === 'string' && address !== '') return { name: address };
  return { name: DEFAULT_PROJECT_NAME };
}

const toNumber = (value: unknown) => (value == null ? null : Number(value));
const iso = (value: unknown) => (value instanceof Date ? value.toISOString() : (value ?? null));

/** A stored run in LangSmith's run shape (what readRun and listRuns parse). */
export function runDocument(row: RunRow): Record<string, unknown> {
  return {
    id: row.id,
    name: row.name,
    run_type: row.run_type,
    start_time: iso(row.start_time),
    end_time: iso(row.end_time),
    status: row.status,
    is_root: row.is_root,
    session_id: row.session_id,
    trace_id: row.trace_id,
    dotted_order: row.dotted_order,
    parent_run_id: row.parent_run_id,
    parent_run_ids: row.parent_run_ids ?? [],
    reference_example_id: row.reference_example_id,
    inputs: row.inputs ?? {},
    outputs: row.outputs ?? null,
    error: row.error,
    extra: row.extra ?? {},
    events: row.events ?? [],
    tags: row.tags ?? [],
    feedback_stats: row.feedback_stats ?? null,
    prompt_tokens: toNumber(row.prompt_tokens),
    completion_tokens: toNumber(row.completion_tokens),
    total_tokens: toNumber(row.total_tokens),
    prompt_cost: toNumber(row.prompt_cost),
    completion_cost: toNumber(row.completion_cost),
    total_cost: toNumber(row.total_cost),
    first_token_time: iso(row.first_token_time),
    trace_tier: row.trace_tier ?? null,
    child_run_ids: null,
    serialized: null,
  };
}
