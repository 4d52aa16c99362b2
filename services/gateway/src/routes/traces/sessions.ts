/**
 * LangSmith's project API (`/sessions…`): tracing projects of the caller's tenant, translated to
 * `TraceService` calls on the export-worker. Another tenant's project is a 404.
 */
import { timestampDate, timestampFromDate, type Session } from '@berth/proto';
import type { z } from 'zod';
import type { ExportWorkerClients } from '../../export-worker.js';
import { assertProjectAccess } from './scope.js';
import {
  CreateSessionIn,
  CreateSessionQuery,
  GetSessionQuery,
  ListSessionsQuery,
  SessionListOut,
  SessionOut,
  SessionPath,
  UpdateSessionIn,
} from './schemas.js';
import type { GatewayApi } from '../../access.js';

export function sessionJson(s: Session, withStats: boolean): z.input<typeof SessionOut> {
  return {
    id: s.id,
    tenant_id: s.tenantId,
    name: s.name,
    description: s.description ?? null,
    start_time: s.startTime ? timestampDate(s.startTime).toISOString() : new Date(0).toISOString(),
    end_time: s.endTime ? timestampDate(s.endTime).toISOString() : null,
    extra: JSON.parse(s.extraJson || '{}') as Record<string, unknown>,
    reference_dataset_id: s.referenceDatasetId ?? null,
    ...(withStats ? { run_count: Number(s.runCount), last_run_start_time: s.lastRunStartTime ? timestampDate(s.lastRunStartTime).toISOString() : null } : {}),
  };
}

const timeOf = (text: string | null | undefined) => (text ? { endTime: timestampFromDate(new Date(text)) } : {});

export function sessionRoutes(api: GatewayApi, deps: { exportWorker: ExportWorkerClients }): void {
  const tags = ['traces'];
  const rpc = () => deps.exportWorker.traces;

  api
    .route({
      method: 'post',
      path: '/sessions',
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
          upsert: query.upsert ?? false,
        });
        return sessionJson(answer.session!, false);
      },
    })
    .route({
      method: 'get',
      path: '/sessions',
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
        });
        return answer.sessions.map((s) => sessionJson(s, query.include_stats ?? false));
      },
    })
    .route({
      method: 'get',
      path: '/sessions/{session_id}',
      access: ['api_key', 'access_token', 'session', 'tracing_credential'],
      summary: 'Get a tracing project',
      tags,
      params: SessionPath,
      query: GetSessionQuery,
      response: SessionOut,
      errors: [403, 404, 503],
      handler: async ({ auth, params, query }) => {
        assertProjectAccess(auth, 'read', params.session_id);
        const answer = await rpc().getSession({ tenantId: auth.tenantId, id: params.session_id, includeStats: query.include_stats ?? false });
        return sessionJson(answer.session!, query.include_stats ?? false);
      },
    })
    .route({
      method: 'patch',
      path: '/sessions/{session_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Update a tracing project',
      description: 'Fields left out or null are not changed; `extra` replaces the whole object.',
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
        });
        return sessionJson(answer.session!, false);
      },
    })
    .route({
      method: 'delete',
      path: '/sessions/{session_id}',
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
}
