/**
 * Roll-ups of a trace onto its root run, as LangSmith shows them: the root carries the sums of
 * the tokens (prompt, completion, total) and costs of the trace's llm runs, and the earliest of
 * their first-token times. Costs an llm run reports without come from the model price table
 * (model-prices.ts).
 *
 * Maintained inside the ingest's transaction, after the batch's writes, in one statement per batch
 * whatever its size: it prices the batch's llm runs that need it and recomputes the root of every
 * trace the batch touched from all of that trace's llm runs. Recomputing (not adding
 * deltas) makes the root right whatever the order runs and patches arrive in — children after the
 * root ended, patches before their creates, tokens patched later — and a repeated write changes
 * nothing. Two batches of one trace must not recompute it at once (each would miss the other's
 * uncommitted runs): the ingest locks the batch's trace ids with its run ids ({@link lockIds}).
 *
 * A root that is itself an llm run keeps its own figures (its own usage is the trace's). A root
 * keeps a figure its trace's llm runs do not report (a column whose sum is null). Only runs of the
 * root's tenant and project count: a writer cannot add to a trace it cannot write to by naming it.
 */
import { ConfigError } from '@berth/config';
import { sql, type Kysely } from '@berth/db';
import { isUuid } from '@berth/ids';
import type { ModelPrice } from './model-prices.js';
import type { RunWrite } from './run-fields.js';
import type { TraceTables } from './trace-store.js';

/**
 * Where LangSmith looks for an llm run's model name, in order: `extra.metadata.ls_model_name`,
 * then the invocation parameters.
 */
const MODEL_NAME = sql.raw(
  `coalesce(u.extra->'metadata'->>'ls_model_name', ${['model', 'model_name', 'model_id', 'model_path', 'endpoint_name']
    .map((key) => `u.extra->'invocation_params'->>'${key}'`)
    .join(', ')})`,
);

const TOKEN_FIELDS = ['prompt_tokens', 'completion_tokens', 'total_tokens'] as const;
const COST_FIELDS = ['prompt_cost', 'completion_cost', 'total_cost'] as const;

/** The trace of a write, when the write names it (patches of some clients do not). */
export function traceIdOf(write: RunWrite): string | undefined {
  const id =
    write.trace_id ??
    (write.dotted_order ? write.dotted_order.split('.')[0]!.slice(-36) : write.op === 'create' && !write.parent_run_id ? write.id : undefined);
  return id && isUuid(id) ? id : undefined;
}

/**
 * What the ingest locks for a batch, in one sorted statement: its run ids and its trace ids. A
 * trace's id is its root run's, so a batch writing the root and a batch writing a child of the
 * same trace take the same lock.
 */
export function lockIds(writes: RunWrite[]): string[] {
  return [...new Set(writes.flatMap((w) => [w.id, traceIdOf(w) ?? w.id].map((id) => id.toLowerCase())))].sort();
}

export class TraceRollups {
  /** The price table as the statement reads it: JSON of the entries with their rank. */
  private readonly prices: string;

  constructor(prices: readonly ModelPrice[]) {
    this.prices = JSON.stringify(
      prices.map((p, rank) => ({
        rank,
        match_pattern: p.match_pattern,
        provider: p.provider ?? null,
        prompt: p.prompt_per_million,
        completion: p.completion_per_million,
      })),
    );
  }

  /**
   * Checks that Postgres compiles every pattern of the table: a pattern it refuses would fail
   * every batch that meets an llm run with tokens.
   */
  async check(db: Kysely<TraceTables>): Promise<void> {
    try {
      await sql`SELECT '' ~ p.match_pattern FROM jsonb_to_recordset(${this.prices}::jsonb) AS p(match_pattern text)`.execute(db);
    } catch (error) {
      throw new ConfigError([`model prices: a match_pattern is not a regular expression Postgres accepts: ${(error as Error).message}`], { cause: error });
    }
  }

