-- The upload a revision is built from, by id: what the build reads and what keeps the upload from
-- the sweep. Until now it was only the text of source_revision_config.source_tarball_path
-- (uploads/<deployment>/<upload>.tar.gz), which the sweep rebuilt in SQL to compare; the text stays
-- (the API shows it back), the id is what anything reads.
ALTER TABLE revisions ADD COLUMN source_upload_id uuid REFERENCES source_uploads (id);
CREATE INDEX revisions_by_upload ON revisions (source_upload_id) WHERE source_upload_id IS NOT NULL;

-- Revisions written before this migration: their upload, read back from the text once.
UPDATE revisions r SET source_upload_id = u.id
FROM source_uploads u
WHERE u.deployment_id = r.deployment_id
  AND r.source_revision_config ->> 'source_tarball_path' = 'uploads/' || u.deployment_id || '/' || u.id || '.tar.gz';
