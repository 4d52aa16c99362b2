-- Whether the worker that holds a run is alive: each worker process keeps one session holding a
-- session-level advisory lock keyed by its owner id (src/runs/liveness.ts). A worker that dies
-- (killed, crashed, its machine gone) loses the session, and the lock, at once; one that merely
-- cannot reach the database keeps it until Postgres notices the session is gone. Runs of a live
-- worker are not taken over before its lease has been unrenewed for the hold period
-- (src/runs/lease.ts), so a worker cut off from Postgres for a while keeps its runs.
CREATE FUNCTION lease_owner_key(p_owner text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT hashtextextended('berth-lease-owner:' || p_owner, 0) $$;

CREATE FUNCTION lease_owner_alive(p_owner text) RETURNS boolean
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
  -- A bigint advisory lock shows its high half in classid, its low half in objid, objsubid 1.
  SELECT EXISTS (
    SELECT 1 FROM pg_catalog.pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
      AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())
      AND ((l.classid::bigint << 32) | l.objid::bigint) = lease_owner_key(p_owner)
  )
$$;
