-- When a revision's log ended: nothing more is written to it (it failed, was interrupted or was
-- retired), so a client following it is told so and its stream ends. Written by the log writer in
-- the transaction of the revision's last lines (or by the move to INTERRUPTED of a revision no step
-- runs for), so a follower that sees it set has seen, or reads next, every line.
ALTER TABLE revisions ADD COLUMN logs_ended_at timestamptz;

-- Revisions that ended before this migration: the failed and interrupted ones, and deployed ones no
-- longer serving their deployment (replaced, hence retired).
UPDATE revisions r SET logs_ended_at = r.updated_at
WHERE r.status IN ('BUILD_FAILED', 'DEPLOY_FAILED', 'INTERRUPTED')
   OR (r.status = 'DEPLOYED' AND NOT EXISTS (SELECT 1 FROM deployments d WHERE d.active_revision_id = r.id));
