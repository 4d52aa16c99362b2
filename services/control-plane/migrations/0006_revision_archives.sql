-- A built revision kept in object storage (only where the control plane is given a bucket: the
-- kubernetes deployer's pods fetch it). The SHA-256 is what the fetcher checks before unpacking.
ALTER TABLE revisions ADD COLUMN archive_key text;
ALTER TABLE revisions ADD COLUMN archive_sha256 text CHECK (archive_sha256 ~ '^[0-9a-f]{64}$');
