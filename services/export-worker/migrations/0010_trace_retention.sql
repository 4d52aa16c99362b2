-- Retention of traces (src/traces/retention.ts). A project's trace tier, LangSmith's `trace_tier`:
-- 'shortlived' (base, 14 days by default) or 'longlived' (extended, 400 days by default); NULL for
-- projects made before tiers existed, which keep the tenant's default tier.
ALTER TABLE sessions ADD COLUMN trace_tier text CHECK (trace_tier IN ('shortlived', 'longlived'));

-- Each run carries the tier of its project when it arrived (the exported `trace_tier` column), so
-- that changing a project's tier applies to the traces that come after, as in LangSmith. A trigger
-- rather than the writers: every way a run is inserted gets it, and a run the client sent with a
-- tier keeps that one. search_path is fixed at creation: the function finds this schema's sessions
-- whatever the caller's path.
CREATE FUNCTION runs_trace_tier() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NEW.trace_tier IS NULL THEN
    SELECT s.trace_tier INTO NEW.trace_tier FROM sessions s WHERE s.id = NEW.session_id;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER runs_trace_tier BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION runs_trace_tier();

