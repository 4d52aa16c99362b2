/**
 * LangSmith's project API (`/sessions…`): tracing projects of the caller's tenant, translated to
 * `TraceService` calls on the export-worker. Another tenant's project is a 404.
 */
import { timestampDate, timestampFromDate, type RunStats, type Session, type Timestamp } from '@berth/proto';
import { NotFoundError } from '@berth/errors';
import { devTracingProject, isUuid } from '@berth/ids';
import type { z } from 'zod';
import type { ExportWorkerClients } from '../../export-worker.js';
import { assertProjectAccess, scopedSessionIds } from './scope.js';
import { isoOf, utc } from './time.js';
import {
  CreateSessionIn,
  CreateSessionQuery,
  GetSessionQuery,
  ListSessionsQuery,
  ProjectStatsIn,
  ProjectStatsOut,
  RunStatsOut,
  SessionListOut,
  SessionOut,
  SessionPath,
  UpdateSessionIn,
} from './schemas.js';
import { ResolveSessionOut, ResolveSessionQuery } from './schemas-v2.js';
import { routeSpec, type GatewayApi } from '../../access.js';

/** Run stats in LangSmith's names (see RunStatsOut). */
function statsJson(stats: RunStats | undefined): z.input<typeof RunStatsOut> {
  const runCount = Number(stats?.runCount ?? 0n);
  return {
    run_count: runCount,
    error_rate: runCount > 0 ? Number(stats!.errorCount) / runCount : null,
    latency_p50: stats?.latencyP50 ?? null,
    latency_p99: stats?.latencyP99 ?? null,
    prompt_tokens: Number(stats?.promptTokens ?? 0n),
    completion_tokens: Number(stats?.completionTokens ?? 0n),
    total_tokens: Number(stats?.totalTokens ?? 0n),
    prompt_cost: stats?.promptCost ?? 0,
    completion_cost: stats?.completionCost ?? 0,
    total_cost: stats?.totalCost ?? 0,
    last_run_start_time: isoOf(stats?.lastRunStartTime) ?? null,
  };
}

export function sessionJson(s: Session, withStats: boolean): z.input<typeof SessionOut> {
  return {
    id: s.id,
    tenant_id: s.tenantId,
    name: s.name,
    description: s.description ?? null,
    start_time: isoOf(s.startTime) ?? new Date(0).toISOString(),
    end_time: isoOf(s.endTime) ?? null,
    extra: JSON.parse(s.extraJson || '{}') as Record<string, unknown>,
    reference_dataset_id: s.referenceDatasetId ?? null,
    trace_tier: s.traceTier === 'longlived' ? 'longlived' : 'shortlived',
    retention_days: s.retentionDays,
    ...(withStats ? statsJson(s.stats) : {}),
  };
}

const timeOf = (text: string | null | undefined) => (text ? { endTime: timestampFromDate(new Date(text)) } : {});

/** The stats range of a project read. */
const statsRange = (query: { stats_start_time?: string | undefined; stats_end_time?: string | undefined }) => ({
  ...(query.stats_start_time ? { statsStartTime: timestampFromDate(utc(query.stats_start_time)) } : {}),
  ...(query.stats_end_time ? { statsEndTime: timestampFromDate(utc(query.stats_end_time)) } : {}),
});

