-- A lease's times are the lease clock's (libs/lease, sql.ts), not the database's: create_run_v2
-- claims with the lease's expiry (p_lease_expires_at) instead of its length, and is otherwise
-- create_run of 0003. A new name, not an overload: create_run stays as it was for the workers of
-- the previous version during a rolling upgrade (an overload would make their calls ambiguous).
CREATE FUNCTION create_run_v2(
  p_run_id uuid, p_thread_id uuid, p_assistant_id uuid, p_graph_id text, p_metadata jsonb,
  p_kwargs jsonb, p_strategy text, p_after_seconds double precision, p_filter jsonb,
  p_owner text, p_lease_expires_at timestamptz
) RETURNS TABLE (
  outcome text, superseded jsonb, run_id uuid, thread_id uuid, assistant_id uuid, status text,
  metadata jsonb, kwargs jsonb, multitask_strategy text, attempt integer, available_at timestamptz,
  created_at timestamptz, updated_at timestamptz, start_checkpoint_id text, claimed boolean, assistant jsonb
)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
  v_inflight jsonb;
  v_claim boolean;
BEGIN
  PERFORM 1 FROM assistants a WHERE a.assistant_id = p_assistant_id;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'assistant_not_found'::text, NULL::jsonb, NULL::uuid, NULL::uuid, NULL::uuid, NULL::text, NULL::jsonb,
      NULL::jsonb, NULL::text, NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,
      NULL::text, NULL::boolean, NULL::jsonb;
    RETURN;
  END IF;

  PERFORM 1 FROM threads t
  WHERE t.thread_id = p_thread_id
    AND NOT EXISTS (
      SELECT 1 FROM jsonb_array_elements(p_filter) c
      WHERE NOT coalesce(CASE WHEN c ->> 'op' = 'eq' THEN t.metadata -> (c ->> 'key') = c -> 'value'
                              ELSE t.metadata -> (c ->> 'key') @> (c -> 'value') END, false))
  FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'not_found'::text, NULL::jsonb, NULL::uuid, NULL::uuid, NULL::uuid, NULL::text, NULL::jsonb,
      NULL::jsonb, NULL::text, NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,
      NULL::text, NULL::boolean, NULL::jsonb;
    RETURN;
  END IF;

  SELECT coalesce(jsonb_agg(jsonb_build_object('run_id', r.run_id, 'status', r.status) ORDER BY r.created_at, r.run_id), '[]')
  INTO v_inflight
  FROM runs r WHERE r.thread_id = p_thread_id AND r.status IN ('pending', 'running');

  IF p_strategy = 'reject' AND jsonb_array_length(v_inflight) > 0 THEN
    RETURN QUERY SELECT 'busy'::text, v_inflight, NULL::uuid, NULL::uuid, NULL::uuid, NULL::text, NULL::jsonb,
      NULL::jsonb, NULL::text, NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,
      NULL::text, NULL::boolean, NULL::jsonb;
    RETURN;
  END IF;

  -- Runs that never started end right here; running ones are stopped by their worker.
  IF p_strategy = 'rollback' THEN
    DELETE FROM runs r WHERE r.thread_id = p_thread_id AND r.status = 'pending';
  ELSIF p_strategy = 'interrupt' THEN
    UPDATE runs r SET status = 'interrupted', updated_at = now() WHERE r.thread_id = p_thread_id AND r.status = 'pending';
  ELSE
    v_inflight := '[]';
  END IF;

  v_claim := p_owner IS NOT NULL AND p_after_seconds <= 0
    AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.thread_id = p_thread_id AND r.status IN ('pending', 'running'));

  UPDATE threads t SET status = 'busy', updated_at = now(),
    metadata = CASE WHEN t.metadata ? 'graph_id' THEN t.metadata
                    ELSE t.metadata || jsonb_build_object('graph_id', p_graph_id, 'assistant_id', p_assistant_id::text) END
  WHERE t.thread_id = p_thread_id;

  RETURN QUERY
  WITH created AS (
    INSERT INTO runs AS r (run_id, thread_id, assistant_id, metadata, kwargs, multitask_strategy, available_at,
                           status, attempt, lease_owner, lease_expires_at, started, start_checkpoint_id)
    VALUES (p_run_id, p_thread_id, p_assistant_id, p_metadata, p_kwargs, p_strategy, now() + make_interval(secs => p_after_seconds),
      CASE WHEN v_claim THEN 'running' ELSE 'pending' END,
      CASE WHEN v_claim THEN 1 ELSE 0 END,
      CASE WHEN v_claim THEN p_owner END,
      CASE WHEN v_claim THEN p_lease_expires_at END,
      v_claim,
      CASE WHEN v_claim THEN (SELECT max(k.checkpoint_id) FROM checkpoints k WHERE k.thread_id = p_thread_id::text AND k.checkpoint_ns = '') END)
    RETURNING r.run_id, r.thread_id, r.assistant_id, r.status, r.metadata, r.kwargs, r.multitask_strategy, r.attempt,
              r.available_at, r.created_at, r.updated_at, r.start_checkpoint_id
  )
  SELECT 'created'::text, v_inflight, c.run_id, c.thread_id, c.assistant_id, c.status, c.metadata, c.kwargs,
         c.multitask_strategy, c.attempt, c.available_at, c.created_at, c.updated_at, c.start_checkpoint_id, v_claim,
         CASE WHEN v_claim THEN (SELECT to_jsonb(a) FROM assistants a WHERE a.assistant_id = p_assistant_id) END
  FROM created c;
END;
$$;
