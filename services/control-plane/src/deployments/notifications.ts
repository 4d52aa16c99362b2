/**
 * The NOTIFY channels of the deployment store: other control planes and waiting streams learn of a
 * change from them as its transaction commits.
 */
import { sql, type Kysely } from '@berth/db';
import type { DeploymentTables } from './tables.js';

/** NOTIFY channel on which revisions moved to INTERRUPTED are announced (payload: the revision id). */
export const REVISION_INTERRUPTS_CHANNEL = 'berth_control_plane_revision_interrupts';

/**
 * NOTIFY channel on which new lines of a revision's log, and the end of its log, are announced
 * (payload: the revision id), sent when the transaction writing them commits.
 */
export const REVISION_LOGS_CHANNEL = 'berth_control_plane_revision_logs';

/**
 * NOTIFY channel on which changes a client watching a deployment sees are announced (payload: the
 * deployment id): a revision made or moved, the serving revision or its health changed, secrets or
 * config changed, the deployment deleted.
 */
export const DEPLOYMENT_CHANGES_CHANNEL = 'berth_control_plane_deployment_changes';

/** One NOTIFY on `channel` per distinct payload (sent when `db`'s transaction commits, if it is one). */
export async function notify(db: Kysely<DeploymentTables>, channel: string, payloads: string[]): Promise<void> {
  const distinct = [...new Set(payloads)];
  if (distinct.length) await sql`select pg_notify(${channel}, p) from unnest(${distinct}::text[]) as p`.execute(db);
}

/** Announces changes of deployments on DEPLOYMENT_CHANGES_CHANNEL. */
export const announce = (db: Kysely<DeploymentTables>, deploymentIds: string[]) => notify(db, DEPLOYMENT_CHANGES_CHANNEL, deploymentIds);
