/**
 * A deployment's secrets in Postgres (`deployment_secrets`, values sealed by the caller with the
 * platform's SecretBox; this store never sees a value in clear): the whole list written with a
 * deployment (create, a PATCH of `secrets`), one secret set or removed by name, and what the API
 * (names) and the deployers (sealed values) read.
 */
import { NotFoundError, ResourceExhaustedError } from '@berth/errors';
import type { Kysely } from '@berth/db';
import type { DeploymentTables } from './tables.js';

export interface SealedSecret {
  name: string;
  sealed: Buffer;
}

export class SecretStore {
  constructor(private readonly db: Kysely<DeploymentTables>) {}

  /** Makes `secrets` the deployment's only secrets, in the caller's transaction. */
  async replaceAll(tx: Kysely<DeploymentTables>, deploymentId: string, secrets: SealedSecret[]): Promise<void> {
    await tx.deleteFrom('deployment_secrets').where('deployment_id', '=', deploymentId).execute();
    if (!secrets.length) return;
    await tx
      .insertInto('deployment_secrets')
      .values(secrets.map((s) => ({ deployment_id: deploymentId, name: s.name, value_encrypted: s.sealed })))
      .execute();
  }

  /**
   * Adds one secret or replaces its value, in the caller's transaction, which holds the
   * deployment's row lock: sets of one deployment take turns, so concurrent ones cannot pass
   * `maxPerDeployment` together.
   */
  async set(tx: Kysely<DeploymentTables>, deploymentId: string, secret: SealedSecret, maxPerDeployment: number): Promise<void> {
    const others = await tx
      .selectFrom('deployment_secrets')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('deployment_id', '=', deploymentId)
      .where('name', '!=', secret.name)
      .executeTakeFirstOrThrow();
    if (Number(others.count) >= maxPerDeployment) {
      throw new ResourceExhaustedError(
        `Deployment ${deploymentId} has ${others.count} secrets, the most this platform allows per deployment (${maxPerDeployment}): remove one before adding another`,
      );
    }
    await tx
      .insertInto('deployment_secrets')
      .values({ deployment_id: deploymentId, name: secret.name, value_encrypted: secret.sealed })
      .onConflict((oc) => oc.columns(['deployment_id', 'name']).doUpdateSet({ value_encrypted: secret.sealed }))
      .execute();
  }

  /** Removes one secret, in the caller's transaction; NotFoundError when the deployment has none of that name. */
  async remove(tx: Kysely<DeploymentTables>, deploymentId: string, name: string): Promise<void> {
    const removed = await tx.deleteFrom('deployment_secrets').where('deployment_id', '=', deploymentId).where('name', '=', name).returning('name').execute();
    if (!removed.length) throw new NotFoundError(`Deployment ID ${deploymentId} has no secret ${name}.`);
  }

  /** The secret names of each deployment, sorted (one query for a page of deployments). */
  async names(deploymentIds: string[]): Promise<Map<string, string[]>> {
    const names = new Map<string, string[]>(deploymentIds.map((id) => [id, []]));
    if (!deploymentIds.length) return names;
    const rows = await this.db
      .selectFrom('deployment_secrets')
      .select(['deployment_id', 'name'])
      .where('deployment_id', 'in', deploymentIds)
      .orderBy('name')
      .execute();
    for (const row of rows) names.get(row.deployment_id)!.push(row.name);
    return names;
  }

  /** A deployment's secrets, still sealed: what a revision's agent servers get, once opened. */
  async sealed(deploymentId: string): Promise<SealedSecret[]> {
    const rows = await this.db.selectFrom('deployment_secrets').select(['name', 'value_encrypted']).where('deployment_id', '=', deploymentId).execute();
    return rows.map((r) => ({ name: r.name, sealed: r.value_encrypted }));
  }
}
