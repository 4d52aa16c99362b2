/**
 * The gRPC face of the trace store: `berth.exportworker.v1.TraceService`. Ids that cannot be ids
 * are NOT_FOUND here (as an unknown one is), filters that do not parse are validation errors
 * with `loc: ['body', <field>]`, the gateway's 422.
 */
import type { Clock } from '@berth/clock';
import { NotFoundError, RequestValidationError } from '@berth/errors';
import { isUuid } from '@berth/ids';
import {
  RunOperationKind,
  ShareKind,
  type SharedSubject,
  TraceService,
  timestampDate,
  timestampFromDate,
  type RunStatsSchema,
  type SessionSchema,
  type ThreadSummarySchema,
  type Timestamp,
} from '@berth/proto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { ServiceImplementation } from '@berth/rpc';
import { FilterSyntaxError, parseFilter, type FilterNode } from '../filter/parse.js';
import type { TraceIngest } from './ingest.js';
import { recordIngest } from '../metrics.js';
import { runDocument } from './run-document.js';
import { decodeCursor, encodeCursor, type RunQuery } from './run-query.js';
import { bucketSecondsFor, EMPTY_STATS, MAX_BUCKETS, type RunStats } from './run-stats.js';
import { decodeThreadCursor, encodeThreadCursor, type ThreadRow } from './run-threads.js';
import type { ShareSubject, TraceShares } from './trace-shares.js';
import type { SessionRow, TraceStore } from './trace-store.js';
import { TRACE_TIERS, type RetentionPolicy, type TraceTier } from './retention.js';

type SessionMessage = MessageInitShape<typeof SessionSchema>;
type RunStatsMessage = MessageInitShape<typeof RunStatsSchema>;
type ThreadMessage = MessageInitShape<typeof ThreadSummarySchema>;

/** Largest page of runs or projects one call answers. */
export const MAX_PAGE = 100;
/** The stats range when no start is given: the day before the end. */
const DEFAULT_STATS_RANGE_MS = 86_400_000;
/** Longest stats range (its automatic bucket size stays a 32-bit count of seconds). */
const MAX_STATS_RANGE_MS = 3650 * 86_400_000;

function statsMessage(stats: RunStats): RunStatsMessage {
  return {
    runCount: BigInt(stats.run_count),
    errorCount: BigInt(stats.error_count),
    ...(stats.latency_p50 !== null ? { latencyP50: stats.latency_p50 } : {}),
    ...(stats.latency_p99 !== null ? { latencyP99: stats.latency_p99 } : {}),
    promptTokens: BigInt(stats.prompt_tokens),
    completionTokens: BigInt(stats.completion_tokens),
    totalTokens: BigInt(stats.total_tokens),
    promptCost: stats.prompt_cost,
    completionCost: stats.completion_cost,
    totalCost: stats.total_cost,
    ...(stats.last_run_start_time ? { lastRunStartTime: timestampFromDate(stats.last_run_start_time) } : {}),
  };
}

function threadMessage(row: ThreadRow): ThreadMessage {
  return {
    threadId: row.thread_id,
    stats: statsMessage(row.stats),
    firstStartTime: timestampFromDate(row.first_start_time),
    ...(row.last_end_time ? { lastEndTime: timestampFromDate(row.last_end_time) } : {}),
    firstTraceId: row.first_trace_id,
    lastTraceId: row.last_trace_id,
  };
}

function sessionMessage(policy: RetentionPolicy, row: SessionRow, stats?: RunStats): SessionMessage {
  // Projects made before `extra` existed, or by writers that set metadata only.
  const extra = Object.keys(row.extra ?? {}).length > 0 || Object.keys(row.metadata ?? {}).length === 0 ? row.extra : { metadata: row.metadata };
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    ...(row.description !== null ? { description: row.description } : {}),
    extraJson: JSON.stringify(extra ?? {}),
    ...(row.reference_dataset_id ? { referenceDatasetId: row.reference_dataset_id } : {}),
    startTime: timestampFromDate(row.created_at),
    ...(row.end_time ? { endTime: timestampFromDate(row.end_time) } : {}),
    ...(stats ? { stats: statsMessage(stats) } : {}),
    traceTier: row.trace_tier ?? policy.settings(row.tenant_id).defaultTier,
    retentionDays: policy.days(row.tenant_id, row.trace_tier),
  };
}

