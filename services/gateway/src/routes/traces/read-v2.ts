/**
 * The read API of the `langsmith` SDK's generated resource clients (`client.runs.query()`,
 * `client.runs.retrieve()`, `client.traces.*`, `client.threads.*`), as thin mappers over the same
 * `TraceService` calls as `/runs/query`: one query implementation, two wire shapes.
 *
 * What a caller may not see is absent, never refused by name: a project of another tenant, or of
 * another project than a tracing credential's own, reads as empty (queries) or 404 (by id), so a
 * caller learns nothing about what exists outside its reach.
 */
import type { Principal } from '@berth/auth';
import type { Clock } from '@berth/clock';
import { NotFoundError } from '@berth/errors';
import { isUuid } from '@berth/ids';
import { timestampDate, timestampFromDate, type QueryRunsRequestSchema, type RunStats, type ThreadSummary, type Timestamp } from '@berth/proto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { z } from 'zod';
import type { ExportWorkerClients } from '../../export-worker.js';
import {
  GetRunV2Query,
  QueryRunsV2In,
  QueryThreadsIn,
  QueryTracesIn,
  RunsV2Page,
  RunV2,
  RunV2Path,
  ThreadAggregateStatsIn,
  ThreadAggregateStatsOut,
  ThreadPath,
  ThreadsPage,
  ThreadStatsOut,
  ThreadStatsQuery,
  TracePath,
  TraceRunsOut,
  TraceRunsQuery,
  TracesPage,
  type PublicRunSelectField,
  type RunSelectField,
} from './schemas-v2.js';
import { isoOf, utc } from './time.js';
import type { GatewayApi } from '../../access.js';

export type Document = Record<string, unknown>;
type RunV2Out = z.input<typeof RunV2>;
export type QueryInit = Omit<Exclude<MessageInitShape<typeof QueryRunsRequestSchema>, { $typeName: string }>, 'tenantId' | '$typeName'>;

/** LangSmith's default read window: the day before now. */
const DEFAULT_WINDOW_MS = 86_400_000;
/** Items per page when the SDK names no page_size. */
const DEFAULT_PAGE = 20;
/** Most runs `GET /api/v2/traces/{id}/runs` answers (LangSmith keeps at most 25,000 per trace). */
export const MAX_TRACE_RUNS = 25_000;
/** Length of an inputs/outputs/error preview. */
const PREVIEW_CHARS = 200;

/** A field a v2 read selects: the private reads' and the public reads' (which add PARENT_RUN_ID). */
type AnySelect = RunSelectField | PublicRunSelectField;

/** The columns of the store's run shape each selectable field is made from. */
const SOURCES: Partial<Record<AnySelect, string[]>> = {
  ID: ['id'],
  NAME: ['name'],
  RUN_TYPE: ['run_type'],
  STATUS: ['status'],
  START_TIME: ['start_time'],
  END_TIME: ['end_time'],
  LATENCY_SECONDS: ['start_time', 'end_time'],
  FIRST_TOKEN_TIME: ['first_token_time'],
  ERROR: ['error'],
  ERROR_PREVIEW: ['error'],
  EXTRA: ['extra'],
  METADATA: ['extra'],
  EVENTS: ['events'],
  INPUTS: ['inputs'],
  INPUTS_PREVIEW: ['inputs'],
  OUTPUTS: ['outputs'],
  OUTPUTS_PREVIEW: ['outputs'],
  PARENT_RUN_ID: ['parent_run_id'],
  PARENT_RUN_IDS: ['parent_run_ids'],
  PROJECT_ID: ['session_id'],
  TRACE_ID: ['trace_id'],
  THREAD_ID: ['extra'],
  DOTTED_ORDER: ['dotted_order'],
  IS_ROOT: ['is_root'],
  REFERENCE_EXAMPLE_ID: ['reference_example_id'],
  TOTAL_TOKENS: ['total_tokens'],
  PROMPT_TOKENS: ['prompt_tokens'],
  COMPLETION_TOKENS: ['completion_tokens'],
  TOTAL_COST: ['total_cost'],
  PROMPT_COST: ['prompt_cost'],
  COMPLETION_COST: ['completion_cost'],
  TAGS: ['tags'],
  FEEDBACK_STATS: ['feedback_stats'],
};

