-- Console sessions: a browser's sign-in with an API key, carried by an HttpOnly cookie. Only the
-- SHA-256 digest of the session token is stored. A session acts as the key it was made from and
-- ends with it (revoked: refused on its next request; deleted, with its tenant: the row goes too).
CREATE TABLE console_sessions (
  id uuid PRIMARY KEY,
  -- Order of creation (created_at can tie: it comes from the service's clock), for ending the oldest.
  seq bigint GENERATED ALWAYS AS IDENTITY,
  tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  api_key_id uuid NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
  token_hash bytea NOT NULL UNIQUE,
  created_at timestamptz NOT NULL,
  -- Idle expiry, pushed forward as the session is used (never past expires_at).
  idle_expires_at timestamptz NOT NULL,
  -- Absolute expiry: however active, the session ends here.
  expires_at timestamptz NOT NULL
);
CREATE INDEX console_sessions_by_key ON console_sessions (api_key_id, seq);
