/**
 * The trace store: tracing projects (sessions) and runs, in the export-worker's Postgres schema.
 *
 * A run arrives as a create and, usually, a later patch — in either order, and possibly twice. The
 * record converges to the same row whatever the order: a create only fills fields the row lacks
 * (so a repeated create, or a create that comes after its patch, changes nothing the patch set),
 * and a patch overwrites the fields it carries (later patches win per field). Absent or null fields
 * never erase a stored value.
 *
 * Runs are partitioned by the day of start_time, but a patch usually has no start_time. The store
 * therefore keeps `run_keys` (run id → tenant, start_time): a patch finds its row's partition
 * there, and a patch whose create has not arrived yet waits in `pending_run_patches` and is
 * applied when the create comes. start_time is fixed by the first create.
 */
import { randomUUID } from 'node:crypto';
import { isUniqueViolation, sql, type Database, type Kysely, type RawBuilder } from '@berth/db';
import { ConflictError, NotFoundError } from '@berth/errors';
import { compileFilter } from '../filter/compile.js';
import type { FilterNode } from '../filter/parse.js';
import { planBatch, writeBatch, type StoredKey, type WaitingPatches } from './run-batch.js';
import { toDate, type RunWrite } from './run-fields.js';
import { isUuid } from '@berth/ids';
import { runQuery, type RunQuery, type RunQueryPage } from './run-query.js';
import { projectStats, type ProjectStats, type StatsQuery } from './run-stats.js';
import { queryThreads, type ThreadPage, type ThreadQuery } from './run-threads.js';
import { DEFAULT_MODEL_PRICES, type ModelPrice } from './model-prices.js';
import type { TraceTier } from './retention.js';
import { TraceRollups, lockIds } from './rollups.js';

/** The schema of the trace store. */
export const TRACE_STORE_SCHEMA = 'berth_export';

export interface SessionRow {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  metadata: Record<string, unknown>;
  /** LangSmith's `extra` object of the project, as clients send it (metadata under `extra.metadata`). */
  extra: Record<string, unknown>;
  reference_dataset_id: string | null;
  end_time: Date | null;
  /** 'shortlived' or 'longlived' (retention.ts); null for projects made before tiers, which have their tenant's default. */
  trace_tier: TraceTier | null;
  created_at: Date;
  updated_at: Date;
}

export interface TraceTables {
  sessions: SessionRow;
}

export interface SessionCreate {
  id?: string;
  name: string;
  description?: string | null;
  metadata?: Record<string, unknown>;
  extra?: Record<string, unknown>;
  reference_dataset_id?: string | null;
  end_time?: Date | null;
  trace_tier?: TraceTier | null;
}

export interface SessionUpdate {
  name?: string;
  description?: string | null;
  extra?: Record<string, unknown>;
  end_time?: Date | null;
  /** Applies to the runs that arrive after (each run keeps the tier it came with). */
  trace_tier?: TraceTier;
}

export interface SessionList {
  ids?: string[];
  name?: string;
  nameContains?: string;
  referenceDatasetId?: string;
  limit: number;
  offset: number;
}

/** What became of each write of a batch. */
export interface UpsertResult {
  /** Runs whose row now reflects the write. */
  stored: string[];
  /** Patches kept until their run's create arrives. */
  pending: string[];
  /** Writes refused (the rest of the batch is kept), with the reason in words. */
  rejected: { index: number; id: string; reason: string }[];
}

/** One page of a project's runs in a time range, in (start_time, id) order. */
export interface RunScan {
  sessionId: string;
  /** Inclusive bound on start_time. */
  start: Date;
  /** Exclusive bound on start_time. */
  end: Date;
  filter?: FilterNode;
  /** The last run of the previous page (keyset paging: no OFFSET, each page is an index range). */
  after?: { start_time: Date; id: string };
  limit: number;
  /**
   * The run's fields only (not created_at/updated_at), with the JSON columns, parent_run_ids and
   * tags as their JSON text, unparsed: for callers that only pass them on (exports), which then skip
   * a parse and a re-serialisation and keep numbers exactly as stored.
   */
  jsonText?: boolean;
}

