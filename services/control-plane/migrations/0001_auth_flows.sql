-- Login flows (auth-wait): an OAuth-style broker between a client without a credential and the
-- person who approves its login. Both secrets of a flow are stored only as SHA-256 digests, so a
-- read of this table cannot be used to wait on or approve a flow.
CREATE TABLE auth_flows (
  id uuid PRIMARY KEY,
  -- digest of auth_id, the waiter's secret (Wait, GET /v2/auth/wait/{auth_id})
  auth_id_hash bytea NOT NULL UNIQUE,
  -- digest of approval_id, the secret in the approval URL (CompleteFlow)
  approval_id_hash bytea NOT NULL UNIQUE,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'completed', 'expired')),
  -- free text from the client that started the flow, shown (escaped) to the approver
  client_name text NOT NULL DEFAULT '',
  -- the bearer token, held only between approval and its hand-out to the waiter (then NULL)
  token text,
  tenant_id uuid,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  completed_at timestamptz,
  claimed_at timestamptz,
  CHECK (token IS NULL OR status = 'completed')
);

-- The sweep finds flows past their expiry.
CREATE INDEX auth_flows_expires_at ON auth_flows (expires_at);
