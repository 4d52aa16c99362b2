-- Run payloads are stored as `json` (the text the client sent) rather than `jsonb`: the store
-- writes them once and reads them back whole — exports as JSON text — and printing jsonb as text
-- cost Postgres about as much CPU per exported run as the export's own encoding (docs/benchmarks.md,
-- "Bulk export"). Filters on metadata and feedback cast the sub-object they test to jsonb
-- (src/filter/compile.ts).
--
-- lz4 compresses and decompresses the payloads (kilobytes each, hence compressed in the row) several
-- times faster than the default pglz. It is set on every existing partition (Postgres does not pass
-- it down) before the type change rewrites them; partitions created later take the parent's. A
-- Postgres built without lz4 keeps pglz: slower, not wrong.
DO $$
DECLARE
  t regclass;
BEGIN
  FOR t IN SELECT 'runs'::regclass UNION ALL SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'runs'::regclass LOOP
    EXECUTE format('ALTER TABLE %s ALTER COLUMN inputs SET COMPRESSION lz4, ALTER COLUMN outputs SET COMPRESSION lz4,
      ALTER COLUMN extra SET COMPRESSION lz4, ALTER COLUMN events SET COMPRESSION lz4, ALTER COLUMN error SET COMPRESSION lz4', t);
  END LOOP;
EXCEPTION WHEN feature_not_supported THEN
  RAISE NOTICE 'this Postgres has no lz4 support; run payloads stay compressed with pglz (%)', SQLERRM;
END
$$;

ALTER TABLE runs
  ALTER COLUMN inputs TYPE json USING inputs::json,
  ALTER COLUMN outputs TYPE json USING outputs::json,
  ALTER COLUMN extra TYPE json USING extra::json,
  ALTER COLUMN events TYPE json USING events::json,
  ALTER COLUMN feedback_stats TYPE json USING feedback_stats::json;
