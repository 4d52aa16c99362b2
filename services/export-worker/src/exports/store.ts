/**
 * The bulk-export records in Postgres: exports, their runs, and the claims that let several
 * export-worker replicas share the work. Every status change of an export is `moveExport`, of an
 * export run `moveRun`: one conditional UPDATE checked against the lifecycles, so a move that lost
 * a race (the export was cancelled meanwhile) changes nothing.
 *
 * Claims are leases on run rows (@berth/lease): a worker takes a run with `SELECT … FOR UPDATE SKIP
 * LOCKED`, holds it until `lease_expires_at` and renews the lease while it works; every progress
 * write is fenced by the holder (owner and fencing token), so a worker that lost its run (it was
 * cancelled, timed out, or taken over) learns it at its next write and stops. A dead worker's runs
 * are taken over once their lease expires, a live worker's only after the hold period too. Times
 * come from the caller's clock. Whatever makes a run claimable that no worker knows the time of —
 * a new export, a tenant's export ending (a slot of its limit frees up) — notifies
 * {@link RUNS_CHANNEL}, which idle runners listen on.
 */
import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Selectable } from '@berth/db';
import { NotFoundError } from '@berth/errors';
import { leaseExpiry, LeaseLostError, ownerAlive, takeoverCondition, type Holder, type Takeover } from '@berth/lease';
import { IllegalTransitionError } from '@berth/lifecycle';
import type { PartitionCheckpoint } from '../writer/export-partition.js';
import { exportLifecycle, exportRunLifecycle, type ExportRunStatus, type ExportStatus } from './lifecycle.js';
import type { BulkExportTables, ExportRunsTable, ExportsTable } from './tables.js';

export type ExportRow = Selectable<ExportsTable>;
export type ExportRunRow = Selectable<ExportRunsTable>;

/** A new export (its runs are derived from its range). */
export type ExportInsert = Omit<ExportRow, 'status' | 'status_message' | 'next_interval_index' | 'updated_at' | 'started_at' | 'finished_at' | 'seq'> & {
  status: ExportStatus;
  status_message?: string;
};

/** A run claimed by a worker, with what it needs of its export. */
export interface ClaimedRun {
  run: ExportRunRow;
  export: ExportRow;
}

/** The NOTIFY channel that wakes idle runners: there may be a run to claim now. */
export const RUNS_CHANNEL = 'berth_export_runs';

/** A write refused by the fence: the run is no longer this holder's (cancelled, timed out, finished, or taken over). */
const lost = (runId: string) => new LeaseLostError('export run', runId, 'taken');

type Db = Kysely<BulkExportTables>;

/** Which runs a move applies to. */
export type RunTarget =
  /** One run, held by `holder` (LeaseLostError when it is not, or may not move). */
  | { runId: string; holder: Holder }
  /** One run chosen by a claim (locked by it), leased to `claim.owner` until `claim.expiresAt` under a new token. */
  | { runId: string; claim: { owner: string; expiresAt: Date } }
  /** Every run of an export that may move (finished ones stay as they are). */
  | { exportId: string };

/** [start, end) cut at UTC midnights: one export run per day. */
export function dayPartitions(start: Date, end: Date): { start: Date; end: Date }[] {
  const parts: { start: Date; end: Date }[] = [];
  for (let from = start; from < end;) {
    const midnight = new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), from.getUTCDate() + 1));
    const to = midnight < end ? midnight : end;
    parts.push({ start: from, end: to });
    from = to;
  }
  return parts;
}

export class ExportStore {
  constructor(private readonly db: Db) {}

