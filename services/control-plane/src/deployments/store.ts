/**
 * Deployments, revisions, their logs, secrets and uploaded sources in Postgres (the control
 * plane's schema). Every status change of a revision is `move`: one conditional update checked
 * against the revision lifecycle, so a job that lost a race (its revision was interrupted
 * meanwhile) changes nothing and is told so.
 */
import { ConflictError, NotFoundError, ResourceExhaustedError } from '@berth/errors';
import { isForeignKeyViolation, isUniqueViolation, sql, type Kysely, type Selectable, type Updateable } from '@berth/db';
import { isUuid } from '@berth/ids';
import { IllegalTransitionError } from '@berth/lifecycle';
import { deploymentStatus, type DeploymentStatus } from './deployment-status.js';
import { storedRevisionConfig, type RevisionConfig } from './revision-config.js';
import { revisionLifecycle, type RevisionStatus } from './revision-lifecycle.js';
import { LogStore } from './log-store.js';
import { SecretStore, type SealedSecret } from './secret-store.js';
import { REVISION_INTERRUPTS_CHANNEL, REVISION_LOGS_CHANNEL, announce, notify } from './notifications.js';
import type { DeploymentTables, DeploymentsTable, RevisionsTable } from './tables.js';

/** Statuses a revision's step runs in: a move from them to INTERRUPTED leaves the end of the log to the step. */
const STEP_STATUSES: RevisionStatus[] = ['BUILDING', 'DEPLOYING'];

export type DeploymentRow = Selectable<DeploymentsTable>;
/** A revision as the store answers it: its source_revision_config parsed. */
export type RevisionRow = Omit<Selectable<RevisionsTable>, 'source_revision_config'> & { source_revision_config: RevisionConfig };

/** A revision row from the database, its source_revision_config parsed (the one place that reads it). */
function revisionRow<Row extends { id: string; source_revision_config: unknown }>(
  row: Row,
): Omit<Row, 'source_revision_config'> & { source_revision_config: RevisionConfig } {
  return { ...row, source_revision_config: storedRevisionConfig(row.id, row.source_revision_config) };
}

export interface NewRevision {
  id: string;
  /** One of the lifecycle's initial states. */
  status: RevisionStatus;
  source: DeploymentsTable['source'];
  source_revision_config: RevisionConfig;
  /** The upload it is built from (internal_source; none while it awaits its source). */
  source_upload_id?: string | null;
}

/** Which revisions a move applies to: one, or every revision of a deployment that may make it. */
export type MoveTarget = { revisionId: string } | { deploymentId: string };

/** What a move writes besides the status. */
export interface MoveChange {
  /**
   * Why it moved (a failure, an interruption). Cleared when not given, so that it always explains
   * the status the revision is in.
   */
  status_message?: string;
  artifact_path?: string;
  archive_key?: string;
  archive_sha256?: string;
  custom_auth?: boolean;
  upstream_url?: string;
  source_revision_config?: RevisionConfig;
  source_upload_id?: string;
}

/** Where a deployment's traffic goes (ResolveDeployment). */
export interface ResolvedDeployment {
  tenant_id: string;
  name: string;
  /** Its tracing project's id. */
  session_id: string;
  /** The serving revision; null until one is DEPLOYED. */
  revision_id: string | null;
  upstream_url: string | null;
  custom_auth: boolean;
  status: DeploymentStatus;
  /** Why the deployment has its status (see deployment-status.ts); null while READY or AWAITING_DEPLOY. */
  status_message: string | null;
}

export class DeploymentStore {
  /** The revisions' build and deploy logs. */
  readonly logs: LogStore;
  /** The deployments' secrets (sealed). */
  readonly secrets: SecretStore;

  constructor(private readonly db: Kysely<DeploymentTables>) {
    this.logs = new LogStore(db);
    this.secrets = new SecretStore(db);
  }

