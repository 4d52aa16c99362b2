/**
 * A deployment's status, derived in this one place from its serving revision and its latest
 * revision (it is not stored: it changes whenever either does). The wire enum
 * (`berth.controlplane.v1.DeploymentStatus`) names the same statuses.
 */
import { wireEnum } from '@berth/lifecycle';
import { DeploymentStatus as WireDeploymentStatus } from '@berth/proto';
import { revisionLifecycle, type RevisionStatus } from './revision-lifecycle.js';

export const DEPLOYMENT_STATUSES = ['AWAITING_DEPLOY', 'READY', 'UNHEALTHY', 'FAILED', 'LATEST_FAILED'] as const;
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];

/** Deployment statuses on the wire (checked against the list when this module loads). */
export const deploymentStatusWire = wireEnum(WireDeploymentStatus, DEPLOYMENT_STATUSES);

/** What the status is derived from. */
export interface StatusInputs {
  /** The serving revision, and why its agent server does not answer (null while it does); null when none serves. */
  serving: { id: string; health_message: string | null } | null;
  /** The deployment's newest revision. */
  latest: { id: string; status: RevisionStatus; status_message: string } | null;
}

export interface DerivedStatus {
  status: DeploymentStatus;
  /** Why the deployment has this status; null while READY or AWAITING_DEPLOY. */
  message: string | null;
}

const FAILURE: Partial<Record<RevisionStatus, string>> = { BUILD_FAILED: 'failed to build', DEPLOY_FAILED: 'failed to deploy' };

/**
 * - UNHEALTHY: the serving revision's agent server is down (it is being restarted);
 * - LATEST_FAILED: a revision serves, but the newest one failed (so what serves is older than asked for);
 * - READY: a revision serves and the newest one is it or is on its way;
 * - FAILED: none serves and the newest one failed: nothing will until a new revision deploys;
 * - AWAITING_DEPLOY: none serves yet and the newest one is on its way.
 */
export function deploymentStatus({ serving, latest }: StatusInputs): DerivedStatus {
  const failed = latest && revisionLifecycle.isFailed(latest.status) ? latest : null;
  const why = failed
    ? `the latest revision ${failed.id} ${FAILURE[failed.status] ?? 'failed'} (${failed.status}${failed.status_message ? `: ${failed.status_message}` : ''})`
    : '';
  if (serving) {
    if (serving.health_message) return { status: 'UNHEALTHY', message: serving.health_message };
    if (failed && failed.id !== serving.id) return { status: 'LATEST_FAILED', message: `${why}; revision ${serving.id} still serves` };
    return { status: 'READY', message: null };
  }
  if (failed) return { status: 'FAILED', message: `${why} and no revision serves` };
  return { status: 'AWAITING_DEPLOY', message: null };
}