export function sessionRoutes(api: GatewayApi, deps: { exportWorker: ExportWorkerClients }): void {
  const tags = ['traces'];
  const rpc = () => deps.exportWorker.traces;

  // The classic client's paths (`/sessions…`) and the generated client's (`/api/v1/sessions…`,
  // `client.sessions.*`): one implementation of each.
  const createProject = routeSpec({
    method: 'post',
    access: ['api_key', 'access_token', 'session'],
    summary: 'Create a tracing project',
    description: 'Names are unique per tenant: 409 for a taken name, unless `upsert=true`, which answers the existing project.',
    tags,
    query: CreateSessionQuery,
    body: CreateSessionIn,
    status: 201,
    response: SessionOut,
    errors: [403, 409, 503],
    handler: async ({ auth, query, body }) => {
      assertProjectAccess(auth, 'create projects');
      const answer = await rpc().createSession({
        tenantId: auth.tenantId,
        id: body.id ?? '',
        name: body.name,
        ...(body.description != null ? { description: body.description } : {}),
        extraJson: JSON.stringify(body.extra ?? {}),
        ...(body.reference_dataset_id ? { referenceDatasetId: body.reference_dataset_id } : {}),
        ...timeOf(body.end_time),
        ...(body.trace_tier ? { traceTier: body.trace_tier } : {}),
        upsert: query.upsert ?? false,
      });
      return sessionJson(answer.session!, false);
    },
  });
  const listProjects = routeSpec({
    method: 'get',
    access: ['api_key', 'access_token', 'session', 'tracing_credential'],
    summary: 'List tracing projects',
    description: 'Newest first, `offset`/`limit` paging (a JSON array). `name` matches exactly, `name_contains` a substring.',
    tags,
    query: ListSessionsQuery,
    response: SessionListOut,
    errors: [503],
    handler: async ({ auth, query }) => {
      const requested = query.id === undefined ? [] : Array.isArray(query.id) ? query.id : [query.id];
      // A bound caller lists its own project, if the rest of the query matches it.
      const bound = auth.tracingProject;
      if (bound && requested.some((id) => id.toLowerCase() !== bound.id)) return [];
      const answer = await rpc().listSessions({
        tenantId: auth.tenantId,
        ids: bound ? [bound.id] : requested,
        name: query.name ?? '',
        nameContains: query.name_contains ?? '',
        referenceDatasetId: query.reference_dataset ?? '',
        limit: query.limit,
        offset: query.offset,
        includeStats: query.include_stats ?? false,
        ...statsRange(query),
      });
      return answer.sessions.map((s) => sessionJson(s, query.include_stats ?? false));
    },
  });
  const getProject = routeSpec({
    method: 'get',
    access: ['api_key', 'access_token', 'session', 'tracing_credential'],
    summary: 'Get a tracing project',
    tags,
    params: SessionPath,
    query: GetSessionQuery,
    response: SessionOut,
    errors: [403, 404, 503],
    handler: async ({ auth, params, query }) => {
      assertProjectAccess(auth, 'read', params.session_id);
      const answer = await rpc().getSession({
        tenantId: auth.tenantId,
        id: params.session_id,
        includeStats: query.include_stats ?? false,
        ...statsRange(query),
      });
      return sessionJson(answer.session!, query.include_stats ?? false);
    },
  });
  const updateProject = routeSpec({
    method: 'patch',
    access: ['api_key', 'access_token', 'session'],
    summary: 'Update a tracing project',
    description:
      'Fields left out or null are not changed; `extra` replaces the whole object. A new `trace_tier` applies to the traces that arrive after (each run keeps the tier it came with).',
    tags,
    params: SessionPath,
    body: UpdateSessionIn,
    response: SessionOut,
    errors: [403, 404, 409, 503],
    handler: async ({ auth, params, body }) => {
      assertProjectAccess(auth, 'change projects');
      const answer = await rpc().updateSession({
        tenantId: auth.tenantId,
        id: params.session_id,
        ...(body.name != null ? { name: body.name } : {}),
        ...(body.description != null ? { description: body.description } : {}),
        ...(body.extra != null ? { extraJson: JSON.stringify(body.extra) } : {}),
        ...timeOf(body.end_time),
        ...(body.trace_tier ? { traceTier: body.trace_tier } : {}),
      });
      return sessionJson(answer.session!, false);
    },
  });
  const deleteProject = routeSpec({
    method: 'delete',
    access: ['api_key', 'access_token', 'session'],
    summary: 'Delete a tracing project and its runs',
    tags,
    params: SessionPath,
    errors: [403, 404, 503],
    handler: async ({ auth, params }) => {
      assertProjectAccess(auth, 'delete projects');
      await rpc().deleteSession({ tenantId: auth.tenantId, id: params.session_id });
    },
  });
  api
    .route({ ...createProject, path: '/sessions' })
    .route({ ...listProjects, path: '/sessions' })
    .route({
      method: 'post',
      path: '/sessions/stats',
      access: ['api_key', 'access_token', 'session', 'tracing_credential'],
      summary: "Projects' run statistics over time (a Berth addition)",
      description:
        'For each project: run count, error rate, p50/p99 latency, tokens and cost over `[start_time, end_time)`, as ' +
        'totals and as a series of equal buckets covering the range (empty buckets included). LangSmith answers totals ' +
        'only (`include_stats` on `GET /sessions`, with `stats_start_time`); this adds the series and the end of the ' +
        'range. A project of another tenant is a 404; a bad filter is a 422 naming the position.',
      tags,
      body: ProjectStatsIn,
      response: ProjectStatsOut,
      errors: [403, 404, 503],
      handler: async ({ auth, body }) => {
        const answer = await rpc().projectStats({
          tenantId: auth.tenantId,
          sessionIds: scopedSessionIds(auth, body.session),
          ...(body.start_time ? { startTime: timestampFromDate(utc(body.start_time)) } : {}),
          ...(body.end_time ? { endTime: timestampFromDate(utc(body.end_time)) } : {}),
          bucketSeconds: body.bucket_seconds ?? 0,
          filter: body.filter ?? '',
          ...(body.is_root != null ? { isRoot: body.is_root } : {}),
        });
        return {
          start_time: isoOf(answer.startTime)!,
          end_time: isoOf(answer.endTime)!,
          bucket_seconds: answer.bucketSeconds,
          projects: answer.projects.map((p) => ({
            session_id: p.sessionId,
            stats: statsJson(p.totals),
            buckets: p.buckets.map((b) => ({ start_time: isoOf(b.startTime)!, stats: statsJson(b.stats) })),
          })),
        };
      },
    })
    .route({ ...getProject, path: '/sessions/{session_id}' })
    .route({ ...updateProject, path: '/sessions/{session_id}' })
    .route({ ...deleteProject, path: '/sessions/{session_id}' })
    .route({ ...createProject, path: '/api/v1/sessions' })
    .route({ ...listProjects, path: '/api/v1/sessions' });
  // Before `/api/v1/sessions/{session_id}`, which would take `resolutions` for an id.
  resolutionRoute(api, deps);
  api
    .route({ ...getProject, path: '/api/v1/sessions/{session_id}' })
    .route({ ...updateProject, path: '/api/v1/sessions/{session_id}' })
    .route({ ...deleteProject, path: '/api/v1/sessions/{session_id}' });
}

