-- Crons: runs started on a schedule. A cron without thread_id starts each run on a new thread
-- (on_run_completed decides whether it is kept); one with a thread_id runs on that thread and goes
-- with it. next_run_date is the tick to fire next: the tick job compares it and moves it, so a
-- tick fires once however many workers and replicas see its job.
CREATE TABLE crons (
  cron_id uuid PRIMARY KEY,
  assistant_id uuid NOT NULL REFERENCES assistants (assistant_id) ON DELETE CASCADE,
  thread_id uuid REFERENCES threads (thread_id) ON DELETE CASCADE,
  schedule text NOT NULL,
  -- IANA zone the schedule is read in; null = UTC.
  timezone text,
  end_time timestamptz,
  enabled boolean NOT NULL DEFAULT true,
  on_run_completed text CHECK (on_run_completed IN ('delete', 'keep')),
  -- The run fields of each tick (input, config, context, stream_mode, webhook, ...).
  payload jsonb NOT NULL DEFAULT '{}',
  metadata jsonb NOT NULL DEFAULT '{}',
  user_id text,
  -- Null while disabled or once end_time has passed.
  next_run_date timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX crons_due ON crons (next_run_date) WHERE enabled;
CREATE INDEX crons_by_assistant ON crons (assistant_id);
CREATE INDEX crons_by_thread ON crons (thread_id) WHERE thread_id IS NOT NULL;
