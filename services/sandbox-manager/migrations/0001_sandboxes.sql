-- The sandbox-manager's state: what tenants defined (registries, volumes, templates and snapshots,
-- warm pools) and what runs (sandboxes, pool members). Instances themselves live in the driver
-- (containers, pods); `instance` names them.

CREATE TABLE registries (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  name text NOT NULL,
  server text NOT NULL,
  username text NOT NULL,
  -- SecretBox-sealed; never returned.
  password_sealed bytea NOT NULL,
  insecure boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, name)
);

CREATE TABLE volumes (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  name text NOT NULL,
  size text NOT NULL,
  size_bytes bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, name)
);

-- Templates (addressed by name) and snapshots (by id) are one thing: an image with defaults.
CREATE TABLE templates (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  kind text NOT NULL CHECK (kind IN ('template', 'snapshot')),
  name text NOT NULL,
  image text NOT NULL,
  registry_id uuid REFERENCES registries (id) ON DELETE RESTRICT,
  -- {cpu, memory, storage} as the user wrote them.
  resources jsonb NOT NULL DEFAULT '{}',
  -- [{volume_name, mount_path}]
  volumes jsonb NOT NULL DEFAULT '[]',
  -- proxy_config with opaque header values sealed.
  proxy_config jsonb NOT NULL DEFAULT '{"rules": []}',
  run_config jsonb,
  status text NOT NULL,
  status_message text NOT NULL DEFAULT '',
  image_digest text,
  image_user text,
  -- Bumped by every change that makes warm-pool members stale.
  version bigint NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, kind, name)
);

CREATE TABLE pools (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  name text NOT NULL,
  template_id uuid NOT NULL REFERENCES templates (id) ON DELETE RESTRICT,
  replicas integer NOT NULL CHECK (replicas >= 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, name)
);

-- Ready (or coming) instances of a pool's template that no sandbox owns yet. A claim deletes the
-- row in the transaction that creates the sandbox owning the instance.
CREATE TABLE pool_members (
  instance text PRIMARY KEY,
  pool_id uuid NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
  template_version bigint NOT NULL,
  status text NOT NULL,
  status_message text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  ready_at timestamptz
);
CREATE INDEX pool_members_claimable ON pool_members (pool_id, template_version, created_at) WHERE status = 'ready';

CREATE TABLE sandboxes (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  name text NOT NULL,
  template_id uuid REFERENCES templates (id) ON DELETE SET NULL,
  template_version bigint NOT NULL,
  instance text NOT NULL UNIQUE,
  status text NOT NULL,
  status_message text NOT NULL DEFAULT '',
  vcpus double precision,
  mem_bytes bigint,
  fs_capacity_bytes bigint,
  -- 0 = never.
  idle_ttl_seconds bigint NOT NULL,
  delete_after_stop_seconds bigint NOT NULL,
  ttl_seconds bigint NOT NULL DEFAULT 0,
  expires_at timestamptz,
  labels jsonb NOT NULL DEFAULT '{}',
  -- The request's own proxy_config (opaque values sealed); the template's applies when null.
  proxy_config jsonb,
  run_config jsonb,
  pool_name text,
  last_activity_at timestamptz NOT NULL DEFAULT now(),
  stopped_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  -- A deleted sandbox stays a while as a tombstone, so a GET says when and why it went.
  deleted_at timestamptz,
  deleted_reason text
);
CREATE UNIQUE INDEX sandboxes_live_name ON sandboxes (tenant_id, name) WHERE deleted_at IS NULL;
CREATE INDEX sandboxes_live ON sandboxes (status) WHERE deleted_at IS NULL;

-- Platform-wide settings: the auth proxy's CA (key sealed).
CREATE TABLE settings (
  key text PRIMARY KEY,
  value text NOT NULL
);
