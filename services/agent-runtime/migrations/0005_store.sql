-- The long-term store (LangGraph's BaseStore and the /store API): JSON items addressed by a
-- namespace path and a key. An item with a TTL has ttl_minutes and an expires_at that reads may
-- push forward (refresh_ttl); expired rows are never returned and a periodic sweep deletes them.
CREATE TABLE store_items (
  namespace text[] NOT NULL,
  key text NOT NULL,
  value jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  ttl_minutes double precision,
  expires_at timestamptz,
  PRIMARY KEY (namespace, key)
);
CREATE INDEX store_items_expires_at ON store_items (expires_at) WHERE expires_at IS NOT NULL;

-- Embeddings of the indexed fields of an item, for semantic search when langgraph.json configures
-- store.index. No pgvector: plain float8[] scored by cosine in SQL over the rows a search's
-- namespace prefix and filter leave (a scan).
CREATE TABLE store_vectors (
  namespace text[] NOT NULL,
  key text NOT NULL,
  field_name text NOT NULL,
  embedding float8[] NOT NULL,
  PRIMARY KEY (namespace, key, field_name),
  FOREIGN KEY (namespace, key) REFERENCES store_items (namespace, key) ON DELETE CASCADE
);
