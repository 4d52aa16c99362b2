-- Feedback on runs (LangSmith's `/feedback`): scores, values, comments and corrections that people
-- and evaluators attach to a run. Each run's `feedback_stats` (count and average score per key) is
-- recomputed from this table on every write, so the run document, filters and exports read it as
-- any other run column.
CREATE TABLE feedback (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  run_id uuid NOT NULL,
  -- where the run lives (runs are partitioned by start_time): its stats are updated in place
  run_start_time timestamptz NOT NULL,
  trace_id uuid NOT NULL,
  session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  key text NOT NULL,
  score float8,
  value jsonb,
  comment text,
  correction jsonb,
  feedback_source jsonb NOT NULL DEFAULT '{}',
  comparative_experiment_id uuid,
  feedback_group_id uuid,
  created_at timestamptz NOT NULL DEFAULT now(),
  modified_at timestamptz NOT NULL DEFAULT now()
);

-- A run's feedback (its stats, GET /feedback?run=…) and a tenant's feedback by key, newest first.
CREATE INDEX feedback_run ON feedback (run_id, key);
CREATE INDEX feedback_tenant_time ON feedback (tenant_id, created_at DESC, id DESC);

-- Feedback on a run that has not arrived yet (the client sends feedback straight away and the run
-- with its next batch): kept until a run of that id, tenant (and project, for a bound writer)
-- arrives, then stored as any feedback; deleted when it waited longer than pending run patches may.
CREATE TABLE pending_feedback (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  run_id uuid NOT NULL,
  scope_session_id uuid,
  feedback jsonb NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pending_feedback_run ON pending_feedback (run_id);
CREATE INDEX pending_feedback_tenant ON pending_feedback (tenant_id);