/** The store columns to read for `selects` (only the id when none). */
export function columnsFor(selects: readonly AnySelect[] | undefined): string[] {
  return [...new Set(['id', ...(selects ?? []).flatMap((field) => SOURCES[field] ?? [])])];
}

const metadataOf = (doc: Document): Record<string, unknown> | undefined => {
  const metadata = (doc.extra as Document | null | undefined)?.metadata;
  return typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata) ? (metadata as Record<string, unknown>) : undefined;
};

/** The thread a run's metadata names, as LangSmith groups threads (same keys as the store's). */
export function threadOf(doc: Document): string | undefined {
  const metadata = metadataOf(doc);
  for (const key of ['thread_id', 'session_id', 'conversation_id']) {
    const value = metadata?.[key];
    if (typeof value === 'string' && value) return value;
  }
  return undefined;
}

function preview(value: unknown): string | undefined {
  if (value === null || value === undefined) return undefined;
  const values = typeof value === 'object' && !Array.isArray(value) ? Object.values(value) : [];
  const text = typeof value === 'string' ? value : values.length === 1 && typeof values[0] === 'string' ? values[0] : JSON.stringify(value);
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS - 1)}…` : text;
}

const upper = (value: unknown) => (typeof value === 'string' ? value.toUpperCase() : undefined);
const defined = (value: unknown) => (value === null ? undefined : value);

/** A run of the store's shape as the v2 API answers it: the fields selected, nulls left out. */
export function runV2(doc: Document, selects: readonly AnySelect[] | undefined): RunV2Out {
  const fields = new Set<AnySelect>(['ID', ...(selects ?? [])]);
  const value: Partial<Record<AnySelect, unknown>> = {
    ID: doc.id,
    NAME: doc.name,
    RUN_TYPE: upper(doc.run_type),
    STATUS: upper(doc.status),
    START_TIME: doc.start_time,
    END_TIME: doc.end_time,
    LATENCY_SECONDS:
      typeof doc.end_time === 'string' && typeof doc.start_time === 'string' ? (Date.parse(doc.end_time) - Date.parse(doc.start_time)) / 1000 : undefined,
    FIRST_TOKEN_TIME: doc.first_token_time,
    ERROR: doc.error,
    ERROR_PREVIEW: preview(doc.error),
    EXTRA: doc.extra,
    METADATA: metadataOf(doc),
    EVENTS: doc.events,
    INPUTS: doc.inputs,
    INPUTS_PREVIEW: preview(doc.inputs),
    OUTPUTS: doc.outputs,
    OUTPUTS_PREVIEW: preview(doc.outputs),
    PARENT_RUN_ID: doc.parent_run_id,
    PARENT_RUN_IDS: doc.parent_run_ids,
    PROJECT_ID: doc.session_id,
    TRACE_ID: doc.trace_id,
    THREAD_ID: threadOf(doc),
    DOTTED_ORDER: doc.dotted_order,
    IS_ROOT: doc.is_root,
    REFERENCE_EXAMPLE_ID: doc.reference_example_id,
    TOTAL_TOKENS: doc.total_tokens,
    PROMPT_TOKENS: doc.prompt_tokens,
    COMPLETION_TOKENS: doc.completion_tokens,
    TOTAL_COST: doc.total_cost,
    PROMPT_COST: doc.prompt_cost,
    COMPLETION_COST: doc.completion_cost,
    TAGS: doc.tags,
    FEEDBACK_STATS: doc.feedback_stats,
  };
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    const v = defined(value[field]);
    if (v !== undefined) out[field.toLowerCase()] = v;
  }
  return out as RunV2Out;
}

/** The requested projects the caller may read: a tracing credential sees its own alone. */
function visible(auth: Principal, ids: string[]): string[] {
  const lower = ids.map((id) => id.toLowerCase());
  const bound = auth.tracingProject;
  return bound ? lower.filter((id) => id === bound.id) : lower;
}

/** One project the caller may read, or NotFoundError as for one that does not exist. */
function visibleProject(auth: Principal, id: string): string {
  const [project] = visible(auth, isUuid(id) ? [id] : []);
  if (!project) throw new NotFoundError(`tracing project ${id} not found`);
  return project;
}

const ts = (text: string | undefined) => (text ? timestampFromDate(utc(text)) : undefined);

/** A page of runs in the store's shape. */
export async function runPage(exportWorker: ExportWorkerClients, tenantId: string, query: QueryInit) {
  const answer = await exportWorker.traces.queryRuns({ ...query, tenantId });
  return { docs: answer.runsJson.map((text) => JSON.parse(text) as Document), next: answer.nextCursor || null };
}

/** Every run matching, oldest first, at most MAX_TRACE_RUNS. */
export async function everyRun(exportWorker: ExportWorkerClients, tenantId: string, query: QueryInit): Promise<Document[]> {
  const docs: Document[] = [];
  let cursor = '';
  do {
    const page = await runPage(exportWorker, tenantId, { ...query, limit: 100, cursor, ascending: true });
    docs.push(...page.docs);
    cursor = page.next ?? '';
  } while (cursor && docs.length < MAX_TRACE_RUNS);
  return docs.slice(0, MAX_TRACE_RUNS);
}

export interface ReadV2Deps {
  exportWorker: ExportWorkerClients;
  clock: Clock;
}

export function readV2Routes(api: GatewayApi, deps: ReadV2Deps): void {
  const tags = ['traces'];
  const access = ['api_key', 'access_token', 'session', 'tracing_credential'] as const;
  const rpc = () => deps.exportWorker.traces;

  /** The start range of a read: LangSmith's default window is the day before now. */
  const window = (range: { min_start_time?: string | undefined; max_start_time?: string | undefined }) => {
    const end = range.max_start_time ? utc(range.max_start_time) : new Date(deps.clock.now());
    const start = range.min_start_time ? utc(range.min_start_time) : new Date(end.getTime() - DEFAULT_WINDOW_MS);
    return { startTime: timestampFromDate(start), endTime: timestampFromDate(end) };
  };

  const queryRuns = (auth: Principal, query: QueryInit) => runPage(deps.exportWorker, auth.tenantId, query);
  const allRuns = (auth: Principal, query: QueryInit) => everyRun(deps.exportWorker, auth.tenantId, query);

  /** A project's threads (see QueryThreads in traces.proto). */
  const threads = (
    auth: Principal,
    request: { sessionId: string; threadId?: string; filter?: string; limit?: number; cursor?: string; startTime?: Timestamp; endTime?: Timestamp },
  ) => rpc().queryThreads({ tenantId: auth.tenantId, ...request });

  api
    .route({
      method: 'post',
      path: '/api/v2/runs/query',
      access: [...access],
      summary: 'Query runs (`client.runs.query()`)',
      description:
        'The v2 shape of `POST /runs/query`: `{items, next_cursor}`, only the fields named in `selects` (the id when none), ' +
        'run_type and status in upper case. Runs of `project_ids` (or of the projects of `reference_dataset_id`) that ' +
        'started in [`min_start_time`, `max_start_time`), the day before now by default. Projects the caller cannot ' +
        'read add nothing. `ai_search` and feedback time bounds are not supported (422).',
      tags,
      body: QueryRunsV2In,
      response: RunsV2Page,
      errors: [503],
      handler: async ({ auth, body }) => {
        let projects = body.project_ids ?? [];
        if (body.reference_dataset_id) {
          const listed = await rpc().listSessions({ tenantId: auth.tenantId, referenceDatasetId: body.reference_dataset_id, limit: 100 });
          projects = listed.sessions.map((s) => s.id);
        }
        const sessionIds = visible(auth, projects);
        if (sessionIds.length === 0) return { items: [], next_cursor: null };
        const page = await queryRuns(auth, {
          sessionIds,
          ids: body.ids ?? [],
          traceId: body.trace_id ?? '',
          referenceExampleId: body.reference_examples?.[0] ?? '',
          runType: body.run_type?.toLowerCase() ?? '',
          ...(body.has_error !== undefined ? { error: body.has_error } : {}),
          ...(body.is_root !== undefined ? { isRoot: body.is_root } : {}),
          ...window(body),
          filter: body.filter ?? '',
          traceFilter: body.trace_filter ?? '',
          treeFilter: body.tree_filter ?? '',
          limit: body.page_size ?? DEFAULT_PAGE,
          cursor: body.cursor ?? '',
          select: columnsFor(body.selects),
        });
        return { items: page.docs.map((doc) => runV2(doc, body.selects)), next_cursor: page.next };
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/runs/{run_id}',
      access: [...access],
      summary: 'Get a run (`client.runs.retrieve()`)',
      description: 'The run of `project_id` with the fields named in `selects` (the id when none); a run of another project is a 404.',
      tags,
      params: RunV2Path,
      query: GetRunV2Query,
      response: RunV2,
      errors: [404, 503],
      handler: async ({ auth, params, query }) => {
        const project = visibleProject(auth, query.project_id);
        const answer = await rpc().getRun({ tenantId: auth.tenantId, id: params.run_id, sessionId: project });
        return runV2(JSON.parse(answer.runJson) as Document, query.selects);
      },
    })
    .route({
      method: 'post',
      path: '/api/v2/traces/query',
      access: [...access],
      summary: 'Query traces (`client.traces.query()`)',
      description:
        'Traces of `project_id` that started in [`min_start_time`, `max_start_time`) (the day before now by default), newest ' +
        'first: each its root run (the fields named in `selects`) and `trace_aggregates` — the tokens and cost of its llm runs ' +
        'and its first token time.',
      tags,
      body: QueryTracesIn,
      response: TracesPage,
      errors: [422, 503],
      handler: async ({ auth, body }) => {
        const sessionIds = visible(auth, [body.project_id]);
        if (sessionIds.length === 0) return { items: [], next_cursor: null };
        const page = await queryRuns(auth, {
          sessionIds,
          ids: body.trace_ids ?? [],
          isRoot: true,
          ...window(body),
          filter: body.trace_filter ?? '',
          treeFilter: body.tree_filter ?? '',
          limit: body.page_size ?? DEFAULT_PAGE,
          cursor: body.cursor ?? '',
          // The root carries its trace's roll-up (the sums of its llm runs) whatever the selects.
          select: [...columnsFor(body.selects), 'total_tokens', 'total_cost', 'first_token_time'],
        });
        const items = page.docs.map((root) => ({
          root_run: runV2(root, body.selects),
          trace_aggregates: {
            total_tokens: Number(root.total_tokens ?? 0),
            total_cost: Number(root.total_cost ?? 0),
            ...(typeof root.first_token_time === 'string' ? { first_token_time: root.first_token_time } : {}),
          },
        }));
        return { items, next_cursor: page.next };
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/traces/{trace_id}/runs',
      access: [...access],
      summary: "A trace's runs (`client.traces.listRuns()`)",
      description: `Every run of the trace in tree order, each after its parent (at most ${MAX_TRACE_RUNS}), the fields named in \`selects\`; a trace not in \`project_id\` is a 404.`,
      tags,
      params: TracePath,
      query: TraceRunsQuery,
      response: TraceRunsOut,
      errors: [404, 503],
      handler: async ({ auth, params, query }) => {
        const project = visibleProject(auth, query.project_id);
        if (!isUuid(params.trace_id)) throw new NotFoundError(`trace ${params.trace_id} not found`);
        const docs = await allRuns(auth, {
          sessionIds: [project],
          traceId: params.trace_id,
          filter: query.filter ?? '',
          ...(query.min_start_time ? { startTime: ts(query.min_start_time) } : {}),
          ...(query.max_start_time ? { endTime: ts(query.max_start_time) } : {}),
          select: [...columnsFor(query.selects), 'dotted_order'],
        });
        // Tree order: a run's dotted_order extends its parent's, so each comes after its parent
        // even when both started in the same millisecond.
        const order = (doc: Document) => String(doc.dotted_order ?? '');
        docs.sort((a, b) => (order(a) < order(b) ? -1 : order(a) > order(b) ? 1 : 0));
        // An unknown trace and one of another project or tenant read the same.
        if (docs.length === 0 && !query.filter) throw new NotFoundError(`trace ${params.trace_id} not found`);
        return { items: docs.map((doc) => runV2(doc, query.selects)) };
      },
    })
    .route({
      method: 'post',
      path: '/api/v2/threads/query',
      access: [...access],
      summary: 'Query threads (`client.threads.query()`)',
      description:
        "A project's traces grouped by the thread their metadata names (`thread_id`, else `session_id`, else " +
        '`conversation_id`), most recently active first, each with its turns, first and last trace, errors, latency, ' +
        'tokens and cost (of its llm runs). Counts the traces that started in [`min_start_time`, `max_start_time`), the ' +
        'day before now by default. `thread_filter`, `tree_filter` and `ai_search` are not supported (422).',
      tags,
      body: QueryThreadsIn,
      response: ThreadsPage,
      errors: [422, 503],
      handler: async ({ auth, body }) => {
        const [project] = visible(auth, [body.project_id]);
        if (!project) return { items: [], next_cursor: null };
        const answer = await threads(auth, {
          sessionId: project,
          filter: rootFilter(body),
          limit: body.page_size ?? DEFAULT_PAGE,
          cursor: body.cursor ?? '',
          ...window(body),
        }).catch(emptyWhenNotFound);
        if (!answer) return { items: [], next_cursor: null };
        return { items: answer.threads.map(threadV2), next_cursor: answer.nextCursor || null };
      },
    })
    .route({
      method: 'post',
      path: '/api/v2/threads/stats',
      access: [...access],
      summary: "Stats over a project's threads (`client.threads.aggregateStats()`)",
      description:
        'The stats named in `select` over every thread with a trace that started in [`min_start_time`, `max_start_time`) ' +
        '(the day before now by default): thread and trace counts, error rate (of traces), latency percentiles (of ' +
        'traces), tokens and cost.',
      tags,
      body: ThreadAggregateStatsIn,
      response: ThreadAggregateStatsOut,
      errors: [422, 503],
      handler: async ({ auth, body }) => {
        const [project] = visible(auth, [body.project_id]);
        const answer = project
          ? await threads(auth, { sessionId: project, filter: rootFilter(body), limit: 1, ...window(body) }).catch(emptyWhenNotFound)
          : undefined;
        const totals = answer?.totals;
        const traces = Number(totals?.stats?.runCount ?? 0n);
        const all: z.input<typeof ThreadAggregateStatsOut> = {
          thread_count: Number(answer?.threadCount ?? 0n),
          trace_count: traces,
          error_rate: traces > 0 ? Number(totals!.stats!.errorCount) / traces : 0,
          ...(totals?.stats?.latencyP50 !== undefined ? { latency_p50_seconds: totals.stats.latencyP50 } : {}),
          ...(totals?.stats?.latencyP99 !== undefined ? { latency_p99_seconds: totals.stats.latencyP99 } : {}),
          ...usageOf(totals?.stats),
        };
        return pick(all, body.select, {
          THREAD_COUNT: 'thread_count',
          TRACE_COUNT: 'trace_count',
          ERROR_RATE: 'error_rate',
          LATENCY_P50: 'latency_p50_seconds',
          LATENCY_P99: 'latency_p99_seconds',
        });
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/threads/{thread_id}/stats',
      access: [...access],
      summary: "One thread's stats (`client.threads.stats()`)",
      description: 'The stats named in `selects` over every trace of the thread in project `session_id`; a thread with no trace there is a 404.',
      tags,
      params: ThreadPath,
      query: ThreadStatsQuery,
      response: ThreadStatsOut,
      errors: [404, 503],
      handler: async ({ auth, params, query }) => {
        const project = visibleProject(auth, query.session_id);
        const answer = await threads(auth, { sessionId: project, threadId: params.thread_id, filter: query.filter ?? '', limit: 1 });
        const thread = answer.threads[0];
        if (!thread) throw new NotFoundError(`thread ${params.thread_id} not found`);
        const all: z.input<typeof ThreadStatsOut> = {
          turns: Number(thread.stats?.runCount ?? 0n),
          ...(thread.firstStartTime ? { first_start_time: isoOf(thread.firstStartTime) } : {}),
          ...(thread.stats?.lastRunStartTime ? { last_start_time: isoOf(thread.stats.lastRunStartTime) } : {}),
          ...(thread.lastEndTime ? { last_end_time: isoOf(thread.lastEndTime) } : {}),
          ...(thread.stats?.latencyP50 !== undefined ? { latency_p50_seconds: thread.stats.latencyP50 } : {}),
          ...(thread.stats?.latencyP99 !== undefined ? { latency_p99_seconds: thread.stats.latencyP99 } : {}),
          ...usageOf(thread.stats),
        };
        return pick(all, query.selects, { LATENCY_P50: 'latency_p50_seconds', LATENCY_P99: 'latency_p99_seconds' });
      },
    });
}

