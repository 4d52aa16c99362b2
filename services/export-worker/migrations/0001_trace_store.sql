-- The trace store: tracing projects (sessions) and their runs, in LangSmith's run shape.

CREATE TABLE sessions (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  name text NOT NULL,
  description text,
  metadata jsonb NOT NULL DEFAULT '{}',
  reference_dataset_id uuid,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, name)
);

-- Runs are partitioned by the UTC day of start_time (partitions are created on demand by the
-- store), so that an export or query of a time range reads only that range's partitions.
CREATE TABLE runs (
  id uuid NOT NULL,
  tenant_id uuid NOT NULL,
  session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  trace_id uuid NOT NULL,
  dotted_order text,
  parent_run_id uuid,
  parent_run_ids uuid[] NOT NULL DEFAULT '{}',
  reference_example_id uuid,
  name text NOT NULL,
  run_type text NOT NULL,
  start_time timestamptz NOT NULL,
  end_time timestamptz,
  inputs jsonb,
  outputs jsonb,
  error text,
  extra jsonb,
  events jsonb,
  tags text[] NOT NULL DEFAULT '{}',
  feedback_stats jsonb,
  prompt_tokens bigint,
  completion_tokens bigint,
  total_tokens bigint,
  prompt_cost numeric,
  completion_cost numeric,
  total_cost numeric,
  first_token_time timestamptz,
  trace_tier text,
  -- derived as LangSmith derives them, so no writer can make them disagree with the run
  status text NOT NULL GENERATED ALWAYS AS (
    CASE WHEN error IS NOT NULL THEN 'error' WHEN end_time IS NOT NULL THEN 'success' ELSE 'pending' END
  ) STORED,
  is_root boolean NOT NULL GENERATED ALWAYS AS (parent_run_id IS NULL) STORED,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (id, start_time)
) PARTITION BY RANGE (start_time);

-- Keyset paging of one project in time order (exports, POST /runs/query).
CREATE INDEX runs_session_time ON runs (session_id, start_time, id);
CREATE INDEX runs_trace ON runs (trace_id);

-- Where each run lives: Postgres cannot enforce a unique id across partitions, and a patch
-- usually lacks start_time (the partition key), so this small unpartitioned table maps a run id to
-- its tenant and start_time, and makes the id unique.
CREATE TABLE run_keys (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  start_time timestamptz NOT NULL
);

-- Patches that arrived before their run's create (batching clients may send them in either
-- order); applied, in arrival order, when the create comes.
CREATE TABLE pending_run_patches (
  seq bigserial PRIMARY KEY,
  run_id uuid NOT NULL,
  tenant_id uuid NOT NULL,
  patch jsonb NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pending_run_patches_run ON pending_run_patches (run_id);
