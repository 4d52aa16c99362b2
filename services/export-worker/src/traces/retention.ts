/**
 * Retention of traces, as LangSmith's trace tiers: a project's `trace_tier` is 'shortlived' (the
 * base tier, 14 days by default) or 'longlived' (extended, 400 days), each run carries the tier its
 * project had when it arrived (a trigger of migration 0010), and a run is expired once it started
 * longer ago than its tier's days. The days of each tier and the tier of new projects are the
 * operator's: defaults, and per tenant overrides.
 *
 * The sweeper deletes expired runs on its clock. Runs are partitioned by the UTC day of start_time:
 * a day whose runs are all expired loses its whole partition (detached concurrently, so ingest and
 * reads of other days never wait, then dropped), which is cheap whatever its size; a day that also
 * holds runs still kept (another tier, another tenant) has its expired runs deleted in bounded
 * batches. Either way the runs' keys, feedback, waiting feedback and waiting patches go with them,
 * and so does the share link of a trace whose root went. Every replica runs a sweeper; an advisory
 * lock lets one sweep at a time, and a partition detached by a sweep that died is dropped by the
 * next one. Runs expire one by one: a trace that spans midnight loses its runs of the first day
 * first, hours before the rest.
 */
import { sql, type Kysely, type RawBuilder } from '@berth/db';
import { systemClock, type Clock, type Timer } from '@berth/clock';
import type { Logger } from '@berth/log';

export const TRACE_TIERS = ['shortlived', 'longlived'] as const;
export type TraceTier = (typeof TRACE_TIERS)[number];

/** How long traces are kept, for one tenant or by default. */
export interface RetentionSettings {
  /**
   * Days a trace of the base tier ('shortlived') is kept.
   * @default 14
   */
  baseDays: number;
  /**
   * Days a trace of the extended tier ('longlived') is kept.
   * @default 400
   */
  extendedDays: number;
  /**
   * The tier of a project created without one (and of projects made before tiers existed).
   * @default 'shortlived'
   */
  defaultTier: TraceTier;
}

export const DEFAULT_RETENTION: RetentionSettings = { baseDays: 14, extendedDays: 400, defaultTier: 'shortlived' };

/** The operator's retention: defaults, and overrides per tenant (field by field). */
export interface RetentionConfig extends Partial<RetentionSettings> {
  /** Tenant id → what differs for that tenant. */
  tenants?: Record<string, Partial<RetentionSettings>>;
}

const DAY_MS = 86_400_000;

/** Who keeps what how long: answers a tenant's settings and the cutoffs of a moment. */
export class RetentionPolicy {
  private readonly defaults: RetentionSettings;
  private readonly tenants: Map<string, RetentionSettings>;

  constructor(config: RetentionConfig = {}) {
    const { tenants = {}, ...defaults } = config;
    this.defaults = { ...DEFAULT_RETENTION, ...defined(defaults) };
    this.tenants = new Map(Object.entries(tenants).map(([id, settings]) => [id.toLowerCase(), { ...this.defaults, ...defined(settings) }]));
  }

  settings(tenantId: string): RetentionSettings {
    return this.tenants.get(tenantId.toLowerCase()) ?? this.defaults;
  }

  /** Days a trace of `tier` (its project's, or the tenant's default when null) is kept. */
  days(tenantId: string, tier: string | null | undefined): number {
    const settings = this.settings(tenantId);
    return (tier ?? settings.defaultTier) === 'longlived' ? settings.extendedDays : settings.baseDays;
  }

  /** Runs of `tier` that started before this are expired at `now`. */
  cutoff(tenantId: string, tier: string | null | undefined, now: Date): Date {
    return new Date(now.getTime() - this.days(tenantId, tier) * DAY_MS);
  }

  /** Every retention period in force, in days (a run expires after one of these). */
  periods(): number[] {
    return [...new Set([this.defaults, ...this.tenants.values()].flatMap((s) => [s.baseDays, s.extendedDays]))].sort((a, b) => a - b);
  }

  /**
   * SQL: the runs of `table` (as `r`) that are expired at `now` — or, with `expired` false, those
   * kept. A run without a tier (its project had none) has its tenant's default tier; any tier but
   * 'longlived' is the base one. The tenants' own cutoffs come as arrays joined by tenant.
   */
  runs(table: string, now: Date, expired: boolean): RawBuilder<{ id: string; start_time: Date }> {
    const ids = [...this.tenants.keys()];
    const settings = ids.map((id) => this.tenants.get(id)!);
    const base = (s: RetentionSettings) => new Date(now.getTime() - s.baseDays * DAY_MS).toISOString();
    const extended = (s: RetentionSettings) => new Date(now.getTime() - s.extendedDays * DAY_MS).toISOString();
    const cutoff = sql`CASE WHEN coalesce(r.trace_tier, t.default_tier, ${this.defaults.defaultTier}) = 'longlived'
      THEN coalesce(t.extended_cutoff, ${extended(this.defaults)}::timestamptz) ELSE coalesce(t.base_cutoff, ${base(this.defaults)}::timestamptz) END`;
    return sql`SELECT r.id, r.start_time FROM ${sql.table(table)} r
      LEFT JOIN unnest(${ids}::uuid[], ${settings.map(base)}::timestamptz[], ${settings.map(extended)}::timestamptz[], ${settings.map((s) => s.defaultTier)}::text[])
        AS t(tenant_id, base_cutoff, extended_cutoff, default_tier) ON t.tenant_id = r.tenant_id
      WHERE r.start_time ${sql.raw(expired ? '<' : '>=')} ${cutoff}`;
  }
}

