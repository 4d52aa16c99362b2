-- A revision waiting for its upload is a state of its own, AWAITING_SOURCE (it was QUEUED with the
-- status_message 'waiting for the project upload'). The statuses are the revision lifecycle's
-- (src/deployments/revision-lifecycle.ts); only its store writes them.
ALTER TABLE revisions DROP CONSTRAINT revisions_status_check;
ALTER TABLE revisions ADD CONSTRAINT revisions_status_check CHECK (status IN ('AWAITING_SOURCE', 'QUEUED', 'AWAITING_BUILD',
  'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING', 'DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'INTERRUPTED'));
UPDATE revisions SET status = 'AWAITING_SOURCE', status_message = ''
  WHERE status = 'QUEUED' AND status_message = 'waiting for the project upload';
