/**
 * The model price table: what an llm run that reports tokens but no costs costs, as LangSmith's
 * model price map prices it. An entry matches a run when its `match_pattern` (a regular
 * expression, as LangSmith's) matches the run's model name and, when the entry names a
 * `provider`, the run's `ls_provider`; the first matching entry prices the run. Prices are in
 * US dollars per million tokens.
 *
 * Berth ships {@link DEFAULT_MODEL_PRICES}; an operator replaces it with a JSON file of their own
 * (`TRACE_MODEL_PRICES_FILE`, see docs/guides/tracing.md "Tokens and costs").
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from '@berth/config';
import { z } from 'zod';

const ModelPriceSchema = z
  .object({
    /** What the entry is, for people reading the table. */
    name: z.string().min(1).max(200),
    /** A regular expression (Postgres' dialect, which JavaScript's simple patterns share) the model name must match. */
    match_pattern: z.string().min(1).max(500),
    /** When set, the run's `extra.metadata.ls_provider` must equal it. */
    provider: z.string().min(1).max(200).optional(),
    /** US dollars per million prompt (input) tokens. */
    prompt_per_million: z.number().finite().min(0),
    /** US dollars per million completion (output) tokens. */
    completion_per_million: z.number().finite().min(0),
  })
  .strict();

export type ModelPrice = z.infer<typeof ModelPriceSchema>;

export const ModelPriceTableSchema = z.array(ModelPriceSchema).max(10_000);

/**
 * List prices of a few common models (per million tokens, published by their providers in 2025).
 * Prices change: an operator who relies on costs keeps a table of their own.
 */
export const DEFAULT_MODEL_PRICES: readonly ModelPrice[] = [
  { name: 'gpt-4o-mini', match_pattern: '^gpt-4o-mini(-\\d{4}-\\d{2}-\\d{2})?$', prompt_per_million: 0.15, completion_per_million: 0.6 },
  { name: 'gpt-4o', match_pattern: '^gpt-4o(-\\d{4}-\\d{2}-\\d{2})?$', prompt_per_million: 2.5, completion_per_million: 10 },
  { name: 'gpt-4.1-nano', match_pattern: '^gpt-4\\.1-nano(-\\d{4}-\\d{2}-\\d{2})?$', prompt_per_million: 0.1, completion_per_million: 0.4 },
  { name: 'gpt-4.1-mini', match_pattern: '^gpt-4\\.1-mini(-\\d{4}-\\d{2}-\\d{2})?$', prompt_per_million: 0.4, completion_per_million: 1.6 },
  { name: 'gpt-4.1', match_pattern: '^gpt-4\\.1(-\\d{4}-\\d{2}-\\d{2})?$', prompt_per_million: 2, completion_per_million: 8 },
  { name: 'o4-mini', match_pattern: '^o4-mini(-\\d{4}-\\d{2}-\\d{2})?$', prompt_per_million: 1.1, completion_per_million: 4.4 },
  { name: 'claude-3-5-haiku', match_pattern: '^claude-3-5-haiku', prompt_per_million: 0.8, completion_per_million: 4 },
  { name: 'claude-sonnet', match_pattern: '^claude-(3-5-sonnet|3-7-sonnet|sonnet-4)', prompt_per_million: 3, completion_per_million: 15 },
  { name: 'claude-opus-4', match_pattern: '^claude-opus-4', prompt_per_million: 15, completion_per_million: 75 },
  { name: 'gemini-2.0-flash', match_pattern: '^gemini-2\\.0-flash(-\\d{3})?$', prompt_per_million: 0.1, completion_per_million: 0.4 },
];

/** The table in `file` (a JSON array of entries), or a ConfigError saying what is wrong with it. */
export function loadModelPrices(file: string): ModelPrice[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ConfigError([`TRACE_MODEL_PRICES_FILE: ${file} cannot be read as JSON: ${(error as Error).message}`], { cause: error });
  }
  const table = ModelPriceTableSchema.safeParse(parsed);
  if (!table.success) {
    const issue = table.error.issues[0]!;
    throw new ConfigError([`TRACE_MODEL_PRICES_FILE: ${file} is invalid at ${issue.path.join('.') || '(top)'}: ${issue.message}`], { cause: table.error });
  }
  return table.data;
}