  /**
   * Prices and rolls up after a batch, in one statement; `stored` are the batch's writes that
   * reached their run. `priced` sets the costs of the batch's llm runs that have tokens and no
   * costs, or whose tokens the batch patched without costs (costs a client sent otherwise stay),
   * from the first entry of the table matching their model. `sums` adds up the llm runs of the
   * touched traces with the costs just priced (the statement's parts all read the rows as they
   * were before it). A root is written only when one of its figures changes.
   */
  async apply(trx: Kysely<TraceTables>, tenantId: string, written: RunWrite[]): Promise<void> {
    const stored = written.filter(concernsRollup);
    if (stored.length === 0) return;
    const traces = new Set<string>();
    const unnamed: string[] = [];
    for (const write of stored) {
      const trace = traceIdOf(write);
      if (trace) traces.add(trace);
      else unnamed.push(write.id);
    }
    const ids = [...new Set(stored.map((w) => w.id))];
    await sql`
      WITH priced AS (
        UPDATE runs r SET ${PRICED_SET}
        FROM (
          SELECT DISTINCT ON (u.id) u.id, u.start_time, ${COSTS_OF_TOKENS}
          FROM run_keys k JOIN runs u ON u.id = k.id AND u.start_time = k.start_time
            JOIN jsonb_to_recordset(${this.prices}::jsonb) AS p(rank int, match_pattern text, provider text, prompt numeric, completion numeric)
              ON ${MODEL_NAME} ~ p.match_pattern AND (p.provider IS NULL OR p.provider = u.extra->'metadata'->>'ls_provider')
          WHERE k.id = ANY(${ids}::uuid[]) AND k.tenant_id = ${tenantId}::uuid AND u.run_type = 'llm'
            AND (u.prompt_tokens IS NOT NULL OR u.completion_tokens IS NOT NULL)
            AND (u.id = ANY(${repriced(stored)}::uuid[]) OR (u.prompt_cost IS NULL AND u.completion_cost IS NULL AND u.total_cost IS NULL))
          ORDER BY u.id, p.rank) AS c
        WHERE r.id = c.id AND r.start_time = c.start_time
        RETURNING r.id, r.prompt_cost, r.completion_cost, r.total_cost),
      sums AS (
        SELECT u.trace_id, u.session_id, ${SUMS}
        FROM runs u LEFT JOIN priced p ON p.id = u.id
        WHERE u.tenant_id = ${tenantId}::uuid AND u.run_type = 'llm' AND u.trace_id = ANY(ARRAY(
          SELECT unnest(${[...traces]}::uuid[])
          UNION SELECT r.trace_id FROM run_keys k JOIN runs r ON r.id = k.id AND r.start_time = k.start_time WHERE k.id = ANY(${unnamed}::uuid[])))
        GROUP BY u.trace_id, u.session_id)
      UPDATE runs r SET ${ROLLED_SET}, updated_at = now()
      FROM sums s JOIN run_keys k ON k.id = s.trace_id
      WHERE r.id = k.id AND r.start_time = k.start_time AND r.tenant_id = ${tenantId}::uuid AND r.session_id = s.session_id
        AND r.run_type <> 'llm' AND ${ROLLED_CHANGED}`.execute(trx);
  }
}

// The statement's fixed parts, built once (their text does not depend on the batch).
const ROLLED = [...TOKEN_FIELDS, ...COST_FIELDS, 'first_token_time'] as const;
const perMillion = (tokens: string, price: string) => `trim_scale(u.${tokens} * p.${price} / 1000000)`;
const COSTS_OF_TOKENS = sql.raw(`${perMillion('prompt_tokens', 'prompt')} AS prompt_cost, ${perMillion('completion_tokens', 'completion')} AS completion_cost`);
const PRICED_SET = sql.raw(`prompt_cost = c.prompt_cost, completion_cost = c.completion_cost,
  total_cost = CASE WHEN c.prompt_cost IS NULL AND c.completion_cost IS NULL THEN NULL ELSE coalesce(c.prompt_cost, 0) + coalesce(c.completion_cost, 0) END,
  updated_at = now()`);
const SUMS = sql.raw(
  [
    ...TOKEN_FIELDS.map((f) => `sum(u.${f}) AS ${f}`),
    ...COST_FIELDS.map((f) => `sum(CASE WHEN p.id IS NULL THEN u.${f} ELSE p.${f} END) AS ${f}`),
    'min(u.first_token_time) AS first_token_time',
  ].join(', '),
);
const ROLLED_SET = sql.raw(ROLLED.map((f) => `${f} = coalesce(s.${f}, r.${f})`).join(', '));
const ROLLED_CHANGED = sql.raw(`(${ROLLED.map((f) => `r.${f}`).join(', ')}) IS DISTINCT FROM (${ROLLED.map((f) => `coalesce(s.${f}, r.${f})`).join(', ')})`);

/**
 * Whether a write can change a roll-up or a price: a new llm run or root (patches that waited for
 * it come with it), or a patch of what they are made of (the model is in `extra`). A batch of
 * chain steps and their ends costs no statement.
 */
function concernsRollup(w: RunWrite): boolean {
  if (w.op === 'create') return w.run_type === 'llm' || !w.parent_run_id;
  return w.extra != null || w.run_type != null || ROLLED.some((f) => w[f] != null);
}

/**
 * Runs whose last write in the batch carrying tokens or costs was a patch with tokens and no
 * costs: their stored costs (the table's or a client's) are of older tokens. A create never
 * reprices: it only fills what a patch that came first left empty.
 */
function repriced(stored: RunWrite[]): string[] {
  const last = new Map<string, boolean>();
  for (const w of stored) {
    const costs = COST_FIELDS.some((f) => w[f] != null);
    const tokens = TOKEN_FIELDS.some((f) => w[f] != null);
    if (w.op === 'patch' && (costs || tokens)) last.set(w.id, tokens && !costs);
  }
  return [...last].filter(([, reprice]) => reprice).map(([id]) => id);
}
