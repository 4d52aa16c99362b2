-- Share links: one trace, or one thread, of a project that anyone holding its token may read
-- (read-only). The token is a bearer secret: it is kept sealed (AES-GCM with the platform key, to
-- answer the owner's "share" again with the same link) and found by its SHA-256, never stored in the
-- clear. Unsharing deletes the row, and the link with it; sharing again makes a new token.
CREATE TABLE trace_shares (
  tenant_id uuid NOT NULL,
  session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('trace', 'thread')),
  -- The trace id, or the thread id.
  subject text NOT NULL,
  token_sha256 bytea NOT NULL UNIQUE,
  sealed_token bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, session_id, kind, subject)
);