function defined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

export interface RetentionSweeperOptions {
  db: Kysely<any>;
  policy: RetentionPolicy;
  logger: Logger;
  /** The clock of the passes and of what has expired (tests move it). @default systemClock */
  clock?: Clock;
  /**
   * How often to sweep.
   * @default 3600000
   */
  intervalMs?: number;
  /**
   * Runs deleted per statement from a day that keeps some (each batch is its own transaction).
   * @default 1000
   */
  batchSize?: number;
  /** Told the days whose partitions were dropped (the trace store forgets them). */
  onDropped?: (days: string[]) => void;
}

/** What one pass removed. */
export interface SweepReport {
  /** Days (`YYYY-MM-DD`) whose partitions were dropped. */
  droppedDays: string[];
  /** Runs deleted from days that keep others. */
  deletedRuns: number;
}

/** Where a partition of `runs` stands: part of it, half detached (a detach was interrupted), or detached. */
type PartitionState = 'attached' | 'pending' | 'detached';

/** A partition of `runs`: `runs_YYYYMMDD`. */
const PARTITION = /^runs_(\d{4})(\d{2})(\d{2})$/;

export class RetentionSweeper {
  private readonly clock: Clock;
  private timer: Timer | undefined;
  private running: Promise<SweepReport> | undefined;
  /** The previous pass that finished without error, and the partitions it saw. */
  private last: { at: number; seen: Set<string> } | undefined;

  constructor(private readonly options: RetentionSweeperOptions) {
    this.clock = options.clock ?? systemClock;
  }

  start(): void {
    this.timer ??= this.clock.setInterval(() => void this.sweep(), this.options.intervalMs ?? 3_600_000);
  }

  async stop(): Promise<void> {
    this.timer?.cancel();
    this.timer = undefined;
    await this.running;
  }

  /** One pass now (tests call it); a pass already under way is awaited instead. */
  async sweep(): Promise<SweepReport> {
    this.running ??= this.pass()
      .catch((error: unknown) => {
        // The next pass retries; runs kept a little longer lose nothing.
        this.options.logger.error({ err: error }, 'sweeping expired traces failed');
        return { droppedDays: [], deletedRuns: 0 };
      })
      .finally(() => (this.running = undefined));
    return this.running;
  }

  /** A pass under the sweep's lock: one replica sweeps at a time (the others skip their turn). */
  private async pass(): Promise<SweepReport> {
    return this.options.db.connection().execute(async (connection) => {
      const { rows } = await sql<{ locked: boolean }>`SELECT pg_try_advisory_lock(hashtext('berth_export.retention')) AS locked`.execute(connection);
      if (!rows[0]!.locked) return { droppedDays: [], deletedRuns: 0 };
      try {
        return await this.passLocked();
      } finally {
        await sql`SELECT pg_advisory_unlock(hashtext('berth_export.retention'))`.execute(connection);
      }
    });
  }

  private async passLocked(): Promise<SweepReport> {
    const { policy, logger } = this.options;
    const now = this.clock.now();
    const periods = policy.periods().map((days) => days * DAY_MS);
    const shortest = periods[0]!;
    const longest = periods.at(-1)!;
    const report: SweepReport = { droppedDays: [], deletedRuns: 0 };
    const { attached, detached } = await this.partitions();
    // Partitions a sweep detached (or began to) and did not drop before it died.
    for (const [name, state] of detached) {
      await this.drop(name, state);
      report.droppedDays.push(dayText(dayOf(name)));
    }
    for (const [name, day] of attached) {
      const end = day + DAY_MS;
      if (day + shortest > now) continue; // not even its first run, if kept the shortest, has expired
      if (end + longest > now && !this.due(name, day, periods, now)) continue;
      const keeps = end + longest > now && (await this.keepsAny(name, new Date(now)));
      if (!keeps) {
        await this.drop(name, 'attached');
        report.droppedDays.push(dayText(day));
        continue;
      }
      const deleted = await this.deleteExpired(name, new Date(now));
      if (deleted > 0) logger.info({ day: dayText(day), runs: deleted }, 'deleted expired runs (the day keeps runs of a longer retention)');
      report.deletedRuns += deleted;
    }
    if (report.droppedDays.length > 0) {
      logger.info({ days: report.droppedDays }, 'dropped day partitions of runs: every run in them was past its retention');
      this.options.onDropped?.(report.droppedDays);
    }
    // A dropped day seen again later was made again by a late run: new to the next pass.
    const dropped = new Set(report.droppedDays);
    this.last = { at: now, seen: new Set([...attached].filter(([, day]) => !dropped.has(dayText(day))).map(([name]) => name)) };
    return report;
  }

