/**
 * Feedback on runs (LangSmith's `/feedback`), in the trace store's schema. Each write of a run's
 * feedback recomputes that run's `feedback_stats` column (per key: count, average and spread of the
 * scores, counts of string values) in the same transaction, so the run document, the filter
 * language (`eq(feedback_key, …)`, `gt(feedback_score, …)`) and bulk exports read the stats as any
 * other run column. Writes of one run's feedback are serialised (an advisory lock on the run), so
 * the stats and the per-run quota never miss a concurrent write.
 */
import { sql, type Kysely } from '@berth/db';
import { ConflictError, isBerthError, NotFoundError, RequestValidationError, ResourceExhaustedError } from '@berth/errors';
import { isUuid } from '@berth/ids';
import { randomUUID } from 'node:crypto';
import type { TraceTables } from './trace-store.js';

export interface FeedbackLimits {
  /**
   * Most feedback one run may carry (more is refused: RESOURCE_EXHAUSTED, the gateway's 429).
   * @default 1000
   */
  maxPerRun: number;
  /**
   * Largest comment, in UTF-8 bytes.
   * @default 65536
   */
  maxCommentBytes: number;
  /**
   * Largest `value`, `correction` or `feedback_source.metadata`, as JSON text.
   * @default 65536
   */
  maxValueBytes: number;
  /**
   * Longest key, in characters.
   * @default 200
   */
  maxKeyLength: number;
  /**
   * Most feedback of one tenant waiting for runs that have not arrived (more is refused: 429).
   * @default 10000
   */
  maxPendingPerTenant: number;
}

export const DEFAULT_FEEDBACK_LIMITS: FeedbackLimits = {
  maxPerRun: 1000,
  maxCommentBytes: 65_536,
  maxValueBytes: 65_536,
  maxKeyLength: 200,
  maxPendingPerTenant: 10_000,
};

/** Feedback as stored and answered, in LangSmith's shape. */
export interface FeedbackDocument {
  id: string;
  created_at: string;
  modified_at: string;
  run_id: string;
  /** Null while the feedback waits for its run. */
  trace_id: string | null;
  /** Null while the feedback waits for its run. */
  session_id: string | null;
  key: string;
  score: number | null;
  value: unknown;
  comment: string | null;
  correction: unknown;
  feedback_source: { type: string; metadata: Record<string, unknown>; user_id: null };
  comparative_experiment_id: string | null;
  feedback_group_id: string | null;
  extra: null;
}

/** A new feedback, checked. */
interface FeedbackCreate {
  id: string;
  run_id: string;
  session_id?: string;
  key: string;
  score: number | null;
  value: unknown;
  comment: string | null;
  correction: unknown;
  source: { type: string; metadata: Record<string, unknown> };
  comparative_experiment_id: string | null;
  feedback_group_id: string | null;
}

/** Fields an update sets (a field absent is kept; null clears it). */
type FeedbackUpdate = Partial<Pick<FeedbackCreate, 'score' | 'value' | 'comment' | 'correction'>>;

export interface FeedbackList {
  sessionIds: string[];
  runIds: string[];
  keys: string[];
  sourceTypes: string[];
  hasComment?: boolean;
  hasScore?: boolean;
  limit: number;
  offset: number;
}

interface FeedbackRow {
  id: string;
  tenant_id: string;
  run_id: string;
  run_start_time: Date;
  trace_id: string;
  session_id: string;
  key: string;
  score: number | null;
  value: unknown;
  comment: string | null;
  correction: unknown;
  feedback_source: { type?: string; metadata?: Record<string, unknown> };
  comparative_experiment_id: string | null;
  feedback_group_id: string | null;
  created_at: Date;
  modified_at: Date;
}

