-- Deployments, their revisions and build/deploy logs, their secrets (encrypted) and uploaded
-- project tarballs (stored here in 1 MiB chunks: the platform's object store for sources, so the
-- embedded default needs nothing but Postgres).
CREATE TABLE deployments (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  name text NOT NULL,
  source text NOT NULL CHECK (source IN ('internal_source', 'external_docker')),
  -- deployment_type, resource_spec, ... as the API takes them
  source_config jsonb NOT NULL,
  deployment_type text NOT NULL CHECK (deployment_type IN ('dev', 'prod')),
  -- the tracing project of the deployment (session_id), for exports
  session_id uuid NOT NULL,
  latest_revision_id uuid,
  active_revision_id uuid,
  -- set when DELETE was asked for; the row goes once the deployer removed everything
  deleting boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, name)
);

CREATE TABLE revisions (
  id uuid PRIMARY KEY,
  deployment_id uuid NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
  status text NOT NULL CHECK (status IN ('QUEUED', 'AWAITING_BUILD', 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING',
    'DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'INTERRUPTED')),
  source text NOT NULL,
  -- langgraph_config_path, image_uri, source_tarball_path as the API takes them
  source_revision_config jsonb NOT NULL,
  status_message text NOT NULL DEFAULT '',
  -- where the built project is (local folder), once built
  artifact_path text,
  -- where the revision's agent server answers, once deployed
  upstream_url text,
  -- the project has its own auth handler (auth.path)
  custom_auth boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX revisions_by_deployment ON revisions (deployment_id, created_at DESC);

CREATE TABLE revision_logs (
  id bigserial PRIMARY KEY,
  revision_id uuid NOT NULL REFERENCES revisions (id) ON DELETE CASCADE,
  type text NOT NULL CHECK (type IN ('build', 'deploy')),
  level text NOT NULL CHECK (level IN ('info', 'warn', 'error')),
  message text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX revision_logs_by_revision ON revision_logs (revision_id, id);

CREATE TABLE deployment_secrets (
  deployment_id uuid NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
  name text NOT NULL,
  -- AES-256-GCM: iv (12) || tag (16) || ciphertext
  value_encrypted bytea NOT NULL,
  PRIMARY KEY (deployment_id, name)
);

CREATE TABLE source_uploads (
  id uuid PRIMARY KEY,
  deployment_id uuid NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
  -- complete once the last chunk arrived; incomplete ones are swept
  complete boolean NOT NULL DEFAULT false,
  size bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE source_upload_chunks (
  upload_id uuid NOT NULL REFERENCES source_uploads (id) ON DELETE CASCADE,
  seq integer NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (upload_id, seq)
);