/** A trace tier a request names, or undefined when it names none. */
function tierOf(text: string | undefined): TraceTier | undefined {
  if (!text) return undefined;
  if (!(TRACE_TIERS as readonly string[]).includes(text)) throw invalid('trace_tier', `must be one of ${TRACE_TIERS.join(', ')}`);
  return text as TraceTier;
}

/** The trace or thread a share request names. */
function targetOf(r: { target?: SharedSubject | undefined }): SharedSubject {
  if (!r.target) throw invalid('target', 'name the trace or thread');
  return r.target;
}

function uuidOrNotFound(id: string, what: string): string {
  if (!isUuid(id)) throw new NotFoundError(`${what} ${id} not found`);
  return id.toLowerCase();
}

function invalid(field: string, msg: string): RequestValidationError {
  return new RequestValidationError([{ loc: ['body', field], msg, type: 'value_error' }]);
}

function uuidField(field: string, value: string): string {
  if (!isUuid(value)) throw invalid(field, 'must be a UUID');
  return value.toLowerCase();
}

/** A filter of the request, parsed; its errors point at the request field. */
function filterOf(field: string, text: string): FilterNode | undefined {
  if (!text) return undefined;
  try {
    return parseFilter(text);
  } catch (error) {
    if (error instanceof FilterSyntaxError)
      throw new RequestValidationError(
        error.issues.map((i) => ({ ...i, loc: ['body', field] })),
        { cause: error },
      );
    throw error;
  }
}

function extraOf(text: string | undefined): Record<string, unknown> | undefined {
  if (!text) return undefined;
  const value: unknown = JSON.parse(text);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid('extra', 'must be an object');
  return value as Record<string, unknown>;
}

const dateOf = (t: Timestamp | undefined) => (t ? timestampDate(t) : undefined);

