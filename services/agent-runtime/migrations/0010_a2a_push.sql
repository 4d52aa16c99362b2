-- A2A push notifications (src/a2a/push.ts): the configs clients set on tasks (runs), delivered
-- through the run webhooks' queue, whose records now carry their own headers (the config's
-- token) and may leave the body as it is (an A2A Task, not a run with webhook_sent_at).
ALTER TABLE webhooks
  ADD COLUMN headers jsonb NOT NULL DEFAULT '{}',
  ADD COLUMN stamp_sent_at boolean NOT NULL DEFAULT true;

CREATE TABLE a2a_push_configs (
  task_id uuid NOT NULL,
  config_id text NOT NULL,
  thread_id uuid NOT NULL,
  url text NOT NULL,
  token text,
  -- The A2A version of the call that set it: the shape of the notifications' bodies.
  version text NOT NULL CHECK (version IN ('1.0', '0.3')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, config_id)
);
