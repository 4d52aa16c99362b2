-- Each deployment's run-webhook signing secret (Standard Webhooks, `whsec_…`), sealed like its
-- secrets (AES-256-GCM: iv || tag || ciphertext). Made with the deployment; rotating replaces it.
CREATE TABLE deployment_webhook_secrets (
  deployment_id uuid PRIMARY KEY REFERENCES deployments (id) ON DELETE CASCADE,
  value_encrypted bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