/**
 * `client.sessions.resolve()`: the project an address names. An AGENT is a deployment (its id the
 * deployment's name, its project named the same); its LOCAL environment is `berth dev`'s project
 * of that folder, `<name> (dev)`. An EXPERIMENT's id is its project's. Evaluator projects do not
 * exist here. Whatever the caller cannot read is a 404, as one that does not exist.
 */
function resolutionRoute(api: GatewayApi, deps: { exportWorker: ExportWorkerClients }): void {
  api.route({
    method: 'get',
    path: '/api/v1/sessions/resolutions',
    access: ['api_key', 'access_token', 'session', 'tracing_credential'],
    summary: 'The tracing project an address names (`client.sessions.resolve()`)',
    description:
      'AGENT: `id` is a deployment name; its project, or with `environment=LOCAL` the project `berth dev` traces that ' +
      'folder into (`<id> (dev)`). EXPERIMENT: `id` is the project id. EVALUATOR: none here (404).',
    tags: ['traces'],
    query: ResolveSessionQuery,
    response: ResolveSessionOut,
    errors: [404, 503],
    handler: async ({ auth, query }) => {
      const notFound = new NotFoundError('no tracing project has this address');
      if (!query.id || query.kind === 'EVALUATOR') throw notFound;
      let id: string | undefined;
      if (query.kind === 'EXPERIMENT') {
        if (!isUuid(query.id)) throw notFound;
        id = (await deps.exportWorker.traces.getSession({ tenantId: auth.tenantId, id: query.id })).session?.id;
      } else {
        const name = query.environment === 'LOCAL' ? devTracingProject(query.id) : query.id;
        const listed = await deps.exportWorker.traces.listSessions({ tenantId: auth.tenantId, name, limit: 1 });
        id = listed.sessions[0]?.id;
      }
      const bound = auth.tracingProject;
      if (!id || (bound && bound.id !== id)) throw notFound;
      return { session_id: id };
    },
  });
}