/** `clock` gives the default end of a stats range (now). */
export function traceHandlers(
  store: TraceStore,
  ingest: TraceIngest,
  shares: TraceShares,
  clock: Clock,
  policy: RetentionPolicy,
): ServiceImplementation<typeof TraceService> {
  /** The shared subject a request names, once its trace or thread is known to be there. */
  const shareSubject = async (r: Pick<SharedSubject, 'tenantId' | 'sessionId' | 'kind' | 'subject'>): Promise<ShareSubject> => {
    const sessionId = uuidOrNotFound(r.sessionId, 'tracing project');
    if (r.kind === ShareKind.TRACE) {
      const run = await store.getRun(r.tenantId, uuidOrNotFound(r.subject, 'trace'), sessionId);
      if (!run.is_root) throw new NotFoundError(`trace ${r.subject} not found`);
      return { sessionId, kind: 'trace', subject: run.id };
    }
    if (r.kind !== ShareKind.THREAD || !r.subject) throw invalid('kind', 'must name a trace or a thread');
    await store.getSession(r.tenantId, sessionId);
    const page = await store.queryThreads(r.tenantId, { sessionId, threadId: r.subject, limit: 1 });
    if (page.threads.length === 0) throw new NotFoundError(`thread ${r.subject} not found`);
    return { sessionId, kind: 'thread', subject: r.subject };
  };
  /** Rows with their stats over [start, end) when asked for. */
  const withStats = async (tenantId: string, rows: SessionRow[], r: { includeStats: boolean; statsStartTime?: Timestamp; statsEndTime?: Timestamp }) => {
    if (!r.includeStats) return rows.map((row) => sessionMessage(policy, row));
    const stats = await store.projectStats(tenantId, {
      sessionIds: rows.map((row) => row.id),
      ...(r.statsStartTime ? { start: timestampDate(r.statsStartTime) } : {}),
      ...(r.statsEndTime ? { end: timestampDate(r.statsEndTime) } : {}),
    });
    return rows.map((row) => sessionMessage(policy, row, stats.get(row.id)?.totals ?? EMPTY_STATS));
  };
  return {
    ingestRuns: async (r) => {
      const result = await ingest.ingest(
        r.tenantId,
        r.operations.map((op) => ({
          kind: op.kind === RunOperationKind.PATCH ? 'patch' : 'create',
          runJson: op.runJson,
          fieldJson: { ...op.fieldJson },
          ...(op.id ? { id: op.id } : {}),
        })),
        r.project?.id ? { id: r.project.id, name: r.project.name } : undefined,
      );
      recordIngest(result);
      return { storedIds: result.stored, pendingIds: result.pending, refused: result.rejected };
    },
    getRun: async (r) => {
      const id = uuidOrNotFound(r.id, 'run');
      const run = await store.getRun(r.tenantId, id, r.sessionId || undefined);
      return { runJson: JSON.stringify(runDocument(run)) };
    },
    queryRuns: async (r) => {
      const limit = r.limit || MAX_PAGE;
      if (limit < 1 || limit > MAX_PAGE) throw invalid('limit', `must be 1-${MAX_PAGE}`);
      const after = r.cursor ? decodeCursor(r.cursor) : undefined;
      if (r.cursor && !after) throw invalid('cursor', 'is not a cursor of this API (pass back cursors.next as it came)');
      const query: RunQuery = {
        sessionIds: r.sessionIds.map((id) => uuidField('session', id)),
        ids: r.ids.map((id) => uuidField('id', id)),
        ...(r.traceId ? { traceId: uuidField('trace', r.traceId) } : {}),
        ...(r.parentRunId ? { parentRunId: uuidField('parent_run', r.parentRunId) } : {}),
        ...(r.referenceExampleId ? { referenceExampleId: uuidField('reference_example', r.referenceExampleId) } : {}),
        ...(r.runType ? { runType: r.runType } : {}),
        ...(r.error !== undefined ? { error: r.error } : {}),
        ...(r.isRoot !== undefined ? { isRoot: r.isRoot } : {}),
        ...(r.threadId ? { threadId: r.threadId } : {}),
        ...(r.startTime ? { start: timestampDate(r.startTime) } : {}),
        ...(r.endTime ? { end: timestampDate(r.endTime) } : {}),
        ...(r.query ? { search: { kind: 'search' as const, field: null, value: r.query } } : {}),
        ascending: r.ascending,
        limit,
        ...(after ? { after } : {}),
        // Only what the page shows is read: a table of names and times must not load every run's inputs.
        ...(r.select.length > 0 ? { columns: r.select } : {}),
      };
      const filters = {
        filter: filterOf('filter', r.filter),
        traceFilter: filterOf('trace_filter', r.traceFilter),
        treeFilter: filterOf('tree_filter', r.treeFilter),
      };
      for (const [key, node] of Object.entries(filters)) if (node) (query as unknown as Record<string, unknown>)[key] = node;
      const page = await store.queryRuns(r.tenantId, query);
      const select = r.select.length > 0 ? new Set(['id', ...r.select]) : undefined;
      const documents = page.runs.map((run) => {
        const document = runDocument(run);
        return select ? Object.fromEntries(Object.entries(document).filter(([field]) => select.has(field))) : document;
      });
      return { runsJson: documents.map((document) => JSON.stringify(document)), nextCursor: page.next ? encodeCursor(page.next) : '' };
    },
    createSession: async (r) => {
      const input = {
        ...(r.id ? { id: uuidField('id', r.id) } : {}),
        name: r.name,
        ...(r.description !== undefined ? { description: r.description } : {}),
        extra: extraOf(r.extraJson) ?? {},
        ...(r.referenceDatasetId ? { reference_dataset_id: uuidField('reference_dataset_id', r.referenceDatasetId) } : {}),
        ...(r.endTime ? { end_time: timestampDate(r.endTime) } : {}),
        ...(r.traceTier ? { trace_tier: tierOf(r.traceTier) } : {}),
      };
      if (r.upsert) {
        const { session, created } = await store.ensureSession(r.tenantId, input);
        return { session: sessionMessage(policy, session), created };
      }
      return { session: sessionMessage(policy, await store.createSession(r.tenantId, input)), created: true };
    },
    getSession: async (r) => {
      const row = await store.getSession(r.tenantId, uuidOrNotFound(r.id, 'tracing project'));
      return { session: (await withStats(r.tenantId, [row], r))[0]! };
    },
    listSessions: async (r) => {
      const limit = r.limit || MAX_PAGE;
      if (limit < 1 || limit > MAX_PAGE || r.offset < 0) throw invalid('limit', `limit must be 1-${MAX_PAGE} and offset at least 0`);
      const ids = r.ids.filter(isUuid);
      // Ids asked for that cannot exist match nothing, rather than every project.
      if (r.ids.length > 0 && ids.length === 0) return { sessions: [] };
      const rows = await store.listSessions(r.tenantId, {
        ...(ids.length > 0 ? { ids } : {}),
        ...(r.name ? { name: r.name } : {}),
        ...(r.nameContains ? { nameContains: r.nameContains } : {}),
        ...(r.referenceDatasetId ? { referenceDatasetId: uuidField('reference_dataset', r.referenceDatasetId) } : {}),
        limit,
        offset: r.offset,
      });
      return { sessions: await withStats(r.tenantId, rows, r) };
    },
    updateSession: async (r) => {
      const extra = extraOf(r.extraJson);
      const row = await store.updateSession(r.tenantId, uuidOrNotFound(r.id, 'tracing project'), {
        ...(r.name !== undefined ? { name: r.name } : {}),
        ...(r.description !== undefined ? { description: r.description } : {}),
        ...(extra ? { extra } : {}),
        ...(r.endTime ? { end_time: dateOf(r.endTime)! } : {}),
        ...(r.traceTier ? { trace_tier: tierOf(r.traceTier) } : {}),
      });
      return { session: sessionMessage(policy, row) };
    },
    projectStats: async (r) => {
      if (r.sessionIds.length === 0 || r.sessionIds.length > MAX_PAGE) throw invalid('session', `must name 1-${MAX_PAGE} projects`);
      const ids = [...new Set(r.sessionIds.map((id) => uuidOrNotFound(id, 'tracing project')))];
      const found = await store.listSessions(r.tenantId, { ids, limit: ids.length, offset: 0 });
      const missing = ids.find((id) => !found.some((row) => row.id === id));
      if (missing) throw new NotFoundError(`tracing project ${missing} not found`);
      const end = r.endTime ? timestampDate(r.endTime) : new Date(clock.now());
      const start = r.startTime ? timestampDate(r.startTime) : new Date(end.getTime() - DEFAULT_STATS_RANGE_MS);
      const rangeMs = end.getTime() - start.getTime();
      if (rangeMs <= 0) throw invalid('end_time', 'must be after start_time');
      if (rangeMs > MAX_STATS_RANGE_MS) throw invalid('start_time', 'the range may span at most 10 years');
      const bucketSeconds = r.bucketSeconds || bucketSecondsFor(rangeMs);
      const count = Math.ceil(rangeMs / 1000 / bucketSeconds);
      if (bucketSeconds < 1 || count > MAX_BUCKETS) throw invalid('bucket_seconds', `the range would have ${count} buckets; at most ${MAX_BUCKETS}`);
      const filter = filterOf('filter', r.filter);
      const stats = await store.projectStats(r.tenantId, {
        sessionIds: ids,
        start,
        end,
        bucketSeconds,
        ...(filter ? { filter } : {}),
        ...(r.isRoot !== undefined ? { isRoot: r.isRoot } : {}),
      });
      return {
        startTime: timestampFromDate(start),
        endTime: timestampFromDate(end),
        bucketSeconds,
        projects: ids.map((id) => {
          const project = stats.get(id);
          return {
            sessionId: id,
            totals: statsMessage(project?.totals ?? EMPTY_STATS),
            buckets: Array.from({ length: count }, (_, index) => ({
              startTime: timestampFromDate(new Date(start.getTime() + index * bucketSeconds * 1000)),
              stats: statsMessage(project?.buckets.get(index) ?? EMPTY_STATS),
            })),
          };
        }),
      };
    },
    queryThreads: async (r) => {
      const limit = r.limit || MAX_PAGE;
      if (limit < 1 || limit > MAX_PAGE) throw invalid('limit', `must be 1-${MAX_PAGE}`);
      const after = r.cursor ? decodeThreadCursor(r.cursor) : undefined;
      if (r.cursor && !after) throw invalid('cursor', 'is not a cursor of this API (pass back next_cursor as it came)');
      // The project must be the tenant's: another tenant's is as unknown as one that never was.
      const session = await store.getSession(r.tenantId, uuidOrNotFound(r.sessionId, 'tracing project'));
      const filter = filterOf('filter', r.filter);
      const page = await store.queryThreads(r.tenantId, {
        sessionId: session.id,
        ...(r.startTime ? { start: timestampDate(r.startTime) } : {}),
        ...(r.endTime ? { end: timestampDate(r.endTime) } : {}),
        ...(r.threadId ? { threadId: r.threadId } : {}),
        ...(filter ? { filter } : {}),
        limit,
        ...(after ? { after } : {}),
      });
      return {
        threads: page.threads.map(threadMessage),
        nextCursor: page.next ? encodeThreadCursor(page.next) : '',
        ...(page.totals ? { totals: threadMessage(page.totals) } : {}),
        threadCount: BigInt(page.threadCount),
      };
    },
    share: async (r) => {
      const target = targetOf(r);
      return { shareToken: await shares.share(target.tenantId, await shareSubject(target)) };
    },
    getShare: async (r) => {
      const target = targetOf(r);
      const token = await shares.token(target.tenantId, await shareSubject(target));
      if (!token) throw new NotFoundError('not shared');
      return { shareToken: token };
    },
    unshare: async (r) => {
      const target = r.target;
      // Revoking needs no run to be there still: a deleted trace's link goes too.
      if (!target || !isUuid(target.sessionId) || (target.kind !== ShareKind.TRACE && target.kind !== ShareKind.THREAD)) return {};
      const trace = target.kind === ShareKind.TRACE;
      await shares.unshare(target.tenantId, {
        sessionId: target.sessionId.toLowerCase(),
        kind: trace ? 'trace' : 'thread',
        subject: trace ? target.subject.toLowerCase() : target.subject,
      });
      return {};
    },
    resolveShare: async (r) => {
      const found = r.shareToken ? await shares.resolve(r.shareToken) : undefined;
      if (!found) throw new NotFoundError('no such share link');
      const kind = found.kind === 'trace' ? ShareKind.TRACE : ShareKind.THREAD;
      return { target: { tenantId: found.tenantId, sessionId: found.sessionId, kind, subject: found.subject } };
    },
    validateFilter: (r) => {
      for (const [field, text] of Object.entries(r.filters)) filterOf(field, text);
      return Promise.resolve({});
    },
    deleteSession: async (r) => ({ deletedRuns: BigInt(await store.deleteSession(r.tenantId, uuidOrNotFound(r.id, 'tracing project'))) }),
  };
}
