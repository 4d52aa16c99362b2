/**
 * The sandboxes table. Every status change is `move`: one conditional UPDATE checked against the
 * sandbox lifecycle, so a move that lost a race (deleted or stopped meanwhile) changes nothing and
 * says so. Deleted sandboxes stay as tombstones (deleted_at, deleted_reason) for a week, so that a
 * GET explains where a sandbox went instead of a bare 404.
 */
import { isUniqueViolation, type Insertable, type Kysely, type Selectable } from '@berth/db';
import { ConflictError, NotFoundError } from '@berth/errors';
import { isUuid } from '@berth/ids';
import { IllegalTransitionError } from '@berth/lifecycle';
import { sandboxLifecycle, type SandboxStatus } from '../lifecycle.js';
import type { SandboxesTable, SandboxTables } from '../tables.js';

export type SandboxRow = Selectable<SandboxesTable>;

/** By name (REST) or id (the data plane). */
export type SandboxRef = { tenantId: string } & ({ name: string } | { id: string });

const label = (ref: SandboxRef) => ('name' in ref ? `"${ref.name}"` : ref.id);

/** How long a tombstone answers for a deleted sandbox. */
export const TOMBSTONE_DAYS = 7;

export class SandboxGoneError extends NotFoundError {
  constructor(ref: SandboxRef, row: SandboxRow) {
    super(`sandbox ${label(ref)} was deleted at ${row.deleted_at?.toISOString()}: ${row.deleted_reason ?? 'deleted'}`);
  }
}

export class SandboxStore {
  constructor(private readonly db: Kysely<SandboxTables>) {}

  /** How many sandboxes (not deleted) are in each status; statuses without any left out. */
  async countByStatus(): Promise<Record<string, number>> {
    const rows = await this.db
      .selectFrom('sandboxes')
      .select((eb) => ['status', eb.fn.countAll<string>().as('count')])
      .where('deleted_at', 'is', null)
      .groupBy('status')
      .execute();
    return Object.fromEntries(rows.map((row) => [row.status, Number(row.count)]));
  }

  async insert(values: Insertable<SandboxesTable>): Promise<SandboxRow> {
    try {
      return await this.db.insertInto('sandboxes').values(values).returningAll().executeTakeFirstOrThrow();
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictError(`a sandbox named "${values.name}" already exists`, { cause: error });
      throw error;
    }
  }

  /** A live sandbox; a recently deleted one is a 404 that says when and why. */
  async get(ref: SandboxRef): Promise<SandboxRow> {
    // Ids are uuid columns: anything else is unknown, not a query error.
    if ('id' in ref && !isUuid(ref.id)) throw new NotFoundError(`sandbox ${label(ref)} not found`);
    let query = this.db.selectFrom('sandboxes').selectAll().where('tenant_id', '=', ref.tenantId);
    query = 'name' in ref ? query.where('name', '=', ref.name) : query.where('id', '=', ref.id);
    const rows = await query.orderBy('created_at', 'desc').limit(5).execute();
    const live = rows.find((row) => row.deleted_at === null);
    if (live) return live;
    if (rows[0]) throw new SandboxGoneError(ref, rows[0]);
    throw new NotFoundError(`sandbox ${label(ref)} not found`);
  }

  async byId(id: string): Promise<SandboxRow | undefined> {
    return this.db.selectFrom('sandboxes').selectAll().where('id', '=', id).where('deleted_at', 'is', null).executeTakeFirst();
  }

  async list(tenantId: string, page: { limit: number; offset: number }): Promise<{ rows: SandboxRow[]; hasMore: boolean }> {
    const rows = await this.db
      .selectFrom('sandboxes')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('deleted_at', 'is', null)
      .orderBy('created_at')
      .orderBy('id')
      .limit(page.limit + 1)
      .offset(page.offset)
      .execute();
    return { rows: rows.slice(0, page.limit), hasMore: rows.length > page.limit };
  }

  /** Live sandboxes in one of `statuses`, for the reaper. */
  async inStatus(statuses: readonly SandboxStatus[]): Promise<SandboxRow[]> {
    return this.db.selectFrom('sandboxes').selectAll().where('deleted_at', 'is', null).where('status', 'in', statuses).execute();
  }

  /**
   * The one status change of a sandbox. With `unchangedSince` (the `updated_at` of a row the
   * caller judged), it applies only if nothing moved the sandbox since: a check that raced a
   * stop or start then changes nothing.
   */
  async move(
    id: string,
    to: SandboxStatus,
    values: Partial<
      Pick<SandboxRow, 'status_message' | 'stopped_at' | 'instance' | 'last_activity_at' | 'pool_name' | 'vcpus' | 'mem_bytes' | 'fs_capacity_bytes'>
    > = {},
    guard: { unchangedSince?: Date } = {},
  ): Promise<SandboxRow> {
    let update = this.db
      .updateTable('sandboxes')
      .set({ status_message: '', ...values, status: to, updated_at: new Date() })
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .where('status', 'in', sandboxLifecycle.sourcesOf(to));
    if (guard.unchangedSince) update = update.where('updated_at', '=', guard.unchangedSince);
    const row = await update.returningAll().executeTakeFirst();
    if (row) return row;
    const current = await this.byId(id);
    if (!current) throw new NotFoundError(`sandbox ${id} not found`);
    if (guard.unchangedSince && current.updated_at.getTime() !== guard.unchangedSince.getTime()) {
      throw new ConflictError(`sandbox ${id} changed meanwhile; it stays ${current.status}`);
    }
    throw new IllegalTransitionError({ entity: sandboxLifecycle.entity, id, from: current.status, to });
  }

  async update(
    id: string,
    values: Partial<Pick<SandboxRow, 'name' | 'idle_ttl_seconds' | 'delete_after_stop_seconds'>> & { labels?: string },
  ): Promise<SandboxRow> {
    try {
      return await this.db
        .updateTable('sandboxes')
        .set({ ...values, updated_at: new Date() })
        .where('id', '=', id)
        .where('deleted_at', 'is', null)
        .returningAll()
        .executeTakeFirstOrThrow();
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictError(`a sandbox named "${values.name}" already exists`, { cause: error });
      throw error;
    }
  }

  /** A new instance for a provisioning sandbox whose warm-pool member failed its claim (not a status change). */
  async reassign(id: string, instance: string): Promise<SandboxRow> {
    return this.db
      .updateTable('sandboxes')
      .set({ instance, pool_name: null, updated_at: new Date() })
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  /** Marks activity (a command, a file, a start) for the idle TTL. */
  async touch(id: string, at: Date): Promise<void> {
    await this.db.updateTable('sandboxes').set({ last_activity_at: at }).where('id', '=', id).where('last_activity_at', '<', at).execute();
  }

  /** Makes a sandbox a tombstone; false when it was already gone. */
  async tombstone(id: string, reason: string, at: Date): Promise<boolean> {
    const result = await this.db
      .updateTable('sandboxes')
      .set({ deleted_at: at, deleted_reason: reason, updated_at: at })
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async purgeTombstones(before: Date): Promise<void> {
    await this.db.deleteFrom('sandboxes').where('deleted_at', '<', before).execute();
  }
}
