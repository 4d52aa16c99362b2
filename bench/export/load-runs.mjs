/**
 * Loads `runs` LLM runs of one project into the trace store's day partitions of `days`
 * (`YYYY-MM-DD`), spread evenly over each day, with one `INSERT … SELECT generate_series` per day:
 * inputs and outputs of a few KB (a system prompt of pseudo-words and a question in, a generation
 * out), extra, events, tags, tokens, costs, latencies from 0.2 s to 5 s; every 50th has an error
 * and every 10th feedback. Answers the size of the runs partitions. Used by bench/export/run.mjs and
 * bench/export/trace-api.mjs.
 */
import { sql } from '@berth/db';
import { partitionName } from '@berth/export-worker';
import { texts } from './payloads.mjs';

export async function loadRuns(database, { tenantId, sessionId, runs: RUNS, days, log = () => {} }) {
  const db = database.db;
  await sql`CREATE UNLOGGED TABLE public.bench_texts (k int PRIMARY KEY, t text NOT NULL)`.execute(db);
  const pool = texts(1000);
  await sql`INSERT INTO public.bench_texts SELECT * FROM unnest(${pool.map((_, i) => i)}::int[], ${pool}::text[])`.execute(db);
  const perDay = Math.ceil(RUNS / days.length);
  const stepMs = Math.floor(86_400_000 / perDay);
  for (const [d, day] of days.entries()) {
    const first = d * perDay;
    const last = Math.min(RUNS, first + perDay) - 1;
    if (last < first) break;
    // The store's own day partition (same name and bounds as TraceStore creates).
    await sql`CREATE TABLE IF NOT EXISTS ${sql.id(partitionName(day))} PARTITION OF runs FOR VALUES FROM (${sql.lit(`${day}T00:00:00Z`)}) TO (${sql.lit(new Date(Date.parse(`${day}T00:00:00Z`) + 86_400_000).toISOString())})`.execute(db);
    // start_time in whole milliseconds, as the store keeps them (its keyset cursor is a JS Date).
    await sql`
      INSERT INTO runs (id, tenant_id, session_id, trace_id, dotted_order, parent_run_id, parent_run_ids, name, run_type, start_time,
        end_time, inputs, outputs, error, extra, events, tags, feedback_stats, prompt_tokens, completion_tokens, total_tokens,
        prompt_cost, completion_cost, total_cost, first_token_time, trace_tier)
      SELECT s.id, ${tenantId}::uuid, ${sessionId}::uuid, s.id,
        to_char(s.st AT TIME ZONE 'UTC', 'YYYYMMDD"T"HH24MISSUS"Z"') || s.id, NULL, '{}', 'ChatOpenAI', 'llm', s.st,
        s.st + (200 + s.g % 4801) * interval '1 ms',
        jsonb_build_object('messages', jsonb_build_array(jsonb_build_object('role', 'system', 'content', a.t),
          jsonb_build_object('role', 'user', 'content', 'question ' || md5(s.g::text)))),
        jsonb_build_object('generations', jsonb_build_array(jsonb_build_object('text', b.t, 'finish_reason', 'stop')),
          'llm_output', jsonb_build_object('model_name', 'gpt-4o-mini', 'token_usage', jsonb_build_object('prompt_tokens', 300 + s.g % 97))),
        CASE WHEN s.g % 50 = 0 THEN 'RateLimitError: retry after 2 s' END,
        jsonb_build_object('metadata', jsonb_build_object('ls_provider', 'openai', 'ls_model_name', 'gpt-4o-mini', 'thread_id', md5((s.g / 10)::text))),
        jsonb_build_array(jsonb_build_object('name', 'new_token', 'time', s.st + interval '200 ms')),
        ARRAY['bench', 'shard-' || (s.g % 8)],
        CASE WHEN s.g % 10 = 0 THEN jsonb_build_object('correctness', jsonb_build_object('n', 1, 'avg', (s.g % 3) / 2.0)) END,
        300 + s.g % 97, 40 + s.g % 13, 340 + s.g % 97 + s.g % 13,
        (300 + s.g % 97) * 0.00000015, (40 + s.g % 13) * 0.0000006, (300 + s.g % 97) * 0.00000015 + (40 + s.g % 13) * 0.0000006,
        s.st + interval '200 ms', NULL
      FROM (SELECT g, gen_random_uuid() AS id, ${`${day}T00:00:00Z`}::timestamptz + (g - ${first}) * ${stepMs} * interval '1 ms' AS st
            FROM generate_series(${first}::int, ${last}::int) g) s
      JOIN public.bench_texts a ON a.k = s.g % 1000
      JOIN public.bench_texts b ON b.k = (s.g * 7 + 3) % 1000`.execute(db);
    log(`  ${day}: ${last - first + 1} runs`);
  }
  await sql`INSERT INTO run_keys (id, tenant_id, start_time) SELECT id, tenant_id, start_time FROM runs WHERE session_id = ${sessionId}::uuid`.execute(db);
  await sql`DROP TABLE public.bench_texts`.execute(db);
  await sql`VACUUM ANALYZE runs`.execute(db);
  const size = await sql`SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid))) AS size FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'runs'::regclass`.execute(db);
  return size.rows[0].size;
}
