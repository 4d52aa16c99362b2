-- Bulk export: destinations, exports (one-time, spawned, and the schedules that spawn them) and
-- export runs (one per UTC day partition of an export). Statuses are written only by the stores'
-- `move` functions, checked against the lifecycles in src/exports/lifecycle.ts.

CREATE TABLE destinations (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  destination_type text NOT NULL,
  display_name text NOT NULL,
  -- bucket_name, prefix, region, endpoint_url (no secret in here)
  config jsonb NOT NULL,
  -- the credentials object as JSON, sealed with the platform key (AES-256-GCM, @berth/secret-box)
  credentials_sealed bytea NOT NULL,
  credentials_keys text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX destinations_tenant ON destinations (tenant_id, created_at DESC);

CREATE TABLE exports (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  -- no foreign key: a destination may be deleted once only final exports use it (checked under a
  -- row lock by the destination store), and those keep naming it
  destination_id uuid NOT NULL,
  session_id uuid NOT NULL,
  start_time timestamptz NOT NULL,
  end_time timestamptz,
  format_version text NOT NULL,
  filter text,
  -- null: every field
  export_fields text[],
  interval_hours integer CHECK (interval_hours BETWEEN 1 AND 168),
  status text NOT NULL,
  status_message text NOT NULL DEFAULT '',
  -- a spawned export: its schedule and interval number k ([start + k·h, start + (k+1)·h))
  source_bulk_export_id uuid REFERENCES exports (id),
  interval_index integer,
  -- a schedule: the next interval it will spawn (bookkeeping; the unique key below is what makes a
  -- spawn happen once)
  next_interval_index integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz,
  finished_at timestamptz,
  -- newest first means insertion order when two exports share a created_at
  seq bigint GENERATED ALWAYS AS IDENTITY,
  CHECK ((interval_hours IS NULL) <> (end_time IS NULL)),
  CHECK ((source_bulk_export_id IS NULL) = (interval_index IS NULL)),
  UNIQUE (source_bulk_export_id, interval_index)
);
CREATE INDEX exports_tenant ON exports (tenant_id, created_at DESC, seq DESC);
CREATE INDEX exports_destination ON exports (destination_id, status);
CREATE INDEX exports_unfinished ON exports (status) WHERE status IN ('CREATED', 'RUNNING', 'SCHEDULED');

CREATE TABLE export_runs (
  id uuid PRIMARY KEY,
  export_id uuid NOT NULL REFERENCES exports (id) ON DELETE CASCADE,
  -- [start_time, end_time): the export's range within one UTC day
  start_time timestamptz NOT NULL,
  end_time timestamptz NOT NULL,
  status text NOT NULL,
  retry_number integer NOT NULL DEFAULT 0,
  -- {"retry_0": "what went wrong", ...}
  errors jsonb NOT NULL DEFAULT '{}',
  -- {"checkpoint": the writer's PartitionCheckpoint}: rows written, files, cursor, pending upload
  metadata jsonb NOT NULL DEFAULT '{}',
  -- the worker holding the run, until lease_expires_at (renewed while it works); a run whose lease
  -- expired (its worker died) is taken over by another worker
  lease_owner text,
  lease_expires_at timestamptz,
  -- not picked up before this (backoff between retries)
  not_before timestamptz NOT NULL DEFAULT '-infinity',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  UNIQUE (export_id, start_time)
);
CREATE INDEX export_runs_claimable ON export_runs (not_before) WHERE status IN ('CREATED', 'RUNNING');
