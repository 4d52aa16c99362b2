-- Tenants (workspaces), their API keys and the bearer tokens the platform issues.
-- Key and token secrets are never stored: only their SHA-256 digests.
CREATE TABLE tenants (
  id uuid PRIMARY KEY,
  name text NOT NULL,
  -- The tenant created by bootstrap; its admin keys administer the whole platform.
  is_system boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX tenants_single_system ON tenants (is_system) WHERE is_system;

CREATE TABLE api_keys (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  name text NOT NULL,
  role text NOT NULL CHECK (role IN ('admin', 'member')),
  prefix text NOT NULL,
  key_hash bytea NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  expires_at timestamptz,
  revoked_at timestamptz
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id, created_at);

CREATE TABLE access_tokens (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  -- The key that minted the token: revoking the key ends its tokens too.
  api_key_id uuid NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
  token_hash bytea NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz
);
CREATE INDEX access_tokens_by_key ON access_tokens (api_key_id);