/** A thread read's filter on each trace's root run: `filter` and `trace_filter` mean that here, and both must hold. */
function rootFilter(body: { filter?: string | undefined; trace_filter?: string | undefined }): string {
  return body.filter && body.trace_filter ? `and(${body.filter}, ${body.trace_filter})` : (body.filter ?? body.trace_filter ?? '');
}

/** A project that is gone (or never was the tenant's) has no threads. */
function emptyWhenNotFound(error: unknown): undefined {
  if (error instanceof NotFoundError) return undefined;
  throw error;
}

function usageOf(t: RunStats | undefined) {
  return {
    prompt_tokens: Number(t?.promptTokens ?? 0n),
    completion_tokens: Number(t?.completionTokens ?? 0n),
    total_tokens: Number(t?.totalTokens ?? 0n),
    prompt_cost: t?.promptCost ?? 0,
    completion_cost: t?.completionCost ?? 0,
    total_cost: t?.totalCost ?? 0,
  };
}

/** The stats named: each select is its field in lower case unless `names` says otherwise. */
function pick<T extends Record<string, unknown>>(all: T, selects: readonly string[], names: Record<string, string>): Partial<T> {
  const out: Record<string, unknown> = {};
  for (const select of selects) {
    const field = names[select] ?? select.toLowerCase();
    if (all[field] !== undefined) out[field] = all[field];
  }
  return out as Partial<T>;
}

function threadV2(t: ThreadSummary): z.input<typeof ThreadsPage>['items'][number] {
  return {
    thread_id: t.threadId,
    count: Number(t.stats?.runCount ?? 0n),
    min_start_time: isoOf(t.firstStartTime)!,
    max_start_time: isoOf(t.stats?.lastRunStartTime)!,
    start_time: isoOf(t.firstStartTime)!,
    first_trace_id: t.firstTraceId,
    last_trace_id: t.lastTraceId,
    trace_id: t.lastTraceId,
    num_errored_turns: Number(t.stats?.errorCount ?? 0n),
    ...(t.stats?.latencyP50 !== undefined ? { latency_p50: t.stats.latencyP50 } : {}),
    ...(t.stats?.latencyP99 !== undefined ? { latency_p99: t.stats.latencyP99 } : {}),
    total_tokens: Number(t.stats?.totalTokens ?? 0n),
    total_cost: t.stats?.totalCost ?? 0,
  };
}