export interface TraceStoreOptions {
  /**
   * The trace tier of a project created without one (ingest makes projects by name). None: such
   * projects have none, and their runs have their tenant's default when swept.
   */
  defaultTier?: (tenantId: string) => TraceTier;
  /**
   * Days after which retention may drop a day's partition (the shortest retention): the store
   * checks that such a day's partition still exists (another replica may have dropped it) rather
   * than trust what it saw before. None: every partition it saw is trusted.
   */
  droppableAfterDays?: number;
  /**
   * Prices of llm runs that report tokens without costs (model-prices.ts).
   * @default DEFAULT_MODEL_PRICES
   */
  modelPrices?: readonly ModelPrice[];
}

/** Run row as stored (JSON columns parsed unless read with `jsonText`, numeric columns as strings as pg returns them). */
export type RunRow = Record<string, unknown> & { id: string; start_time: Date; status: string; is_root: boolean };

export class TraceStore {
  private readonly db: Kysely<TraceTables>;
  /** Day partitions known to exist (retention drops old ones: see forgetPartitions). */
  private readonly partitions = new Set<string>();
  private readonly rollups: TraceRollups;

  constructor(
    database: Database<TraceTables>,
    private readonly options: TraceStoreOptions = {},
  ) {
    this.db = database.db;
    this.rollups = new TraceRollups(options.modelPrices ?? DEFAULT_MODEL_PRICES);
  }

  /** Checks the store's settings against the database (a price pattern Postgres cannot compile). */
  async check(): Promise<void> {
    await this.rollups.check(this.db);
  }

  async createSession(tenantId: string, input: SessionCreate): Promise<SessionRow> {
    const row = await this.insertSession(tenantId, input);
    if (!row) throw new ConflictError(`a tracing project named ${JSON.stringify(input.name)} (or with this id) already exists`);
    return row;
  }

