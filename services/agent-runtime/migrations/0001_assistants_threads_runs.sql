-- The agent server's own records, one schema per deployment. Checkpoints live beside them in
-- the tables of the LangGraph Postgres checkpointer (same schema).
CREATE TABLE assistants (
  assistant_id uuid PRIMARY KEY,
  graph_id text NOT NULL,
  name text NOT NULL,
  description text,
  config jsonb NOT NULL DEFAULT '{}',
  context jsonb NOT NULL DEFAULT '{}',
  metadata jsonb NOT NULL DEFAULT '{}',
  -- The active version; its config/context are copied into the columns above.
  version integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX assistants_by_graph ON assistants (graph_id);

CREATE TABLE assistant_versions (
  assistant_id uuid NOT NULL REFERENCES assistants (assistant_id) ON DELETE CASCADE,
  version integer NOT NULL,
  graph_id text NOT NULL,
  name text NOT NULL,
  description text,
  config jsonb NOT NULL,
  context jsonb NOT NULL,
  metadata jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (assistant_id, version)
);

CREATE TABLE threads (
  thread_id uuid PRIMARY KEY,
  metadata jsonb NOT NULL DEFAULT '{}',
  config jsonb NOT NULL DEFAULT '{}',
  status text NOT NULL DEFAULT 'idle' CHECK (status IN ('idle', 'busy', 'interrupted', 'error')),
  "values" jsonb,
  interrupts jsonb NOT NULL DEFAULT '{}',
  error jsonb,
  -- Threads made for threadless runs; deleted after the run unless on_completion=keep.
  temporary boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  state_updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX threads_by_created ON threads (created_at);

CREATE TABLE runs (
  run_id uuid PRIMARY KEY,
  thread_id uuid NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
  assistant_id uuid NOT NULL,
  status text NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'running', 'success', 'error', 'timeout', 'interrupted')),
  metadata jsonb NOT NULL DEFAULT '{}',
  kwargs jsonb NOT NULL,
  multitask_strategy text NOT NULL,
  -- Final values of a finished run (what /wait and /join return).
  output jsonb,
  -- Not before this time (after_seconds).
  available_at timestamptz NOT NULL DEFAULT now(),
  attempt integer NOT NULL DEFAULT 0,
  -- The worker executing it and until when its lease holds; an expired lease means it died.
  lease_owner text,
  lease_expires_at timestamptz,
  -- A cancel asked for while running; the worker also learns of it through the broker at once,
  -- this column covers the moment before it listens.
  cancel_action text CHECK (cancel_action IN ('interrupt', 'rollback')),
  -- The thread's latest checkpoint when the run first started: a takeover that finds a newer one
  -- continues from it, and a rollback removes everything after it.
  start_checkpoint_id text,
  started boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- Per-thread FIFO: the oldest unfinished run of a thread goes first.
CREATE INDEX runs_unfinished_by_thread ON runs (thread_id, created_at) WHERE status IN ('pending', 'running');
CREATE INDEX runs_by_thread ON runs (thread_id, created_at DESC);
CREATE INDEX runs_running_lease ON runs (lease_expires_at) WHERE status = 'running';