  /**
   * Whether runs of the partition may have expired since the last pass: some retention period
   * ends within it for the partition's day, or the partition is new to this sweeper (runs of an
   * old day may arrive late). The first pass looks at every partition.
   */
  private due(name: string, day: number, periods: number[], now: number): boolean {
    if (!this.last || !this.last.seen.has(name)) return true;
    const since = this.last.at;
    return periods.some((period) => day + period <= now && day + DAY_MS + period > since);
  }

  private async partitions(): Promise<{ attached: Map<string, number>; detached: Map<string, PartitionState> }> {
    const { rows } = await sql<{ name: string; state: PartitionState }>`
      SELECT c.relname AS name, CASE WHEN i.inhrelid IS NULL THEN 'detached' WHEN i.inhdetachpending THEN 'pending' ELSE 'attached' END AS state
      FROM pg_class c LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
      WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND c.relname ~ '^runs_[0-9]{8}$'
      ORDER BY c.relname`.execute(this.options.db);
    const attached = new Map<string, number>();
    const detached = new Map<string, PartitionState>();
    for (const row of rows) {
      if (row.state === 'attached') attached.set(row.name, dayOf(row.name));
      else detached.set(row.name, row.state);
    }
    return { attached, detached };
  }

  /** Whether the partition holds a run not expired at `now`. */
  private async keepsAny(name: string, now: Date): Promise<boolean> {
    const { rows } = await sql<{ keeps: boolean }>`
      SELECT EXISTS (${this.options.policy.runs(name, now, false)}) AS keeps`.execute(this.options.db);
    return rows[0]!.keeps;
  }

  /**
   * Drops a partition whose runs are all expired: detached first (CONCURRENTLY, so queries of
   * other days do not wait for it, and no new run can land in it), then its runs' dependents
   * deleted and the table dropped.
   */
  private async drop(name: string, state: PartitionState): Promise<void> {
    const { db } = this.options;
    // Outside a transaction, as Postgres requires for CONCURRENTLY; FINALIZE ends a detach that
    // was interrupted.
    if (state !== 'detached')
      await sql`ALTER TABLE runs DETACH PARTITION ${sql.table(name)} ${sql.raw(state === 'pending' ? 'FINALIZE' : 'CONCURRENTLY')}`.execute(db);
    await db.transaction().execute(async (trx) => {
      await sql`${removeDependents(sql`SELECT id, tenant_id, session_id, is_root FROM ${sql.table(name)}`)} SELECT 1`.execute(trx);
      await sql`DROP TABLE ${sql.table(name)}`.execute(trx);
    });
  }

  /** Deletes the partition's expired runs in batches; answers how many went. */
  private async deleteExpired(name: string, now: Date): Promise<number> {
    const batch = this.options.batchSize ?? 1000;
    let total = 0;
    for (;;) {
      const { rows } = await sql<{ n: string }>`
        WITH doomed AS (${this.options.policy.runs(name, now, true)} LIMIT ${batch}),
        gone AS (DELETE FROM ${sql.table(name)} r USING doomed d WHERE r.id = d.id AND r.start_time = d.start_time
          RETURNING r.id, r.tenant_id, r.session_id, r.is_root),
        ${removeDependents(sql`SELECT * FROM gone`, false)}
        SELECT count(*) AS n FROM gone`.execute(this.options.db);
      const n = Number(rows[0]!.n);
      total += n;
      if (n < batch) return total;
    }
  }
}

/**
 * Data-modifying CTEs deleting what belongs to the runs `runs` selects (id, tenant_id,
 * session_id, is_root): their keys, feedback, waiting feedback and patches, and the share link of
 * each trace whose root is among them.
 */
function removeDependents(runs: RawBuilder<unknown>, opens = true): RawBuilder<unknown> {
  return sql`${sql.raw(opens ? 'WITH' : '')} doomed_runs AS MATERIALIZED (${runs}),
    gone_keys AS (DELETE FROM run_keys k USING doomed_runs g WHERE k.id = g.id AND k.tenant_id = g.tenant_id),
    gone_feedback AS (DELETE FROM feedback f USING doomed_runs g WHERE f.run_id = g.id AND f.tenant_id = g.tenant_id),
    gone_pending_feedback AS (DELETE FROM pending_feedback p USING doomed_runs g WHERE p.run_id = g.id AND p.tenant_id = g.tenant_id),
    gone_patches AS (DELETE FROM pending_run_patches p USING doomed_runs g WHERE p.run_id = g.id AND p.tenant_id = g.tenant_id),
    gone_shares AS (DELETE FROM trace_shares s USING doomed_runs g
      WHERE g.is_root AND s.tenant_id = g.tenant_id AND s.session_id = g.session_id AND s.kind = 'trace' AND s.subject = g.id::text)`;
}

/** The day (ms since the epoch) of a partition's name. */
function dayOf(name: string): number {
  const [, y, m, d] = PARTITION.exec(name)!;
  return Date.UTC(Number(y), Number(m) - 1, Number(d));
}

function dayText(day: number): string {
  return new Date(day).toISOString().slice(0, 10);
}
