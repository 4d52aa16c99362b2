-- Event streams of agent runs (the embedded event broker, @berth/broker).
-- One row per run: the sequence counter (its row lock serializes the publishers of a run, so
-- sequence numbers are gap-free and commit in order), the end mark and the last activity, which
-- the retention sweep reads. Not indexed beyond its key so that the per-publish update stays a
-- HOT update (the sweep scans this table, which holds one row per retained run).
CREATE TABLE run_streams (
  run_id text PRIMARY KEY,
  next_seq bigint NOT NULL DEFAULT 0,
  ended_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 70);

-- The events; `data` is JSON text (text, not jsonb: stored and returned byte for byte, and no
-- parse on the way in for large events).
CREATE TABLE run_events (
  run_id text NOT NULL,
  seq bigint NOT NULL,
  event text NOT NULL,
  data text NOT NULL,
  PRIMARY KEY (run_id, seq)
);
