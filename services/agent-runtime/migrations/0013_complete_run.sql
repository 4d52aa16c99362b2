-- A run's end and the creation of its thread's next run decide under the thread's row lock, one
-- after the other. RunStore.complete used to end the run and look for the thread's next run in one
-- statement, whose snapshot was taken before it waited for the thread's row: a run created
-- meanwhile (create_run_v2 holds that lock while it decides and inserts) was not seen, so the end
-- named no next run and marked the thread idle; that creation, seeing the ending run still running,
-- had not claimed its run, and its creator's dispatch, when it came before the end committed, found
-- the older run unfinished too. Nobody started the run until a worker's sweep found it.
--
-- complete_run takes the thread's row lock first (create_run_v2's order: thread, then runs), then
-- decides in statements that start after it: it sees every run created before it got the lock, and
-- a creation after it sees the run ended (it claims its run, or its creator's dispatch does). A new
-- function beside the old statement: the workers of the previous version keep working during a
-- rolling upgrade.
CREATE FUNCTION complete_run(
  p_run_id uuid, p_owner text, p_attempt integer, p_status text, p_output jsonb, p_failed boolean,
  p_interrupted boolean, p_has_values boolean, p_values jsonb, p_interrupts jsonb, p_error jsonb
) RETURNS TABLE (finished boolean, next_run_id uuid)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
  v_thread uuid;
  v_next uuid;
BEGIN
  SELECT r.thread_id INTO v_thread FROM runs r WHERE r.run_id = p_run_id;
  -- NO KEY UPDATE (what the thread's update below takes anyway) conflicts with create_run_v2's
  -- FOR UPDATE but not with the key share lock that inserting a run of the thread takes.
  PERFORM 1 FROM threads t WHERE t.thread_id = v_thread FOR NO KEY UPDATE;

  UPDATE runs r SET status = p_status, output = p_output, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
  WHERE r.run_id = p_run_id AND r.lease_owner = p_owner AND r.attempt = p_attempt AND r.status = 'running';
  IF NOT FOUND THEN
    RETURN QUERY SELECT false, NULL::uuid;
    RETURN;
  END IF;

  SELECT r.run_id INTO v_next FROM runs r
  WHERE r.thread_id = v_thread AND r.status IN ('pending', 'running') ORDER BY r.created_at, r.run_id LIMIT 1;

  UPDATE threads t SET
    status = CASE WHEN p_failed THEN 'error' WHEN p_interrupted THEN 'interrupted' WHEN v_next IS NOT NULL THEN 'busy' ELSE 'idle' END,
    "values" = CASE WHEN p_has_values THEN p_values ELSE t."values" END,
    interrupts = CASE WHEN p_has_values THEN p_interrupts ELSE t.interrupts END,
    error = p_error, updated_at = now(),
    -- The end of a run is activity: a thread with a TTL expires that long after it.
    expires_at = now() + t.ttl_minutes * interval '1 minute',
    state_updated_at = CASE WHEN p_has_values THEN now() ELSE t.state_updated_at END
  WHERE t.thread_id = v_thread;

  RETURN QUERY SELECT true, v_next;
END;
$$;
