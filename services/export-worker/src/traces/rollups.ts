/**
 * Roll-ups of a trace onto its root run, as LangSmith shows them: the root carries the sums of
 * the tokens (prompt, completion, total) and costs of the trace's llm runs, and the earliest of
 * their first-token times. Costs an llm run reports without come from the model price table
 * (model-prices.ts).
 *
 * Maintained inside the ingest's transaction, after the batch's writes, in one round trip per
 * batch whatever its size (the SQL is the function `roll_up_traces`, migration 0009): it prices the
 * batch's llm runs that need it — from the first entry of the table matching the model name, found
 * where LangSmith looks for it (`extra.metadata.ls_model_name`, then the invocation parameters),
 * and the provider when the entry names one; costs a client sent stay unless a later patch sends
 * tokens without costs — and recomputes the root of every trace the batch touched from all of that
 * trace's llm runs. Recomputing (not adding
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
   * Prices and rolls up after a batch, in one round trip (the function `roll_up_traces` of
   * migration 0009); `written` are the batch's writes that reached their run.
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
    const runs = [...new Set(stored.map((w) => w.id))];
    await sql`SELECT roll_up_traces(${tenantId}::uuid, ${runs}::uuid[], ${repriced(stored)}::uuid[], ${[...traces]}::uuid[], ${unnamed}::uuid[], ${this.prices}::jsonb)`.execute(
      trx,
    );
  }
}

const ROLLED = [...TOKEN_FIELDS, ...COST_FIELDS, 'first_token_time'] as const;

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
