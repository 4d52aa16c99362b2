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
import { RUN_COLUMN_NAMES, RUN_COLUMNS, ancestorsFromDottedOrder, columnValue, toDate, type RunColumn, type RunFields, type RunWrite } from './run-fields.js';
import { isUuid } from '@berth/ids';
import { runQuery, type RunQuery, type RunQueryPage } from './run-query.js';
import { projectStats, type ProjectStats, type StatsQuery } from './run-stats.js';
import { queryThreads, type ThreadPage, type ThreadQuery } from './run-threads.js';
import type { TraceTier } from './retention.js';

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
}

/** Run row as stored (JSON columns parsed unless read with `jsonText`, numeric columns as strings as pg returns them). */
export type RunRow = Record<string, unknown> & { id: string; start_time: Date; status: string; is_root: boolean };

export class TraceStore {
  private readonly db: Kysely<TraceTables>;
  /** Day partitions known to exist (retention drops old ones: see forgetPartitions). */
  private readonly partitions = new Set<string>();

  constructor(
    database: Database<TraceTables>,
    private readonly options: TraceStoreOptions = {},
  ) {
    this.db = database.db;
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

  /** Applies a batch of creates and patches of `tenantId`'s runs, in order. */
  async upsertRuns(tenantId: string, writes: RunWrite[]): Promise<UpsertResult> {
    const result: UpsertResult = { stored: [], pending: [], rejected: [] };
    const valid: RunWrite[] = [];
    const sessions = [...new Set(writes.flatMap((w) => (w.session_id ? [w.session_id] : [])))];
    const known = new Set(
      sessions.length === 0
        ? []
        : (await this.db.selectFrom('sessions').select('id').where('tenant_id', '=', tenantId).where('id', 'in', sessions).execute()).map((s) => s.id),
    );
    writes.forEach((write, index) => {
      const reason = invalidReason(write, known);
      if (reason) result.rejected.push({ index, id: String(write.id), reason });
      else valid.push(write);
    });
    const days = valid.filter((w) => w.op === 'create').map((w) => dayOf(toDate(w.start_time, 'start_time')));
    await this.ensurePartitions(days);

    if (valid.length === 0) return result;
    await this.db.transaction().execute(async (trx) => {
      // One writer per run at a time (concurrent batches carrying the same run), in a fixed
      // order so that two batches never wait on each other. One statement for the whole batch:
      // statements per run, not rows, were what limited ingest (docs/benchmarks.md, "Trace ingest").
      const ids = [...new Set(valid.map((w) => w.id))].sort();
      await sql`SELECT pg_advisory_xact_lock(hashtextextended(id, 7411)) FROM (SELECT id FROM unnest(${ids}::text[]) AS id ORDER BY id) AS locked`.execute(trx);
      const stored = await sql<RunKey & { id: string }>`SELECT id, tenant_id, start_time FROM run_keys WHERE id = ANY(${ids}::uuid[])`.execute(trx);
      const keys = new Map(stored.rows.map(({ id, ...key }) => [id, key]));
      for (const write of valid) {
        const outcome = await applyWrite(trx, tenantId, write, keys);
        if (outcome === 'foreign') {
          result.rejected.push({ index: writes.indexOf(write), id: write.id, reason: 'the run id belongs to another run (or another project)' });
        } else (outcome === 'stored' ? result.stored : result.pending).push(write.id);
      }
    });
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

/** Why a write cannot be stored, or undefined. */
function invalidReason(write: RunWrite, knownSessions: Set<string>): string | undefined {
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
  if (write.session_id && !knownSessions.has(write.session_id)) return `tracing project ${write.session_id} not found`;
  if (write.op === 'create') {
    const missing = (['session_id', 'name', 'run_type', 'start_time'] as const).filter((f) => write[f] == null);
    if (missing.length > 0) return `a new run needs ${missing.join(', ')}`;
    if (write.parent_run_id && !write.trace_id && !write.dotted_order) return 'a child run needs trace_id or dotted_order';
  }
  return undefined;
}

type Outcome = 'stored' | 'pending' | 'foreign';

/** Where a stored run lives (its run_keys row). */
interface RunKey {
  tenant_id: string;
  start_time: Date;
}

/** Applies one write; `keys` holds the batch's runs already stored, and gains the ones it creates. */
async function applyWrite(trx: Kysely<TraceTables>, tenantId: string, write: RunWrite, keys: Map<string, RunKey>): Promise<Outcome> {
  const key = keys.get(write.id);
  if (key && key.tenant_id !== tenantId) return 'foreign';
  if (key && write.scope_session_id) {
    const stored = await sql<{ session_id: string }>`SELECT session_id FROM runs WHERE id = ${write.id}::uuid AND start_time = ${key.start_time}`.execute(trx);
    if (stored.rows[0]?.session_id !== write.scope_session_id) return 'foreign';
  }
  if (key) {
    await mergeInto(trx, write, key.start_time, write.op === 'create' ? 'fill' : 'overwrite');
    return 'stored';
  }
  if (write.op === 'patch') {
    await sql`INSERT INTO pending_run_patches (run_id, tenant_id, patch) VALUES (${write.id}::uuid, ${tenantId}::uuid, ${JSON.stringify(write)}::jsonb)`.execute(
      trx,
    );
    return 'pending';
  }
  const startTime = toDate(write.start_time, 'start_time');
  const pending = await insertRun(trx, tenantId, write, startTime);
  keys.set(write.id, { tenant_id: tenantId, start_time: startTime });
  const ordered = [...pending].sort((a, b) => Number(a.seq) - Number(b.seq));
  for (const { patch } of ordered) {
    if (patch.scope_session_id && patch.scope_session_id !== write.session_id) continue;
    await mergeInto(trx, patch, startTime, 'overwrite');
  }
  return 'stored';
}

function derived(write: RunFields): RunFields {
  const filled = { ...write };
  if (filled.parent_run_ids == null && filled.dotted_order) filled.parent_run_ids = ancestorsFromDottedOrder(filled.dotted_order);
  if (filled.trace_id == null) {
    if (!filled.parent_run_id && !filled.dotted_order && (write as RunWrite).op === 'create') filled.trace_id = filled.id;
    else if (filled.dotted_order) filled.trace_id = filled.dotted_order.split('.')[0]!.slice(-36);
  }
  return filled;
}

function bound(column: RunColumn, value: unknown): RawBuilder<unknown> {
  return sql`${columnValue(column, value)}::${sql.raw(RUN_COLUMNS[column])}`;
}

/** Stores a new run (and its key) in one statement; returns the patches that were waiting for it. */
async function insertRun(trx: Kysely<TraceTables>, tenantId: string, write: RunWrite, startTime: Date): Promise<{ seq: string; patch: RunWrite }[]> {
  const run = derived(write);
  const values = RUN_COLUMN_NAMES.map((column) => {
    const value = run[column];
    if ((column === 'tags' || column === 'parent_run_ids') && value == null) return bound(column, []);
    return bound(column, value);
  });
  const { rows } = await sql<{ seq: string; patch: RunWrite }>`
    WITH new_key AS (INSERT INTO run_keys (id, tenant_id, start_time) VALUES (${write.id}::uuid, ${tenantId}::uuid, ${startTime.toISOString()}::timestamptz)),
      new_run AS (INSERT INTO runs (id, tenant_id, start_time, ${sql.join(RUN_COLUMN_NAMES.map((c) => sql.id(c)))})
        VALUES (${write.id}::uuid, ${tenantId}::uuid, ${startTime.toISOString()}::timestamptz, ${sql.join(values)}))
    DELETE FROM pending_run_patches WHERE run_id = ${write.id}::uuid AND tenant_id = ${tenantId}::uuid RETURNING seq, patch`.execute(trx);
  return rows;
}

/**
 * Merges the fields a write carries into the stored row: `fill` sets only what the row lacks (a
 * create), `overwrite` replaces what the write carries (a patch).
 */
async function mergeInto(trx: Kysely<TraceTables>, write: RunFields, startTime: Date, mode: 'fill' | 'overwrite'): Promise<void> {
  const run = derived(write);
  const sets = RUN_COLUMN_NAMES.filter((column) => run[column] != null).map((column) => {
    const col = sql.id(column);
    const value = bound(column, run[column]);
    const isArray = RUN_COLUMNS[column].endsWith('[]');
    if (mode === 'overwrite') return sql`${col} = ${value}`;
    return isArray ? sql`${col} = CASE WHEN cardinality(${col}) = 0 THEN ${value} ELSE ${col} END` : sql`${col} = COALESCE(${col}, ${value})`;
  });
  if (sets.length === 0) return;
  await sql`UPDATE runs SET ${sql.join([...sets, sql`updated_at = now()`])}
    WHERE id = ${write.id}::uuid AND start_time = ${startTime.toISOString()}::timestamptz`.execute(trx);
}