/** A bad field of a feedback (the whole body when `field` is empty). */
function invalid(field: string, msg: string): RequestValidationError {
  return new RequestValidationError([{ loc: field ? ['body', field] : ['body'], msg, type: 'value_error' }]);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The feedback as a document of the API. */
function documentOf(
  row: Omit<FeedbackRow, 'run_start_time' | 'trace_id' | 'session_id'> & { trace_id: string | null; session_id: string | null },
): FeedbackDocument {
  return {
    id: row.id,
    created_at: row.created_at.toISOString(),
    modified_at: row.modified_at.toISOString(),
    run_id: row.run_id,
    trace_id: row.trace_id,
    session_id: row.session_id,
    key: row.key,
    score: row.score,
    value: row.value ?? null,
    comment: row.comment,
    correction: row.correction ?? null,
    feedback_source: { type: row.feedback_source.type ?? 'api', metadata: row.feedback_source.metadata ?? {}, user_id: null },
    comparative_experiment_id: row.comparative_experiment_id,
    feedback_group_id: row.feedback_group_id,
    extra: null,
  };
}

/** A feedback not stored yet, as a row (without its run's place, trace and project, or times). */
function rowOf(tenantId: string, f: FeedbackCreate): Omit<FeedbackRow, 'run_start_time' | 'trace_id' | 'session_id' | 'created_at' | 'modified_at'> {
  return {
    id: f.id,
    tenant_id: tenantId,
    run_id: f.run_id,
    key: f.key,
    score: f.score,
    value: f.value,
    comment: f.comment,
    correction: f.correction,
    feedback_source: f.source,
    comparative_experiment_id: f.comparative_experiment_id,
    feedback_group_id: f.feedback_group_id,
  };
}

/** A JSON value as a jsonb parameter (SQL NULL for absent or null). */
const jsonb = (value: unknown) => (value === undefined || value === null ? sql`NULL::jsonb` : sql`${JSON.stringify(value)}::jsonb`);

export class FeedbackStore {
  private readonly limits: FeedbackLimits;

  constructor(
    private readonly db: Kysely<TraceTables>,
    limits: Partial<FeedbackLimits> = {},
  ) {
    this.limits = { ...DEFAULT_FEEDBACK_LIMITS, ...limits };
  }

  /**
   * Stores a feedback on a run of the tenant (of `scope` when given). A retry of the same feedback
   * (same id, same run) answers the stored one; an id taken by another feedback is a conflict. A
   * run no tenant has yet is waited for ({@link attachPending}): the answer then has no trace or
   * project yet.
   */
  async create(tenantId: string, scope: string | undefined, input: unknown): Promise<FeedbackDocument> {
    const feedback = this.parseCreate(input);
    const stored = await this.db.transaction().execute(async (trx) => {
      await lockRuns(trx, [feedback.run_id]);
      const run = await locateRun(trx, tenantId, feedback.run_id, scope ?? feedback.session_id);
      if (run) return this.insert(trx, tenantId, feedback, run);
      await this.holdPending(trx, tenantId, scope ?? feedback.session_id, feedback);
      return undefined;
    });
    if (stored) return stored;
    // The run may have been stored since this looked, and its ingest may have looked for waiting
    // feedback before this one was committed: look again, now that it is.
    await this.attachPending(tenantId, [feedback.run_id]);
    const now = new Date();
    return documentOf({ ...rowOf(tenantId, feedback), trace_id: null, session_id: null, created_at: now, modified_at: now });
  }

  /**
   * Stores the feedback that waited for these runs of the tenant (call it once they are stored).
   * Answers the feedback that could still not be stored (over the run's quota, out of its scope).
   * Cheap when nothing waits: one indexed read, then nothing (see {@link create} for why a read
   * without the runs' locks misses nothing).
   */
  async attachPending(tenantId: string, runIds: string[]): Promise<{ attached: number; dropped: { id: string; reason: string }[] }> {
    const outcome = { attached: 0, dropped: [] as { id: string; reason: string }[] };
    const ids = runIds.map((id) => id.toLowerCase());
    if (ids.length === 0) return outcome;
    const waiting = await sql`SELECT 1 FROM pending_feedback WHERE tenant_id = ${tenantId}::uuid AND run_id = ANY(${ids}::uuid[]) LIMIT 1`.execute(this.db);
    if (waiting.rows.length === 0) return outcome;
    return this.db.transaction().execute(async (trx) => {
      await lockRuns(trx, ids);
      // Only feedback whose run now exists (under any tenant: on another's, it is dropped as out of reach).
      const { rows } = await sql<{ id: string; run_id: string; scope_session_id: string | null; feedback: FeedbackCreate; received_at: Date }>`
        DELETE FROM pending_feedback p USING run_keys k
        WHERE p.tenant_id = ${tenantId}::uuid AND p.run_id = ANY(${ids}::uuid[]) AND k.id = p.run_id
        RETURNING p.id, p.run_id, p.scope_session_id, p.feedback, p.received_at`.execute(trx);
      for (const row of rows.sort((a, b) => a.received_at.getTime() - b.received_at.getTime())) {
        try {
          const run = await locateRun(trx, tenantId, row.run_id, row.scope_session_id ?? undefined);
          if (!run) throw new NotFoundError(`run ${row.run_id} not found`);
          await this.insert(trx, tenantId, row.feedback, run);
          outcome.attached++;
        } catch (error) {
          if (!isBerthError(error)) throw error;
          outcome.dropped.push({ id: row.id, reason: error.message });
        }
      }
      return outcome;
    });
  }

  /** Deletes feedback that waited longer than `maxAgeMs` for its run; answers how many went. */
  async sweepPending(maxAgeMs: number): Promise<number> {
    const result = await sql`DELETE FROM pending_feedback WHERE received_at < now() - make_interval(secs => ${maxAgeMs / 1000})`.execute(this.db);
    return Number(result.numAffectedRows ?? 0n);
  }

  /** Stores a feedback on a run located and locked by the caller. */
  private async insert(trx: Kysely<TraceTables>, tenantId: string, feedback: FeedbackCreate, run: LocatedRun): Promise<FeedbackDocument> {
    const existing = await selectFeedback(trx, feedback.id);
    if (existing) {
      if (existing.tenant_id === tenantId && existing.run_id === feedback.run_id) return documentOf(existing);
      throw new ConflictError(`feedback ${feedback.id} already exists`);
    }
    const count = await sql<{ n: string }>`SELECT count(*) AS n FROM feedback WHERE run_id = ${feedback.run_id}::uuid`.execute(trx);
    if (Number(count.rows[0]!.n) >= this.limits.maxPerRun)
      throw new ResourceExhaustedError(`run ${feedback.run_id} already has ${this.limits.maxPerRun} feedback, the most one run may have`);
    const { rows } = await sql<FeedbackRow>`INSERT INTO feedback (id, tenant_id, run_id, run_start_time, trace_id, session_id, key, score, value,
        comment, correction, feedback_source, comparative_experiment_id, feedback_group_id)
      VALUES (${feedback.id}::uuid, ${tenantId}::uuid, ${feedback.run_id}::uuid, ${run.start_time}, ${run.trace_id}::uuid, ${run.session_id}::uuid,
        ${feedback.key}, ${feedback.score}, ${jsonb(feedback.value)}, ${feedback.comment}, ${jsonb(feedback.correction)},
        ${JSON.stringify(feedback.source)}::jsonb, ${feedback.comparative_experiment_id}::uuid, ${feedback.feedback_group_id}::uuid)
      ON CONFLICT (id) DO NOTHING RETURNING *`.execute(trx);
    // Another tenant's feedback took the id between the check and the insert.
    if (!rows[0]) throw new ConflictError(`feedback ${feedback.id} already exists`);
    await updateStats(trx, feedback.run_id, run.start_time);
    return documentOf(rows[0]);
  }

  /** Keeps a feedback until its run arrives, within the tenant's allowance of waiting feedback. */
  private async holdPending(trx: Kysely<TraceTables>, tenantId: string, scope: string | undefined, feedback: FeedbackCreate): Promise<void> {
    const waiting = await sql<{ n: string }>`SELECT count(*) AS n FROM pending_feedback WHERE tenant_id = ${tenantId}::uuid`.execute(trx);
    if (Number(waiting.rows[0]!.n) >= this.limits.maxPendingPerTenant)
      throw new ResourceExhaustedError(
        `${this.limits.maxPendingPerTenant} feedback already wait for runs that have not arrived; send the runs first (or wait for them to be stored)`,
      );
    await sql`INSERT INTO pending_feedback (id, tenant_id, run_id, scope_session_id, feedback)
      VALUES (${feedback.id}::uuid, ${tenantId}::uuid, ${feedback.run_id}::uuid, ${scope ?? null}::uuid, ${JSON.stringify(feedback)}::jsonb)
      ON CONFLICT (id) DO NOTHING`.execute(trx);
  }

  async get(tenantId: string, scope: string | undefined, id: string): Promise<FeedbackDocument> {
    return documentOf(await this.find(this.db, tenantId, scope, id));
  }

  /** The tenant's feedback, newest first. */
  async list(tenantId: string, list: FeedbackList): Promise<FeedbackDocument[]> {
    const conditions = [sql`tenant_id = ${tenantId}::uuid`];
    if (list.sessionIds.length > 0) conditions.push(sql`session_id = ANY(${list.sessionIds}::uuid[])`);
    if (list.runIds.length > 0) conditions.push(sql`run_id = ANY(${list.runIds}::uuid[])`);
    if (list.keys.length > 0) conditions.push(sql`key = ANY(${list.keys}::text[])`);
    if (list.sourceTypes.length > 0) conditions.push(sql`feedback_source->>'type' = ANY(${list.sourceTypes}::text[])`);
    if (list.hasComment !== undefined) conditions.push(list.hasComment ? sql`comment IS NOT NULL` : sql`comment IS NULL`);
    if (list.hasScore !== undefined) conditions.push(list.hasScore ? sql`score IS NOT NULL` : sql`score IS NULL`);
    const { rows } = await sql<FeedbackRow>`SELECT * FROM feedback WHERE ${sql.join(conditions, sql` AND `)}
      ORDER BY created_at DESC, id DESC LIMIT ${list.limit} OFFSET ${list.offset}`.execute(this.db);
    return rows.map(documentOf);
  }

  async update(tenantId: string, scope: string | undefined, id: string, input: unknown): Promise<FeedbackDocument> {
    const update = this.parseUpdate(input);
    return this.withRunLocked(tenantId, scope, id, async (trx, row) => {
      const sets = Object.entries(update).map(([field, value]) =>
        field === 'value' || field === 'correction' ? sql`${sql.id(field)} = ${jsonb(value)}` : sql`${sql.id(field)} = ${value}`,
      );
      const { rows } = await sql<FeedbackRow>`UPDATE feedback SET ${sql.join([...sets, sql`modified_at = now()`])}
        WHERE id = ${id}::uuid RETURNING *`.execute(trx);
      await updateStats(trx, row.run_id, row.run_start_time);
      return documentOf(rows[0]!);
    });
  }

  async delete(tenantId: string, scope: string | undefined, id: string): Promise<void> {
    await this.withRunLocked(tenantId, scope, id, async (trx, row) => {
      await sql`DELETE FROM feedback WHERE id = ${id}::uuid`.execute(trx);
      await updateStats(trx, row.run_id, row.run_start_time);
    });
  }

  /** Runs `work` on a feedback of the tenant with its run's writes locked. */
  private async withRunLocked<T>(
    tenantId: string,
    scope: string | undefined,
    id: string,
    work: (trx: Kysely<TraceTables>, row: FeedbackRow) => Promise<T>,
  ): Promise<T> {
    return this.db.transaction().execute(async (trx) => {
      const before = await this.find(trx, tenantId, scope, id);
      await lockRuns(trx, [before.run_id]);
      // Read again under the lock: a concurrent delete may have come first.
      return work(trx, await this.find(trx, tenantId, scope, id));
    });
  }

  private async find(db: Kysely<TraceTables>, tenantId: string, scope: string | undefined, id: string): Promise<FeedbackRow> {
    const row = isUuid(id) ? await selectFeedback(db, id.toLowerCase()) : undefined;
    if (!row || row.tenant_id !== tenantId || (scope !== undefined && row.session_id !== scope)) throw new NotFoundError(`feedback ${id} not found`);
    return row;
  }

  /** A new feedback from what a client sent; fields this store does not keep are ignored. */
  private parseCreate(input: unknown): FeedbackCreate {
    if (!isObject(input)) throw invalid('', 'must be a JSON object');
    const uuidOf = (field: string, required: boolean): string | null => {
      const value = input[field];
      if (value === undefined || value === null) {
        if (required) throw invalid(field, field === 'run_id' ? 'is required: feedback on a project without a run is not supported' : 'is required');
        return null;
      }
      if (typeof value !== 'string' || !isUuid(value)) throw invalid(field, 'must be a UUID');
      return value.toLowerCase();
    };
    const key = input.key;
    if (typeof key !== 'string' || key.length === 0 || key.length > this.limits.maxKeyLength)
      throw invalid('key', `must be a string of 1-${this.limits.maxKeyLength} characters`);
    const source = input.feedback_source ?? {};
    if (!isObject(source)) throw invalid('feedback_source', 'must be an object');
    const type = source.type ?? 'api';
    if (typeof type !== 'string' || type.length > 100) throw invalid('feedback_source.type', 'must be a string of at most 100 characters');
    const metadata = source.metadata ?? {};
    if (!isObject(metadata)) throw invalid('feedback_source.metadata', 'must be an object');
    this.checkJson('feedback_source.metadata', metadata);
    const sessionId = uuidOf('session_id', false);
    return {
      id: uuidOf('id', false) ?? randomUUID(),
      run_id: uuidOf('run_id', true)!,
      ...(sessionId ? { session_id: sessionId } : {}),
      key,
      score: null,
      value: null,
      comment: null,
      correction: null,
      ...this.parseUpdate(Object.fromEntries(Object.entries(input).filter(([field]) => UPDATABLE.has(field)))),
      source: { type, metadata },
      comparative_experiment_id: uuidOf('comparative_experiment_id', false),
      feedback_group_id: uuidOf('feedback_group_id', false),
    };
  }

  private parseUpdate(input: unknown): FeedbackUpdate {
    if (!isObject(input)) throw invalid('', 'must be a JSON object');
    const update: FeedbackUpdate = {};
    for (const [field, value] of Object.entries(input)) {
      if (value === undefined) continue;
      switch (field) {
        case 'score':
          if (value !== null && typeof value !== 'boolean' && !(typeof value === 'number' && Number.isFinite(value)))
            throw invalid('score', 'must be a number, a boolean or null');
          update.score = typeof value === 'boolean' ? Number(value) : value;
          break;
        case 'comment':
          if (value !== null && typeof value !== 'string') throw invalid('comment', 'must be a string or null');
          if (typeof value === 'string' && Buffer.byteLength(value) > this.limits.maxCommentBytes)
            throw invalid('comment', `is longer than ${this.limits.maxCommentBytes} bytes`);
          update.comment = value;
          break;
        case 'value':
        case 'correction':
          this.checkJson(field, value);
          update[field] = value;
          break;
      }
    }
    return update;
  }

  private checkJson(field: string, value: unknown): void {
    if (JSON.stringify(value ?? null).length > this.limits.maxValueBytes) throw invalid(field, `is larger than ${this.limits.maxValueBytes} bytes as JSON`);
  }
}

const UPDATABLE = new Set(['score', 'value', 'comment', 'correction']);

async function selectFeedback(db: Kysely<TraceTables>, id: string): Promise<FeedbackRow | undefined> {
  return (await sql<FeedbackRow>`SELECT * FROM feedback WHERE id = ${id}::uuid`.execute(db)).rows[0];
}

/**
 * One writer of a run's feedback at a time (its stats and quota depend on all of it), taken in a
 * fixed order so that two writers never wait on each other.
 */
async function lockRuns(trx: Kysely<TraceTables>, runIds: string[]): Promise<void> {
  const ids = [...new Set(runIds.map((id) => id.toLowerCase()))].sort();
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(id, 7412)) FROM (SELECT id FROM unnest(${ids}::text[]) AS id ORDER BY id) AS locked`.execute(trx);
}

interface LocatedRun {
  start_time: Date;
  trace_id: string;
  session_id: string;
}

/**
 * The run feedback is given on, or undefined when no tenant has a run of this id (yet). A run of
 * another tenant, or outside `sessionId` when given, is a NotFoundError.
 */
async function locateRun(db: Kysely<TraceTables>, tenantId: string, runId: string, sessionId: string | undefined): Promise<LocatedRun | undefined> {
  const { rows } = await sql<LocatedRun & { tenant_id: string }>`SELECT k.tenant_id, r.start_time, r.trace_id, r.session_id
    FROM run_keys k JOIN runs r ON r.id = k.id AND r.start_time = k.start_time
    WHERE k.id = ${runId}::uuid`.execute(db);
  const run = rows[0];
  if (!run) return undefined;
  if (run.tenant_id !== tenantId || (sessionId !== undefined && run.session_id !== sessionId)) throw new NotFoundError(`run ${runId} not found`);
  return run;
}

/**
 * Recomputes a run's `feedback_stats` from its feedback, in LangSmith's shape: per key `n` (how
 * many), `avg` and `stdev` of the scores (null without scores), and `values` (how many gave each
 * string value). NULL when the run has no feedback left.
 */
async function updateStats(trx: Kysely<TraceTables>, runId: string, startTime: Date): Promise<void> {
  await sql`UPDATE runs SET feedback_stats = (
      SELECT json_object_agg(s.key, json_build_object('n', s.n, 'avg', s.avg, 'stdev', s.stdev, 'values', s.vals) ORDER BY s.key)
      FROM (
        SELECT f.key, count(*) AS n, avg(f.score) AS avg, stddev_pop(f.score) AS stdev,
          COALESCE((SELECT json_object_agg(v.value, v.c) FROM (
            SELECT g.value #>> '{}' AS value, count(*) AS c FROM feedback g
            WHERE g.run_id = f.run_id AND g.key = f.key AND jsonb_typeof(g.value) = 'string' GROUP BY 1) v), '{}'::json) AS vals
        FROM feedback f WHERE f.run_id = ${runId}::uuid GROUP BY f.run_id, f.key) s
    ), updated_at = now()
    WHERE id = ${runId}::uuid AND start_time = ${startTime}`.execute(trx);
}
