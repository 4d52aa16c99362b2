-- Roll-ups of traces onto their root runs (src/traces/rollups.ts): from now on the ingest keeps a
-- root's tokens, costs and first-token time equal to the sums (and the earliest) of its trace's
-- llm runs. This fills them in once for the runs stored before; costs of llm runs that reported
-- tokens without costs are priced by the ingest only, for runs it writes from now on.
WITH sums AS (
  SELECT tenant_id, session_id, trace_id, sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
    sum(total_tokens) AS total_tokens, sum(prompt_cost) AS prompt_cost, sum(completion_cost) AS completion_cost,
    sum(total_cost) AS total_cost, min(first_token_time) AS first_token_time
  FROM runs WHERE run_type = 'llm' GROUP BY tenant_id, session_id, trace_id)
UPDATE runs r SET
  prompt_tokens = coalesce(s.prompt_tokens, r.prompt_tokens),
  completion_tokens = coalesce(s.completion_tokens, r.completion_tokens),
  total_tokens = coalesce(s.total_tokens, r.total_tokens),
  prompt_cost = coalesce(s.prompt_cost, r.prompt_cost),
  completion_cost = coalesce(s.completion_cost, r.completion_cost),
  total_cost = coalesce(s.total_cost, r.total_cost),
  first_token_time = coalesce(s.first_token_time, r.first_token_time)
FROM sums s
WHERE r.is_root AND r.run_type <> 'llm' AND r.tenant_id = s.tenant_id AND r.session_id = s.session_id AND r.id = s.trace_id;