  /** Inserts an export and, unless it is a schedule, one CREATED run per day of its range. */
  async insert(row: ExportInsert, db: Db = this.db): Promise<ExportRow> {
    exportLifecycle.assertInitial(row.status);
    const inserted = await db
      .insertInto('exports')
      .values({ ...row, updated_at: row.created_at })
      .onConflict((oc) => oc.columns(['source_bulk_export_id', 'interval_index']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!inserted) throw new SpawnExistsError();
    if (row.end_time) {
      await this.notify(db);
      await db
        .insertInto('export_runs')
        .values(
          dayPartitions(row.start_time, row.end_time).map((p) => ({
            id: randomUUID(),
            export_id: row.id,
            start_time: p.start,
            end_time: p.end,
            status: 'CREATED' as const,
            created_at: row.created_at,
            updated_at: row.created_at,
          })),
        )
        .execute();
    }
    return inserted;
  }

  async get(tenantId: string, id: string, db: Db = this.db): Promise<ExportRow> {
    const row = await db.selectFrom('exports').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
    if (!row) throw new NotFoundError(`bulk export ${id} not found`);
    return row;
  }

  async list(tenantId: string, page: { limit: number; offset: number }): Promise<ExportRow[]> {
    return this.db
      .selectFrom('exports')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .orderBy('created_at', 'desc')
      .orderBy('seq', 'desc')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
  }

  async runs(exportId: string): Promise<ExportRunRow[]> {
    return this.db.selectFrom('export_runs').selectAll().where('export_id', '=', exportId).orderBy('start_time').execute();
  }

  /**
   * THE one place an export's status changes: to `to` if the lifecycle allows it from the status
   * it is in. Refused with IllegalTransitionError (NotFoundError for no such export).
   */
  async moveExport(
    id: string,
    to: ExportStatus,
    change: { status_message?: string; started_at?: Date; finished_at?: Date; now: Date },
    db: Db = this.db,
  ): Promise<ExportRow> {
    const { now, ...rest } = change;
    const sources = exportLifecycle.sourcesOf(to);
    const status = { status: to } as object;
    const row = sources.length
      ? await db
          .updateTable('exports')
          .set({ ...status, updated_at: now, ...rest })
          .where('id', '=', id)
          .where('status', 'in', sources)
          .returningAll()
          .executeTakeFirst()
      : undefined;
    if (row) {
      // A slot of its tenant's limit is free: an export waiting for one may start.
      if (exportLifecycle.isTerminal(to)) await this.notify(db);
      return row;
    }
    const current = await db.selectFrom('exports').select('status').where('id', '=', id).executeTakeFirst();
    if (!current) throw new NotFoundError(`bulk export ${id} not found`);
    throw new IllegalTransitionError({ entity: exportLifecycle.entity, id, from: current.status, to });
  }

  /**
   * THE one place an export run's status changes (see {@link RunTarget}). A claim leases the run
   * under a new fencing token; any other move releases the lease unless the run stays RUNNING.
   */
  async moveRun(
    target: RunTarget,
    to: ExportRunStatus,
    change: { now: Date; metadata?: string; error?: { key: string; message: string } },
    db: Db = this.db,
  ): Promise<ExportRunRow[]> {
    const sources = exportRunLifecycle.sourcesOf(to);
    if (!sources.length) return [];
    const status = { status: to } as object;
    const lease =
      'claim' in target
        ? { lease_owner: target.claim.owner, lease_expires_at: target.claim.expiresAt, lease_token: sql`lease_token + 1` as never }
        : to === 'RUNNING'
          ? {}
          : { lease_owner: null, lease_expires_at: null };
    let query = db
      .updateTable('export_runs')
      .set({
        ...status,
        updated_at: change.now,
        ...(change.metadata ? { metadata: change.metadata } : {}),
        ...(change.error ? { errors: sql`errors || jsonb_build_object(${change.error.key}::text, ${change.error.message}::text)` as never } : {}),
        ...lease,
        ...(exportRunLifecycle.isTerminal(to) ? { finished_at: change.now } : {}),
      })
      .where('status', 'in', sources);
    if ('exportId' in target) query = query.where('export_id', '=', target.exportId);
    else query = query.where('id', '=', target.runId);
    if ('holder' in target) query = query.where('lease_owner', '=', target.holder.owner).where('lease_token', '=', target.holder.token);
    const rows = await query.returningAll().execute();
    if ('holder' in target && rows.length === 0) throw lost(target.runId);
    return rows;
  }

  /**
   * Takes one runnable run for `owner` until `now + leaseMs`: a CREATED one, a RUNNING one whose
   * retry is due (its lease released), or one whose lease `takeover` may take over (its worker
   * died, or renewed nothing for the hold period; see @berth/lease). A run of an export that is
   * not RUNNING yet is taken only while its tenant has fewer than `tenantLimit` RUNNING exports
   * (checked under a per-tenant lock, so replicas cannot exceed it together); it moves the export
   * to RUNNING. The run's move is `moveRun`'s, with a new fencing token.
   */
  async claim(owner: string, now: Date, leaseMs: number, tenantLimit: number, takeover: Takeover): Promise<ClaimedRun | undefined> {
    return this.db.transaction().execute(async (tx) => {
      const candidates = await sql<{ id: string; export_id: string; tenant_id: string; export_status: ExportStatus }>`
        SELECT r.id, r.export_id, e.tenant_id, e.status AS export_status
        FROM export_runs r JOIN exports e ON e.id = r.export_id
        WHERE r.status IN ('CREATED', 'RUNNING') AND e.status IN ('CREATED', 'RUNNING')
          AND r.not_before <= ${now} AND (r.lease_owner IS NULL OR ${sql.raw(takeoverCondition('r', now, takeover))})
          AND (e.status = 'RUNNING' OR (SELECT count(*) FROM exports x WHERE x.tenant_id = e.tenant_id AND x.status = 'RUNNING') < ${tenantLimit})
        ORDER BY e.status = 'RUNNING' DESC, e.created_at, r.start_time
        LIMIT 10
        FOR UPDATE OF r SKIP LOCKED`.execute(tx);
      for (const c of candidates.rows) {
        if (c.export_status === 'CREATED') {
          await sql`SELECT pg_advisory_xact_lock(hashtextextended(${c.tenant_id}, 8803))`.execute(tx);
          const running = await sql<{ n: string }>`SELECT count(*) AS n FROM exports WHERE tenant_id = ${c.tenant_id}::uuid AND status = 'RUNNING'`.execute(tx);
          if (Number(running.rows[0]!.n) >= tenantLimit) continue;
          try {
            await this.moveExport(c.export_id, 'RUNNING', { started_at: now, now }, tx);
          } catch (error) {
            if (error instanceof IllegalTransitionError) continue; // cancelled, or started by another worker meanwhile
            throw error;
          }
        }
        const [run] = await this.moveRun({ runId: c.id, claim: { owner, expiresAt: leaseExpiry(now, leaseMs) } }, 'RUNNING', { now }, tx);
        if (!run) continue;
        const exp = await tx.selectFrom('exports').selectAll().where('id', '=', c.export_id).executeTakeFirstOrThrow();
        if (exp.status !== 'RUNNING') continue;
        return { run, export: exp };
      }
      return undefined;
    });
  }

  /**
   * When a run not held by `owner` becomes claimable, when that is after `now`: a retry's
   * `not_before`, or the end of a lease (and of the hold period, while its owner is alive).
   * Undefined when no run waits for a time (those waiting for a tenant's slot are notified).
   */
  async nextDue(owner: string, now: Date, holdMs: number): Promise<Date | undefined> {
    const { rows } = await sql<{ due: Date | null }>`
      SELECT min(due) AS due FROM (
        SELECT CASE WHEN r.lease_owner IS NULL THEN r.not_before
                    WHEN ${sql.raw(ownerAlive('r.lease_owner'))} THEN r.lease_expires_at + make_interval(secs => ${holdMs}::double precision / 1000)
                    ELSE r.lease_expires_at END AS due
        FROM export_runs r JOIN exports e ON e.id = r.export_id
        WHERE r.status IN ('CREATED', 'RUNNING') AND e.status IN ('CREATED', 'RUNNING') AND r.lease_owner IS DISTINCT FROM ${owner}
      ) d WHERE due > ${now}`.execute(this.db);
    return rows[0]?.due ?? undefined;
  }

  /** Extends `holder`'s lease; false when the run is no longer its (or its export stopped). */
  async renew(runId: string, holder: Holder, now: Date, leaseMs: number): Promise<boolean> {
    const rows = await sql`
      UPDATE export_runs r SET lease_expires_at = ${leaseExpiry(now, leaseMs)}
      FROM exports e
      WHERE r.id = ${runId}::uuid AND r.lease_owner = ${holder.owner} AND r.lease_token = ${holder.token} AND r.status = 'RUNNING'
        AND e.id = r.export_id AND e.status = 'RUNNING'
      RETURNING r.id`.execute(this.db);
    return rows.rows.length > 0;
  }

  /** Saves the writer's progress (fenced by the lease: LeaseLostError when the run is no longer `holder`'s). */
  async saveCheckpoint(runId: string, holder: Holder, checkpoint: PartitionCheckpoint, now: Date): Promise<void> {
    const result = await this.db
      .updateTable('export_runs')
      .set({ metadata: sql`jsonb_set(metadata, '{checkpoint}', ${JSON.stringify(checkpoint)}::jsonb)` as never, updated_at: now })
      .where('id', '=', runId)
      .where('lease_owner', '=', holder.owner)
      .where('lease_token', '=', holder.token)
      .where('status', '=', 'RUNNING')
      .executeTakeFirst();
    if (result.numUpdatedRows === 0n) throw lost(runId);
  }

  /** Records attempt `retry_number`'s error and frees the run for another attempt at `notBefore`. */
  async scheduleRetry(runId: string, holder: Holder, message: string, notBefore: Date, now: Date): Promise<void> {
    const result = await this.db
      .updateTable('export_runs')
      .set({
        errors: sql`errors || jsonb_build_object('retry_' || retry_number, ${message}::text)` as never,
        retry_number: sql`retry_number + 1` as never,
        not_before: notBefore,
        lease_owner: null,
        lease_expires_at: null,
        updated_at: now,
      })
      .where('id', '=', runId)
      .where('lease_owner', '=', holder.owner)
      .where('lease_token', '=', holder.token)
      .where('status', '=', 'RUNNING')
      .executeTakeFirst();
    if (result.numUpdatedRows === 0n) throw lost(runId);
  }

  /** The run completed; the export completes with its last run. */
  async completeRun(runId: string, holder: Holder, checkpoint: PartitionCheckpoint, now: Date): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      const [run] = await this.moveRun({ runId, holder }, 'COMPLETED', { now, metadata: JSON.stringify({ checkpoint }) }, tx);
      // Two last runs completing at once: the export's row lock orders them, and the second sees both.
      await tx.selectFrom('exports').select('id').where('id', '=', run!.export_id).forUpdate().execute();
      const left = await tx
        .selectFrom('export_runs')
        .select('id')
        .where('export_id', '=', run!.export_id)
        .where('status', '!=', 'COMPLETED')
        .limit(1)
        .executeTakeFirst();
      if (!left) await this.moveExport(run!.export_id, 'COMPLETED', { finished_at: now, now }, tx);
    });
  }

  /** The run failed for good (`message` recorded as its attempt's error): so does its export, and its other runs stop. */
  async failRun(runId: string, holder: Holder, message: string, now: Date): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      const attempt = await tx.selectFrom('export_runs').select(['retry_number', 'export_id']).where('id', '=', runId).executeTakeFirstOrThrow();
      await this.moveRun({ runId, holder }, 'FAILED', { now, error: { key: `retry_${attempt.retry_number}`, message } }, tx);
      await this.moveExport(attempt.export_id, 'FAILED', { status_message: message, finished_at: now, now }, tx);
      await this.moveRun({ exportId: attempt.export_id }, 'CANCELLED', { now, error: { key: 'cancelled', message: 'another run of the export failed' } }, tx);
    });
  }

  /** Cancels an export (its unfinished runs too) or a schedule. IllegalTransitionError when it is final. */
  async cancel(tenantId: string, id: string, now: Date): Promise<ExportRow> {
    return this.db.transaction().execute(async (tx) => {
      await this.get(tenantId, id, tx);
      const row = await this.moveExport(id, 'CANCELLED', { finished_at: now, now }, tx);
      await this.moveRun({ exportId: id }, 'CANCELLED', { now }, tx);
      return row;
    });
  }

  /** Exports not finished `timeoutMs` after they were created become TIMEDOUT (their runs too). */
  async expire(now: Date, timeoutMs: number): Promise<string[]> {
    const late = await this.db
      .selectFrom('exports')
      .select('id')
      .where('status', 'in', ['CREATED', 'RUNNING'])
      .where('created_at', '<', new Date(now.getTime() - timeoutMs))
      .execute();
    const expired: string[] = [];
    for (const { id } of late) {
      await this.db.transaction().execute(async (tx) => {
        try {
          await this.moveExport(id, 'TIMEDOUT', { status_message: `not finished within ${Math.round(timeoutMs / 3_600_000)} h`, finished_at: now, now }, tx);
        } catch (error) {
          if (error instanceof IllegalTransitionError) return; // finished meanwhile
          throw error;
        }
        await this.moveRun({ exportId: id }, 'TIMEDOUT', { now }, tx);
        expired.push(id);
      });
    }
    return expired;
  }

  /** Wakes idle runners (delivered when `db`'s transaction commits). */
  private async notify(db: Db): Promise<void> {
    await sql`SELECT pg_notify(${RUNS_CHANNEL}, '')`.execute(db);
  }

  /** Schedules (SCHEDULED exports) whose next interval ends at or before `dueBefore`. */
  async dueSchedules(dueBefore: Date): Promise<ExportRow[]> {
    return this.db
      .selectFrom('exports')
      .selectAll()
      .where('status', '=', 'SCHEDULED')
      .where(sql<boolean>`start_time + (next_interval_index + 1) * interval_hours * interval '1 hour' <= ${dueBefore}`)
      .execute();
  }

  /**
   * Runs `spawn` with the schedule locked while it is still SCHEDULED (a cancel waits for it, and a
   * cancelled schedule spawns nothing), then records the next interval to spawn.
   */
  async withSchedule(id: string, spawn: (schedule: ExportRow, tx: Db) => Promise<number>): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      const schedule = await tx.selectFrom('exports').selectAll().where('id', '=', id).where('status', '=', 'SCHEDULED').forUpdate().executeTakeFirst();
      if (!schedule) return;
      const next = await spawn(schedule, tx);
      await tx.updateTable('exports').set({ next_interval_index: next }).where('id', '=', id).execute();
    });
  }
}

/** The schedule already spawned this interval (another replica, or before a restart). */
export class SpawnExistsError extends Error {
  constructor() {
    super('this interval of the schedule was already spawned');
    this.name = 'SpawnExistsError';
  }
}
