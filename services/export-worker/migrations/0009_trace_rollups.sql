-- Roll-ups of traces onto their root runs (src/traces/rollups.ts).
--
-- The ingest's roll-up of a batch, in one round trip (src/traces/rollups.ts says what and why). A
-- function with generic plans so that its statements are planned once per connection: planned
-- afresh for every batch (as a statement, or as the custom plans Postgres otherwise keeps choosing
-- for array arguments) they cost ~0.6 ms of Postgres CPU per batch, about as much as the rest of
-- the batch's writes (docs/benchmarks.md, "Trace roll-ups").
--
-- p_runs: the batch's runs that were written; p_repriced: those of them whose tokens a patch of the
-- batch set without costs; p_traces: the batch's traces; p_unnamed: its runs whose trace the batch
-- did not name; p_prices: the model price table, [{rank, match_pattern, provider, prompt,
-- completion}] with prices per million tokens.
CREATE FUNCTION roll_up_traces(p_tenant uuid, p_runs uuid[], p_repriced uuid[], p_traces uuid[], p_unnamed uuid[], p_prices jsonb)
RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  IF cardinality(p_unnamed) > 0 THEN
    p_traces := p_traces || ARRAY(
      SELECT r.trace_id FROM run_keys k JOIN runs r ON r.id = k.id AND r.start_time = k.start_time
      WHERE k.id = ANY(p_unnamed) AND k.tenant_id = p_tenant);
  END IF;

  -- Costs of llm runs with tokens and no costs (or re-priced): the first entry matching the model
  -- name, looked up where LangSmith looks for it, and the provider when the entry names one.
  UPDATE runs r SET prompt_cost = c.prompt_cost, completion_cost = c.completion_cost,
    total_cost = CASE WHEN c.prompt_cost IS NULL AND c.completion_cost IS NULL THEN NULL
      ELSE coalesce(c.prompt_cost, 0) + coalesce(c.completion_cost, 0) END,
    updated_at = now()
  FROM (
    SELECT DISTINCT ON (u.id) u.id, u.start_time,
      trim_scale(u.prompt_tokens * p.prompt / 1000000) AS prompt_cost,
      trim_scale(u.completion_tokens * p.completion / 1000000) AS completion_cost
    FROM run_keys k JOIN runs u ON u.id = k.id AND u.start_time = k.start_time
      JOIN jsonb_to_recordset(p_prices) AS p(rank int, match_pattern text, provider text, prompt numeric, completion numeric)
        ON coalesce(u.extra->'metadata'->>'ls_model_name', u.extra->'invocation_params'->>'model',
          u.extra->'invocation_params'->>'model_name', u.extra->'invocation_params'->>'model_id',
          u.extra->'invocation_params'->>'model_path', u.extra->'invocation_params'->>'endpoint_name') ~ p.match_pattern
        AND (p.provider IS NULL OR p.provider = u.extra->'metadata'->>'ls_provider')
    WHERE k.id = ANY(p_runs) AND k.tenant_id = p_tenant AND u.run_type = 'llm'
      AND (u.prompt_tokens IS NOT NULL OR u.completion_tokens IS NOT NULL)
      AND (u.id = ANY(p_repriced) OR (u.prompt_cost IS NULL AND u.completion_cost IS NULL AND u.total_cost IS NULL))
    ORDER BY u.id, p.rank) AS c
  WHERE r.id = c.id AND r.start_time = c.start_time;

  -- Each root (not itself an llm run) of the traces: the sums of its tenant's and project's llm
  -- runs of the trace, a figure none of them reports left as it is; written only when it changes.
  UPDATE runs r SET prompt_tokens = coalesce(s.prompt_tokens, r.prompt_tokens),
    completion_tokens = coalesce(s.completion_tokens, r.completion_tokens),
    total_tokens = coalesce(s.total_tokens, r.total_tokens),
    prompt_cost = coalesce(s.prompt_cost, r.prompt_cost),
    completion_cost = coalesce(s.completion_cost, r.completion_cost),
    total_cost = coalesce(s.total_cost, r.total_cost),
    first_token_time = coalesce(s.first_token_time, r.first_token_time),
    updated_at = now()
  FROM (
    SELECT u.trace_id, u.session_id, sum(u.prompt_tokens) AS prompt_tokens, sum(u.completion_tokens) AS completion_tokens,
      sum(u.total_tokens) AS total_tokens, sum(u.prompt_cost) AS prompt_cost, sum(u.completion_cost) AS completion_cost,
      sum(u.total_cost) AS total_cost, min(u.first_token_time) AS first_token_time
    FROM runs u
    WHERE u.tenant_id = p_tenant AND u.run_type = 'llm' AND u.trace_id = ANY(p_traces)
    GROUP BY u.trace_id, u.session_id) AS s
  JOIN run_keys k ON k.id = s.trace_id AND k.tenant_id = p_tenant
  WHERE r.id = k.id AND r.start_time = k.start_time AND r.session_id = s.session_id AND r.run_type <> 'llm'
    AND (r.prompt_tokens, r.completion_tokens, r.total_tokens, r.prompt_cost, r.completion_cost, r.total_cost, r.first_token_time)
      IS DISTINCT FROM (coalesce(s.prompt_tokens, r.prompt_tokens), coalesce(s.completion_tokens, r.completion_tokens),
        coalesce(s.total_tokens, r.total_tokens), coalesce(s.prompt_cost, r.prompt_cost), coalesce(s.completion_cost, r.completion_cost),
        coalesce(s.total_cost, r.total_cost), coalesce(s.first_token_time, r.first_token_time));
END
$$;

-- From now on the ingest keeps the roll-ups; this fills them in once for the traces stored before
-- (their llm runs are not priced: prices apply to runs written from now on).
SELECT roll_up_traces(tenant_id, '{}', '{}', array_agg(id), '{}', '[]') FROM runs WHERE is_root GROUP BY tenant_id;
