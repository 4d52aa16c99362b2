/**
 * The control plane's revision metrics (see docs/operate/monitor.md): revisions by status, and how
 * long their build and deploy steps take. No deployment or revision id in a label.
 */
import { DURATION_BUCKETS, gauge, histogram, readingsOf } from '@berth/metrics';
import type { Logger } from '@berth/log';
import type { DeploymentStore } from './store.js';

export const revisionStepDuration = histogram<'step'>({
  name: 'berth_revision_step_duration_seconds',
  help: "Revisions' build and deploy steps, from their start to their end (however they ended), by step",
  labelNames: ['step'],
  buckets: DURATION_BUCKETS,
});

const revisions = gauge<'status'>({
  name: 'berth_revisions',
  help: 'Revisions of every deployment, by status (QUEUED … DEPLOYED, the *_FAILED ones, INTERRUPTED)',
  labelNames: ['status'],
});

/** Reports the revisions by status at each scrape; returns the function that stops it. */
export function watchRevisions(store: DeploymentStore, log: Logger): () => void {
  return revisions.source(async () => readingsOf('status', await store.revisionsByStatus()), log);
}
