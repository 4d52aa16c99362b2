-- Webhook deliveries: one row per run that named a `webhook`, written when the run ends and
-- updated by each delivery attempt. No foreign key to runs: the record outlives a deleted run
-- (temporary threads of threadless runs go soon after their run) while retries are under way.
CREATE TABLE webhooks (
  webhook_id uuid PRIMARY KEY,
  run_id uuid NOT NULL,
  thread_id uuid NOT NULL,
  url text NOT NULL,
  -- The POST body without webhook_sent_at (stamped per attempt).
  payload jsonb NOT NULL,
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  last_status_code integer,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz
);
CREATE INDEX webhooks_by_run ON webhooks (run_id, created_at);