  /**
   * The tenant's project named `input.name`, created when missing (concurrent callers all get
   * the same one). `created` tells whether this call made it.
   */
  async ensureSession(tenantId: string, input: SessionCreate): Promise<{ session: SessionRow; created: boolean }> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const existing = await this.findSessionByName(tenantId, input.name);
      if (existing) return { session: existing, created: false };
      const row = await this.insertSession(tenantId, input);
      if (row) return { session: row, created: true };
      // Lost a race with another creator of the same name: read theirs.
    }
    throw new ConflictError(`a tracing project with the id of ${JSON.stringify(input.name)} already exists under another name`);
  }

  async getSession(tenantId: string, id: string): Promise<SessionRow> {
    const row = await this.db.selectFrom('sessions').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
    if (!row) throw new NotFoundError(`tracing project ${id} not found`);
    return row;
  }

  async findSessionByName(tenantId: string, name: string): Promise<SessionRow | undefined> {
    return this.db.selectFrom('sessions').selectAll().where('tenant_id', '=', tenantId).where('name', '=', name).executeTakeFirst();
  }

  /** The tenant's projects, newest first. */
  async listSessions(tenantId: string, list: SessionList): Promise<SessionRow[]> {
    let query = this.db.selectFrom('sessions').selectAll().where('tenant_id', '=', tenantId);
    if (list.ids && list.ids.length > 0) query = query.where('id', 'in', list.ids);
    if (list.name !== undefined) query = query.where('name', '=', list.name);
    if (list.nameContains) query = query.where(sql<boolean>`strpos(lower(name), lower(${list.nameContains})) > 0`);
    if (list.referenceDatasetId) query = query.where('reference_dataset_id', '=', list.referenceDatasetId);
    return query.orderBy('created_at', 'desc').orderBy('id').limit(list.limit).offset(list.offset).execute();
  }

  async updateSession(tenantId: string, id: string, update: SessionUpdate): Promise<SessionRow> {
    const values: Record<string, unknown> = {};
    if (update.name !== undefined) values.name = update.name;
    if (update.description !== undefined) values.description = update.description;
    if (update.extra !== undefined) values.extra = JSON.stringify(update.extra);
    if (update.end_time !== undefined) values.end_time = update.end_time;
    if (update.trace_tier !== undefined) values.trace_tier = update.trace_tier;
    if (Object.keys(values).length === 0) return this.getSession(tenantId, id);
    let row: SessionRow | undefined;
    try {
      row = await this.db
        .updateTable('sessions')
        .set({ ...values, updated_at: sql`now()` } as never)
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .returningAll()
        .executeTakeFirst();
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictError(`a tracing project named ${JSON.stringify(update.name)} already exists`, { cause: error });
      throw error;
    }
    if (!row) throw new NotFoundError(`tracing project ${id} not found`);
    return row;
  }

  /** Deletes a project with all its runs; answers how many runs went. */
  async deleteSession(tenantId: string, id: string): Promise<number> {
    return this.db.transaction().execute(async (trx) => {
      const session = await trx.selectFrom('sessions').select('id').where('tenant_id', '=', tenantId).where('id', '=', id).forUpdate().executeTakeFirst();
      if (!session) throw new NotFoundError(`tracing project ${id} not found`);
      // run_keys is not partitioned and not tied to sessions: without this, a deleted run's id
      // would still route later writes to a row that is gone.
      const keys = await sql`DELETE FROM run_keys k USING runs r
        WHERE r.session_id = ${id}::uuid AND r.tenant_id = ${tenantId}::uuid AND k.id = r.id AND k.start_time = r.start_time`.execute(trx);
      await trx.deleteFrom('sessions').where('id', '=', id).execute(); // its runs go by ON DELETE CASCADE
      return Number(keys.numAffectedRows ?? 0n);
    });
  }

  /** Statistics of the tenant's projects (see run-stats.ts). */
  async projectStats(tenantId: string, query: StatsQuery): Promise<Map<string, ProjectStats>> {
    return projectStats(this.db, tenantId, query);
  }

  /** Threads of a project's traces (see run-threads.ts). */
  async queryThreads(tenantId: string, query: ThreadQuery): Promise<ThreadPage> {
    return queryThreads(this.db, tenantId, query);
  }

  /** A run of the tenant (of `sessionId` when given), or NotFoundError. */
  async getRun(tenantId: string, id: string, sessionId?: string): Promise<RunRow> {
    const key = await sql<{ start_time: Date }>`SELECT start_time FROM run_keys WHERE id = ${id}::uuid AND tenant_id = ${tenantId}::uuid`.execute(this.db);
    const startTime = key.rows[0]?.start_time;
    const run = startTime ? (await sql<RunRow>`SELECT * FROM runs WHERE id = ${id}::uuid AND start_time = ${startTime}`.execute(this.db)).rows[0] : undefined;
    if (!run || (sessionId !== undefined && run.session_id !== sessionId)) throw new NotFoundError(`run ${id} not found`);
    return run;
  }

  /** A page of runs matching `query` (see run-query.ts), newest first unless `ascending`. */
  async queryRuns(tenantId: string, query: RunQuery): Promise<RunQueryPage> {
    const rows = (await runQuery(tenantId, query).execute(this.db)).rows;
    const page = rows.slice(0, query.limit);
    const last = page.at(-1);
    return { runs: page, next: rows.length > query.limit && last ? { start_time: last.start_time, id: last.id } : undefined };
  }

  /**
   * Deletes patches that waited longer than `maxAgeMs` for their run's create: a client that
   * lost the create never sends it, and the table must not grow forever. Answers how many went.
   */
  /** Patches waiting for their run, counted up to `cap` (a count that stays cheap on a large backlog). */
  async countPendingPatches(cap = 100_000): Promise<number> {
    const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM (SELECT 1 FROM pending_run_patches LIMIT ${cap}) p`.execute(this.db);
    return Number(rows[0]!.n);
  }

  async sweepPendingPatches(maxAgeMs: number): Promise<number> {
    const result = await sql`DELETE FROM pending_run_patches WHERE received_at < now() - make_interval(secs => ${maxAgeMs / 1000})`.execute(this.db);
    return Number(result.numAffectedRows ?? 0n);
  }

  private async insertSession(tenantId: string, input: SessionCreate): Promise<SessionRow | undefined> {
    return this.db
      .insertInto('sessions')
      .values({
        id: input.id ?? randomUUID(),
        tenant_id: tenantId,
        name: input.name,
        description: input.description ?? null,
        metadata: JSON.stringify(input.metadata ?? {}) as unknown as Record<string, unknown>,
        extra: JSON.stringify(input.extra ?? {}) as unknown as Record<string, unknown>,
        reference_dataset_id: input.reference_dataset_id ?? null,
        end_time: input.end_time ?? null,
        trace_tier: input.trace_tier ?? this.options.defaultTier?.(tenantId) ?? null,
      } as SessionRow)
      .onConflict((oc) => oc.doNothing())
      .returningAll()
      .executeTakeFirst();
  }

  /** A page of runs; only the partitions of [start, end) are read. */
  async scanRuns(tenantId: string, scan: RunScan): Promise<RunRow[]> {
    const { rows } = await runScanQuery(tenantId, scan).execute(this.db);
    if (scan.jsonText) {
      // Times come as epoch milliseconds (see JSON_TEXT_COLUMNS).
      for (const row of rows) for (const column of TIME_COLUMNS) if (row[column] !== null) row[column] = new Date(row[column] as number);
    }
    return rows;
  }

  /**
   * Applies a batch of creates and patches of `tenantId`'s runs, in order, in one transaction of a
   * few statements whatever the batch's size (see run-batch.ts).
   */
  async upsertRuns(tenantId: string, writes: RunWrite[]): Promise<UpsertResult> {
    const result: UpsertResult = { stored: [], pending: [], rejected: [] };
    const valid: { index: number; write: RunWrite }[] = [];
    writes.forEach((write, index) => {
      const reason = invalidReason(write);
      if (reason) result.rejected.push({ index, id: String(write.id), reason });
      else valid.push({ index, write: { ...write, id: write.id.toLowerCase() } });
    });
    await this.ensurePartitions(valid.filter(({ write }) => write.op === 'create').map(({ write }) => dayOf(toDate(write.start_time, 'start_time'))));
    if (valid.length === 0) return result;

    await this.db.transaction().execute(async (trx) => {
      // One writer per run at a time (concurrent batches carrying the same run), in a fixed
      // order so that two batches never wait on each other; the batch's traces are locked with its
      // runs, for their roll-ups (rollups.ts). The runs' keys are read after the lock (a statement
      // of their own: its snapshot must postdate the lock).
      const ids = lockIds(valid.map(({ write }) => write));
      const sessions = [...new Set(valid.flatMap(({ write }) => (write.session_id ? [write.session_id.toLowerCase()] : [])))];
      const { rows } = await sql<{ known: string[] | null }>`SELECT
          (SELECT count(*) FROM (SELECT pg_advisory_xact_lock(hashtextextended(id, 7411)) FROM (SELECT id FROM unnest(${ids}::text[]) AS id ORDER BY id) AS o) AS l) AS locked,
          (SELECT array_agg(id::text) FROM sessions WHERE tenant_id = ${tenantId}::uuid AND id = ANY(${sessions}::uuid[])) AS known`.execute(trx);
      const known = new Set(rows[0]?.known ?? []);
      const accepted = valid.filter(({ index, write }) => {
        if (!write.session_id || known.has(write.session_id.toLowerCase())) return true;
        result.rejected.push({ index, id: write.id, reason: `tracing project ${write.session_id} not found` });
        return false;
      });
      if (accepted.length === 0) return;

      const { keys, waiting } = await readKeys(
        trx,
        tenantId,
        accepted.map(({ write }) => write),
      );
      const plan = planBatch(
        tenantId,
        accepted.map(({ write }) => write),
        keys,
        waiting,
      );
      await writeBatch(trx, tenantId, plan);
      await this.rollups.apply(
        trx,
        tenantId,
        accepted.filter((_, i) => plan.outcomes[i] === 'stored').map(({ write }) => write),
      );
      plan.outcomes.forEach((outcome, i) => {
        const { index, write } = accepted[i]!;
        if (outcome === 'foreign') result.rejected.push({ index, id: write.id, reason: 'the run id belongs to another run (or another project)' });
        else (outcome === 'stored' ? result.stored : result.pending).push(write.id);
      });
    });
    result.rejected.sort((a, b) => a.index - b.index);
    return result;
  }

  /** Forgets day partitions (`YYYY-MM-DD`) that were dropped (retention): a later run of such a day creates its partition again. */
  forgetPartitions(days: string[]): void {
    for (const day of days) this.partitions.delete(day);
  }

  /** Creates the day partitions of `days` (`YYYY-MM-DD`) that do not exist yet. */
  private async ensurePartitions(days: string[]): Promise<void> {
    const droppable = this.options.droppableAfterDays;
    // A day in its last hours of being kept may be dropped by a replica whose clock is ahead.
    const trusted = (day: string) => droppable === undefined || Date.parse(day) + (droppable - 1) * 86_400_000 > Date.now();
    const missing = [...new Set(days)].filter((d) => !this.partitions.has(d) || !trusted(d));
    if (missing.length === 0) return;
    await this.db.transaction().execute(async (trx) => {
      // Several replicas may meet a new day at once: CREATE TABLE IF NOT EXISTS alone can still fail.
      await sql`SELECT pg_advisory_xact_lock(hashtext('berth_export.run_partitions'))`.execute(trx);
      for (const day of missing) {
        const from = `${day}T00:00:00Z`;
        const to = new Date(Date.parse(from) + 86_400_000).toISOString();
        // Names and bounds come from a validated date (digits and dashes only), never from input.
        await sql`CREATE TABLE IF NOT EXISTS ${sql.id(partitionName(day))} PARTITION OF runs FOR VALUES FROM (${sql.lit(from)}) TO (${sql.lit(to)})`.execute(
          trx,
        );
      }
    });
    for (const day of missing) this.partitions.add(day);
  }
}

/**
 * The query of {@link TraceStore.scanRuns}: bounds on start_time first, so the planner prunes
 * partitions. The order names the table's columns: with `jsonText` the output's start_time is a
 * number, and ordering by it would sort the range instead of walking the index.
 */
export function runScanQuery(tenantId: string, scan: RunScan): RawBuilder<RunRow> {
  const conditions = [
    sql`tenant_id = ${tenantId}::uuid`,
    sql`session_id = ${scan.sessionId}::uuid`,
    sql`start_time >= ${scan.start.toISOString()}::timestamptz`,
    sql`start_time < ${scan.end.toISOString()}::timestamptz`,
  ];
  if (scan.after) conditions.push(sql`(start_time, id) > (${scan.after.start_time.toISOString()}::timestamptz, ${scan.after.id}::uuid)`);
  if (scan.filter) conditions.push(compileFilter(scan.filter));
  const columns = scan.jsonText ? sql.raw(JSON_TEXT_COLUMNS) : sql`*`;
  return sql<RunRow>`SELECT ${columns} FROM runs WHERE ${sql.join(conditions, sql` AND `)} ORDER BY runs.start_time, runs.id LIMIT ${scan.limit}`;
}

const TIME_COLUMNS = ['start_time', 'end_time', 'first_token_time'] as const;
const epochMs = (column: string) => `(extract(epoch FROM ${column}) * 1000)::float8 AS ${column}`;

/**
 * The run's fields, with the JSON ones (and the lists) as JSON text, and times as epoch
 * milliseconds: node-postgres parses timestamp text with a regular expression per value, a
 * tenth of an export's CPU; a float is cheap.
 */
const JSON_TEXT_COLUMNS = `id, tenant_id, session_id, trace_id, dotted_order, parent_run_id, array_to_json(parent_run_ids)::text AS parent_run_ids,
  reference_example_id, name, run_type, ${epochMs('start_time')}, ${epochMs('end_time')}, inputs::text AS inputs, outputs::text AS outputs, error,
  extra::text AS extra, events::text AS events, array_to_json(tags)::text AS tags, feedback_stats::text AS feedback_stats, prompt_tokens,
  completion_tokens, total_tokens, prompt_cost, completion_cost, total_cost, ${epochMs('first_token_time')}, trace_tier, status, is_root`;

/** The partition holding runs that started on `day` (`YYYY-MM-DD`, UTC). */
export function partitionName(day: string): string {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) throw new Error(`not a day: ${day}`);
  return `runs_${day.replaceAll('-', '')}`;
}

function dayOf(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/** Why a write cannot be stored (its project's existence aside), or undefined. */
function invalidReason(write: RunWrite): string | undefined {
  if (typeof write.id !== 'string' || !isUuid(write.id)) return 'id must be a UUID';
  for (const column of ['session_id', 'trace_id', 'parent_run_id', 'reference_example_id'] as const) {
    const value = write[column];
    if (value != null && !isUuid(value)) return `${column} must be a UUID`;
  }
  for (const column of ['start_time', 'end_time', 'first_token_time'] as const) {
    try {
      if (write[column] != null) toDate(write[column], column);
    } catch (error) {
      return (error as Error).message;
    }
  }
  if (write.op === 'create') {
    const missing = (['session_id', 'name', 'run_type', 'start_time'] as const).filter((f) => write[f] == null);
    if (missing.length > 0) return `a new run needs ${missing.join(', ')}`;
    if (write.parent_run_id && !write.trace_id && !write.dotted_order) return 'a child run needs trace_id or dotted_order';
  }
  return undefined;
}

/**
 * The stored keys of the batch's runs (with their project when a bound writer must be checked)
 * and the tenant's patches waiting for them, in one statement.
 */
async function readKeys(trx: Kysely<TraceTables>, tenantId: string, writes: RunWrite[]): Promise<{ keys: Map<string, StoredKey>; waiting: WaitingPatches }> {
  const ids = [...new Set(writes.map((w) => w.id))];
  const creates = [...new Set(writes.filter((w) => w.op === 'create').map((w) => w.id))];
  const session = writes.some((w) => w.scope_session_id)
    ? sql`(SELECT session_id::text FROM runs r WHERE r.id = k.id AND r.start_time = k.start_time)`
    : sql`NULL::text`;
  const { rows } = await sql<{ id: string; tenant_id: string | null; start_time: string | null; session_id: string | null; patch: RunWrite | null }>`
    SELECT id::text, tenant_id::text, start_time::text, ${session} AS session_id, NULL::jsonb AS patch, 0::bigint AS seq
      FROM run_keys k WHERE id = ANY(${ids}::uuid[])
    UNION ALL
    SELECT run_id::text, NULL, NULL, NULL, patch, seq FROM pending_run_patches
      WHERE run_id = ANY(${creates}::uuid[]) AND tenant_id = ${tenantId}::uuid
    ORDER BY seq`.execute(trx);
  const keys = new Map<string, StoredKey>();
  const waiting: WaitingPatches = new Map();
  for (const row of rows) {
    if (row.patch) waiting.set(row.id, [...(waiting.get(row.id) ?? []), row.patch]);
    else keys.set(row.id, { tenant_id: row.tenant_id!, start_time: row.start_time!, session_id: row.session_id });
  }
  return { keys, waiting };
}
