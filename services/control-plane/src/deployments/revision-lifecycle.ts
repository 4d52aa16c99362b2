/**
 * THE lifecycle of a revision: every status and the moves allowed from it. The store performs every
 * status change through one function (`DeploymentStore.move`) that checks the move against this
 * table; the wire enum (`berth.controlplane.v1.RevisionStatus`) must name the same states.
 *
 * A step that may be run again (a job recovered after a control-plane restart) moves into the state
 * it is in: BUILDING → BUILDING, DEPLOYING → DEPLOYING.
 */
import { defineLifecycle, wireEnum, type Lifecycle } from '@berth/lifecycle';
import { RevisionStatus as WireRevisionStatus } from '@berth/proto';

export const revisionLifecycle = defineLifecycle('revision', {
  /** Created without a source (the CLI creates the deployment, then uploads): the upload moves it on. */
  AWAITING_SOURCE: { initial: true, to: ['QUEUED', 'INTERRUPTED'] },
  /** Created with (or just given) its source; its build is queued next. */
  QUEUED: { initial: true, to: ['AWAITING_BUILD', 'INTERRUPTED'] },
  AWAITING_BUILD: { to: ['BUILDING', 'INTERRUPTED'] },
  BUILDING: { to: ['BUILDING', 'AWAITING_DEPLOY', 'BUILD_FAILED', 'INTERRUPTED'] },
  AWAITING_DEPLOY: { to: ['DEPLOYING', 'INTERRUPTED'] },
  DEPLOYING: { to: ['DEPLOYING', 'DEPLOYED', 'DEPLOY_FAILED', 'INTERRUPTED'] },
  /** Answered and became the serving revision; a newer DEPLOYED one replaces it without a move. */
  DEPLOYED: {},
  BUILD_FAILED: { failed: true },
  DEPLOY_FAILED: { failed: true },
  /** A newer revision replaced it, or its deployment was deleted, before it finished. */
  INTERRUPTED: {},
});

export type RevisionStatus = typeof revisionLifecycle extends Lifecycle<infer S> ? S : never;

/** Revision statuses on the wire (checked against the table when this module loads). */
export const revisionStatusWire = wireEnum(WireRevisionStatus, revisionLifecycle);