  async create(
    deployment: Omit<DeploymentRow, 'created_at' | 'updated_at' | 'deleting' | 'latest_revision_id' | 'active_revision_id' | 'source_config'> & {
      source_config: Record<string, unknown>;
    },
    revision: NewRevision,
    secrets: SealedSecret[],
    webhookSecret: Buffer,
    /** Most deployments the tenant may have; unset: no limit here. */
    maxPerTenant?: number,
  ): Promise<DeploymentRow> {
    try {
      return await this.db.transaction().execute(async (tx) => {
        if (maxPerTenant !== undefined) await this.checkQuota(tx, deployment.tenant_id, maxPerTenant);
        const row = await tx
          .insertInto('deployments')
          .values({ ...deployment, source_config: JSON.stringify(deployment.source_config), latest_revision_id: revision.id, active_revision_id: null })
          .returningAll()
          .executeTakeFirstOrThrow();
        await this.insertRevision(tx, row.id, revision);
        await this.secrets.replaceAll(tx, row.id, secrets);
        await tx.insertInto('deployment_webhook_secrets').values({ deployment_id: row.id, value_encrypted: webhookSecret }).execute();
        await announce(tx, [row.id]);
        return row;
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictError(`A deployment named ${deployment.name} already exists`, { cause: error });
      throw error;
    }
  }

  /** Refuses a create past the tenant's quota. Creates of one tenant take turns here, so concurrent ones cannot pass it together. */
  private async checkQuota(tx: Kysely<DeploymentTables>, tenantId: string, maxPerTenant: number): Promise<void> {
    await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`berth.deployments.${tenantId}`}, 0))`.execute(tx);
    const { count } = await tx
      .selectFrom('deployments')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('tenant_id', '=', tenantId)
      // A deleted one frees its place at once; its removal finishes within seconds.
      .where('deleting', '=', false)
      .executeTakeFirstOrThrow();
    if (Number(count) >= maxPerTenant) {
      throw new ResourceExhaustedError(
        `This tenant has ${count} deployments, the most this platform allows per tenant (${maxPerTenant}): delete one before creating another`,
      );
    }
  }

  /** A deployment of the tenant (not being deleted); NotFoundError otherwise. */
  async get(tenantId: string, id: string): Promise<DeploymentRow> {
    if (!isUuid(id) || !isUuid(tenantId)) throw new NotFoundError(`Deployment ID ${id} not found.`);
    const row = await this.db
      .selectFrom('deployments')
      .selectAll()
      .where('id', '=', id)
      .where('tenant_id', '=', tenantId)
      .where('deleting', '=', false)
      .executeTakeFirst();
    if (!row) throw new NotFoundError(`Deployment ID ${id} not found.`);
    return row;
  }

  async byId(id: string): Promise<DeploymentRow | undefined> {
    return this.db.selectFrom('deployments').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async list(tenantId: string, query: { nameContains?: string; deploymentType?: string; limit: number; offset: number }): Promise<DeploymentRow[]> {
    let q = this.db.selectFrom('deployments').selectAll().where('tenant_id', '=', tenantId).where('deleting', '=', false);
    if (query.nameContains) q = q.where(sql<boolean>`strpos(name, ${query.nameContains}) > 0`);
    if (query.deploymentType) q = q.where('deployment_type', '=', query.deploymentType as 'dev' | 'prod');
    return q.orderBy('created_at', 'desc').orderBy('id').limit(query.limit).offset(query.offset).execute();
  }

  /**
   * Changes a deployment: its source config, a new revision (which interrupts the revisions still
   * on their way), its secrets (replaced as a whole). Returns the updated deployment and the
   * revisions it interrupted.
   */
  async update(
    tenantId: string,
    id: string,
    change: { sourceConfig?: Record<string, unknown>; revision?: NewRevision; secrets?: SealedSecret[] },
  ): Promise<{ deployment: DeploymentRow; interrupted: string[] }> {
    return this.db.transaction().execute(async (tx) => {
      await this.locked(tx, tenantId, id);
      let interrupted: string[] = [];
      if (change.revision) {
        const rows = await this.move({ deploymentId: id }, 'INTERRUPTED', { status_message: `replaced by revision ${change.revision.id}` }, tx);
        interrupted = rows.map((r) => r.id);
        await this.insertRevision(tx, id, change.revision);
      }
      if (change.secrets) await this.secrets.replaceAll(tx, id, change.secrets);
      const deployment = await this.touched(tx, id, {
        ...(change.sourceConfig ? { source_config: JSON.stringify(change.sourceConfig) } : {}),
        ...(change.revision ? { latest_revision_id: change.revision.id } : {}),
      });
      return { deployment, interrupted };
    });
  }

  /** Adds one secret or replaces its value (no revision: see Deployments.setSecret); the deployment as it is now. */
  async setSecret(tenantId: string, id: string, secret: SealedSecret, maxPerDeployment: number): Promise<DeploymentRow> {
    return this.db.transaction().execute(async (tx) => {
      await this.locked(tx, tenantId, id);
      await this.secrets.set(tx, id, secret, maxPerDeployment);
      return this.touched(tx, id);
    });
  }

  /** Removes one secret; NotFoundError when the deployment or the secret does not exist. */
  async removeSecret(tenantId: string, id: string, name: string): Promise<DeploymentRow> {
    return this.db.transaction().execute(async (tx) => {
      await this.locked(tx, tenantId, id);
      await this.secrets.remove(tx, id, name);
      return this.touched(tx, id);
    });
  }

  /** The tenant's deployment (not being deleted), its row locked until the transaction ends; NotFoundError otherwise. */
  private async locked(tx: Kysely<DeploymentTables>, tenantId: string, id: string): Promise<DeploymentRow> {
    if (!isUuid(id) || !isUuid(tenantId)) throw new NotFoundError(`Deployment ID ${id} not found.`);
    const row = await tx
      .selectFrom('deployments')
      .selectAll()
      .where('id', '=', id)
      .where('tenant_id', '=', tenantId)
      .where('deleting', '=', false)
      .forUpdate()
      .executeTakeFirst();
    if (!row) throw new NotFoundError(`Deployment ID ${id} not found.`);
    return row;
  }

  /** Writes a change of a locked deployment with a new updated_at, and tells its watchers. */
  private async touched(tx: Kysely<DeploymentTables>, id: string, set: Updateable<DeploymentsTable> = {}): Promise<DeploymentRow> {
    const deployment = await tx
      .updateTable('deployments')
      .set({ ...set, updated_at: new Date() })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    await announce(tx, [id]);
    return deployment;
  }

  /** Marks a deployment for deletion (it disappears from the API at once); false when unknown. */
  async markDeleting(tenantId: string, id: string): Promise<boolean> {
    if (!isUuid(id) || !isUuid(tenantId)) return false;
    const rows = await this.db
      .updateTable('deployments')
      .set({ deleting: true, updated_at: new Date() })
      .where('id', '=', id)
      .where('tenant_id', '=', tenantId)
      .where('deleting', '=', false)
      .returning('id')
      .execute();
    if (rows.length) {
      await this.move({ deploymentId: id }, 'INTERRUPTED', { status_message: 'the deployment was deleted' });
      await announce(this.db, [id]);
    }
    return rows.length === 1;
  }

  async remove(id: string): Promise<void> {
    const revisions = (await this.db.selectFrom('revisions').select('id').where('deployment_id', '=', id).execute()).map((r) => r.id);
    await this.db.deleteFrom('deployments').where('id', '=', id).execute();
    await announce(this.db, [id]);
    // Followers of their logs end: the revisions are gone.
    await notify(this.db, REVISION_LOGS_CHANNEL, revisions);
  }

  /** Status, source_revision_config and health of each of these revisions, by revision id (one query for a page of deployments). */
  async revisionDetails(
    revisionIds: string[],
  ): Promise<Map<string, Pick<RevisionRow, 'id' | 'status' | 'status_message' | 'source_revision_config' | 'health_message'>>> {
    if (!revisionIds.length) return new Map();
    const rows = await this.db
      .selectFrom('revisions')
      .select(['id', 'status', 'status_message', 'source_revision_config', 'health_message'])
      .where('id', 'in', revisionIds)
      .execute();
    return new Map(rows.map((details) => [details.id, revisionRow(details)]));
  }

  /** The deployment's sealed webhook signing secret; undefined for one made before they existed. */
  async webhookSecret(deploymentId: string): Promise<Buffer | undefined> {
    const row = await this.db.selectFrom('deployment_webhook_secrets').select('value_encrypted').where('deployment_id', '=', deploymentId).executeTakeFirst();
    return row?.value_encrypted;
  }

  /**
   * Stores a deployment's sealed webhook signing secret: `replace` rotates, otherwise a secret
   * already there stays. Answers when the stored one was made (undefined when one stayed).
   */
  async setWebhookSecret(deploymentId: string, sealed: Buffer, replace: boolean): Promise<Date | undefined> {
    const insert = this.db.insertInto('deployment_webhook_secrets').values({ deployment_id: deploymentId, value_encrypted: sealed });
    const row = await (
      replace
        ? insert.onConflict((oc) => oc.column('deployment_id').doUpdateSet({ value_encrypted: sealed, created_at: new Date() }))
        : insert.onConflict((oc) => oc.column('deployment_id').doNothing())
    )
      .returning('created_at')
      .executeTakeFirst();
    return row?.created_at;
  }

  async revisions(deploymentId: string, query: { limit: number; offset: number; statuses?: RevisionStatus[] }): Promise<RevisionRow[]> {
    let q = this.db.selectFrom('revisions').selectAll().where('deployment_id', '=', deploymentId);
    if (query.statuses?.length) q = q.where('status', 'in', query.statuses);
    return (await q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(query.limit).offset(query.offset).execute()).map(revisionRow);
  }

  async revision(deploymentId: string, revisionId: string): Promise<RevisionRow> {
    if (!isUuid(revisionId)) throw new NotFoundError(`Revision ID ${revisionId} not found.`);
    const row = await this.db.selectFrom('revisions').selectAll().where('id', '=', revisionId).where('deployment_id', '=', deploymentId).executeTakeFirst();
    if (!row) throw new NotFoundError(`Revision ID ${revisionId} not found.`);
    return revisionRow(row);
  }

  /** How many revisions are in each status (statuses without any left out). */
  async revisionsByStatus(): Promise<Record<string, number>> {
    const rows = await this.db
      .selectFrom('revisions')
      .select((eb) => ['status', eb.fn.countAll<string>().as('count')])
      .groupBy('status')
      .execute();
    return Object.fromEntries(rows.map((row) => [row.status, Number(row.count)]));
  }

  async revisionById(revisionId: string): Promise<RevisionRow | undefined> {
    const row = await this.db.selectFrom('revisions').selectAll().where('id', '=', revisionId).executeTakeFirst();
    return row && revisionRow(row);
  }

  /**
   * THE one place a revision's status changes. Moves the revision (or every revision of the
   * deployment) to `to` if its status may move there by the revision lifecycle, in one conditional
   * UPDATE (`WHERE status IN (the states that may move to it)`), so that a move that lost a race
   * changes nothing. One revision that may not move is refused with IllegalTransitionError (its
   * `from` is the status it is in; NotFoundError when there is no such revision); a deployment's
   * revisions that may not move (finished ones) are left as they are. `db` may be a transaction.
   */
  async move(target: { revisionId: string }, to: RevisionStatus, change?: MoveChange, db?: Kysely<DeploymentTables>): Promise<RevisionRow>;
  async move(target: { deploymentId: string }, to: RevisionStatus, change?: MoveChange, db?: Kysely<DeploymentTables>): Promise<RevisionRow[]>;
  async move(target: MoveTarget, to: RevisionStatus, change: MoveChange = {}, db: Kysely<DeploymentTables> = this.db): Promise<RevisionRow | RevisionRow[]> {
    const sources = revisionLifecycle.sourcesOf(to);
    const { source_revision_config, status_message = '', ...rest } = change;
    // The one write of the column, whose update type is `never` everywhere else (tables.ts).
    const status = { status: to } as object;
    const rows = sources.length
      ? await db
          .updateTable('revisions')
          .set((eb) => ({
            ...status,
            status_message,
            updated_at: new Date(),
            ...rest,
            ...(source_revision_config ? { source_revision_config: JSON.stringify(source_revision_config) } : {}),
            // No step runs for a revision interrupted while it waited: nothing writes to its log again.
            // (`status` here is the status it moves from.)
            ...(to === 'INTERRUPTED'
              ? {
                  logs_ended_at: eb
                    .case()
                    .when('revisions.status', 'in', STEP_STATUSES)
                    .then(eb.ref('logs_ended_at'))
                    .else(sql<Date>`clock_timestamp()`)
                    .end(),
                }
              : {}),
          }))
          .where('revisions.status', 'in', sources)
          .where((eb) => ('revisionId' in target ? eb('id', '=', target.revisionId) : eb('deployment_id', '=', target.deploymentId)))
          .returningAll()
          .execute()
      : [];
    // Tells the control plane running an interrupted revision's step (whichever process it is)
    // to stop it; in the move's transaction when there is one (sent when it commits).
    if (to === 'INTERRUPTED' && rows.length) {
      await notify(
        db,
        REVISION_INTERRUPTS_CHANNEL,
        rows.map((r) => r.id),
      );
      await notify(
        db,
        REVISION_LOGS_CHANNEL,
        rows.filter((r) => r.logs_ended_at).map((r) => r.id),
      );
    }
    await announce(
      db,
      rows.map((r) => r.deployment_id),
    );
    if (!('revisionId' in target)) return rows.map(revisionRow);
    if (rows[0]) return revisionRow(rows[0]);
    const current = await db.selectFrom('revisions').select('status').where('id', '=', target.revisionId).executeTakeFirst();
    if (!current) throw new NotFoundError(`Revision ID ${target.revisionId} not found.`);
    throw new IllegalTransitionError({ entity: revisionLifecycle.entity, id: target.revisionId, from: current.status, to });
  }

  /**
   * Makes a revision that finished deploying the one that serves, unless a newer revision already
   * serves. Returns whether it became active and the revision it replaced.
   */
  async activate(revisionId: string, upstreamUrl: string): Promise<{ active: boolean; previous: string | null }> {
    return this.db.transaction().execute(async (tx) => {
      const revision = await tx.selectFrom('revisions').select(['deployment_id', 'created_at']).where('id', '=', revisionId).executeTakeFirst();
      if (!revision) return { active: false, previous: null };
      const deployment = await tx.selectFrom('deployments').selectAll().where('id', '=', revision.deployment_id).forUpdate().executeTakeFirst();
      if (!deployment || deployment.deleting) return { active: false, previous: null };
      // Refused (IllegalTransitionError) when it was interrupted meanwhile.
      await this.move({ revisionId }, 'DEPLOYED', { upstream_url: upstreamUrl }, tx);
      const current = deployment.active_revision_id
        ? await tx.selectFrom('revisions').select(['id', 'created_at']).where('id', '=', deployment.active_revision_id).executeTakeFirst()
        : undefined;
      if (current && current.id !== revisionId && current.created_at > revision.created_at) return { active: false, previous: null };
      await tx.updateTable('deployments').set({ active_revision_id: revisionId, updated_at: new Date() }).where('id', '=', deployment.id).execute();
      return { active: true, previous: current && current.id !== revisionId ? current.id : null };
    });
  }

  /**
   * Records a revision's health: why its agent server does not answer (null: it answers again),
   * and where it answers when that changed (null: nowhere now).
   */
  async setHealth(revisionId: string, message: string | null, upstreamUrl?: string | null): Promise<void> {
    const rows = await this.db
      .updateTable('revisions')
      .set({ health_message: message, updated_at: new Date(), ...(upstreamUrl !== undefined ? { upstream_url: upstreamUrl } : {}) })
      .where('id', '=', revisionId)
      .returning('deployment_id')
      .execute();
    await announce(
      this.db,
      rows.map((r) => r.deployment_id),
    );
  }

  /** Records which database login the revision's agent servers use (AgentDatabases). */
  async setDatabaseLogin(revisionId: string, login: string): Promise<void> {
    await this.db.updateTable('revisions').set({ database_login: login }).where('id', '=', revisionId).execute();
  }

  /** Deployments (of every tenant) whose serving revision is down now. */
  async unhealthyCount(): Promise<number> {
    const { count } = await this.db
      .selectFrom('deployments')
      .innerJoin('revisions', 'revisions.id', 'deployments.active_revision_id')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('deployments.deleting', '=', false)
      .where('revisions.health_message', 'is not', null)
      .executeTakeFirstOrThrow();
    return Number(count);
  }

  /** Revisions that serve their deployment now (to bring back after a restart). */
  async activeRevisions(): Promise<RevisionRow[]> {
    const rows = await this.db
      .selectFrom('revisions')
      .innerJoin('deployments', 'deployments.active_revision_id', 'revisions.id')
      .selectAll('revisions')
      .where('deployments.deleting', '=', false)
      .execute();
    return rows.map(revisionRow);
  }

  /** Where a deployment's traffic goes, and its status (why it cannot go there now: the serving revision is down, or none serves). */
  async resolve(id: string): Promise<ResolvedDeployment | undefined> {
    if (!isUuid(id)) return undefined;
    const row = await this.db
      .selectFrom('deployments')
      .leftJoin('revisions as active', 'active.id', 'deployments.active_revision_id')
      .leftJoin('revisions as latest', 'latest.id', 'deployments.latest_revision_id')
      .select([
        'deployments.tenant_id',
        'deployments.name',
        'deployments.session_id',
        'deployments.active_revision_id',
        'deployments.latest_revision_id',
        'active.upstream_url',
        'active.custom_auth',
        'active.health_message',
        'latest.status as latest_status',
        'latest.status_message as latest_status_message',
      ])
      .where('deployments.id', '=', id)
      .where('deployments.deleting', '=', false)
      .executeTakeFirst();
    if (!row) return undefined;
    const { status, message } = deploymentStatus({
      serving: row.active_revision_id ? { id: row.active_revision_id, health_message: row.health_message ?? null } : null,
      latest:
        row.latest_revision_id && row.latest_status
          ? { id: row.latest_revision_id, status: row.latest_status, status_message: row.latest_status_message ?? '' }
          : null,
    });
    return {
      tenant_id: row.tenant_id,
      name: row.name,
      session_id: row.session_id,
      revision_id: row.active_revision_id,
      upstream_url: row.upstream_url ?? null,
      custom_auth: row.custom_auth ?? false,
      status,
      status_message: message,
    };
  }

  /**
   * Inserts a new revision of a deployment, in one of the lifecycle's initial states.
   * @throws ConflictError when its upload was swept since it was checked
   */
  private async insertRevision(db: Kysely<DeploymentTables>, deploymentId: string, revision: NewRevision): Promise<void> {
    revisionLifecycle.assertInitial(revision.status, revision.id);
    try {
      await db
        .insertInto('revisions')
        .values({
          ...revision,
          deployment_id: deploymentId,
          source_revision_config: JSON.stringify(revision.source_revision_config),
          artifact_path: null,
          upstream_url: null,
        })
        .execute();
    } catch (error) {
      // The sweep took the upload between the caller's check and this insert.
      if (isForeignKeyViolation(error) && (error as { constraint?: string }).constraint === 'revisions_source_upload_id_fkey') {
        throw new ConflictError(`Upload ${revision.source_upload_id} is gone: upload the project again`, { cause: error });
      }
      throw error;
    }
  }

  async beginUpload(id: string, deploymentId: string): Promise<void> {
    await this.db.insertInto('source_uploads').values({ id, deployment_id: deploymentId }).execute();
  }

  /** Appends a chunk to an unfinished upload of the deployment; NotFoundError when there is none. */
  async appendChunk(uploadId: string, deploymentId: string, data: Buffer, maxBytes: number): Promise<void> {
    if (!isUuid(uploadId)) throw new NotFoundError(`Upload ${uploadId} not found`);
    await this.db.transaction().execute(async (tx) => {
      const upload = await tx
        .selectFrom('source_uploads')
        .select(['size'])
        .where('id', '=', uploadId)
        .where('deployment_id', '=', deploymentId)
        .where('complete', '=', false)
        .forUpdate()
        .executeTakeFirst();
      if (!upload) throw new NotFoundError(`Upload ${uploadId} not found`);
      const size = Number(upload.size) + data.length;
      if (size > maxBytes) throw new ConflictError(`the upload is larger than ${maxBytes} bytes`);
      const { next } = await tx
        .selectFrom('source_upload_chunks')
        .select(sql<number>`coalesce(max(seq) + 1, 0)`.as('next'))
        .where('upload_id', '=', uploadId)
        .executeTakeFirstOrThrow();
      await tx
        .insertInto('source_upload_chunks')
        .values({ upload_id: uploadId, seq: Number(next), data })
        .execute();
      await tx.updateTable('source_uploads').set({ size }).where('id', '=', uploadId).execute();
    });
  }

  /** Marks an upload of the deployment complete; NotFoundError when it has no such upload. */
  async completeUpload(uploadId: string, deploymentId: string): Promise<void> {
    if (!isUuid(uploadId)) throw new NotFoundError(`Upload ${uploadId} not found`);
    const { numUpdatedRows } = await this.db
      .updateTable('source_uploads')
      .set({ complete: true })
      .where('id', '=', uploadId)
      .where('deployment_id', '=', deploymentId)
      .executeTakeFirst();
    if (!numUpdatedRows) throw new NotFoundError(`Upload ${uploadId} not found`);
  }

  async uploadExists(uploadId: string, deploymentId: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('source_uploads')
      .select('id')
      .where('id', '=', uploadId)
      .where('deployment_id', '=', deploymentId)
      .where('complete', '=', true)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** The chunks of a complete upload, in order, one query per chunk (memory stays at one chunk). */
  async *uploadChunks(uploadId: string): AsyncGenerator<Buffer> {
    for (let seq = 0; ; seq += 1) {
      const row = await this.db.selectFrom('source_upload_chunks').select('data').where('upload_id', '=', uploadId).where('seq', '=', seq).executeTakeFirst();
      if (!row) return;
      yield row.data;
    }
  }

  /**
   * Deletes, with their chunks, uploads that never completed within `unfinishedSeconds` and
   * complete ones that no revision uses within `unusedSeconds` (both counted from the upload's
   * start). A revision holds its upload by id (`source_upload_id`). Answers how many were deleted.
   */
  async sweepUploads(ttl: { unfinishedSeconds: number; unusedSeconds: number }): Promise<number> {
    const olderThan = (seconds: number) => sql<Date>`now() - make_interval(secs => ${seconds})`;
    const result = await this.db
      .deleteFrom('source_uploads as u')
      .where((eb) =>
        eb.or([
          eb.and([eb('u.complete', '=', false), eb('u.created_at', '<', olderThan(ttl.unfinishedSeconds))]),
          eb.and([
            eb('u.complete', '=', true),
            eb('u.created_at', '<', olderThan(ttl.unusedSeconds)),
            eb.not(
              eb.exists(
                eb
                  .selectFrom('revisions as r')
                  .select(sql`1`.as('used'))
                  .whereRef('r.source_upload_id', '=', 'u.id'),
              ),
            ),
          ]),
        ]),
      )
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
