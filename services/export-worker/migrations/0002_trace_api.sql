-- What LangSmith's project API reads and writes beyond the first schema, and indexes for the
-- run queries of POST /runs/query and the sweep of patches whose create never came.

-- A project's `extra` object as clients send it (metadata under extra.metadata) and its end time.
ALTER TABLE sessions ADD COLUMN extra jsonb NOT NULL DEFAULT '{}';
ALTER TABLE sessions ADD COLUMN end_time timestamptz;
CREATE INDEX sessions_tenant_created ON sessions (tenant_id, created_at DESC, id);

-- Children of a run (listRuns with parentRunId, readRun with loadChildRuns).
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

-- The sweep deletes patches older than the configured age.
CREATE INDEX pending_run_patches_received ON pending_run_patches (received_at);
