-- Thread TTLs (POST /threads `ttl`, langgraph.json checkpointer.ttl): a thread with a TTL expires
-- `ttl_minutes` after its last activity (creation, a PATCH naming a ttl, the end of a run), and
-- the sweeper of the worker role then applies `ttl_strategy`: `delete` removes the thread with its
-- runs and checkpoints, `keep_latest` removes every checkpoint but the latest and disarms the
-- expiry until the thread's next activity. NULL expires_at: nothing is due.
ALTER TABLE threads
  ADD COLUMN ttl_strategy text CHECK (ttl_strategy IN ('delete', 'keep_latest')),
  ADD COLUMN ttl_minutes double precision CHECK (ttl_minutes > 0),
  ADD COLUMN expires_at timestamptz;
CREATE INDEX threads_expires_at ON threads (expires_at) WHERE expires_at IS NOT NULL;
