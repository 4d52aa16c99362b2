/**
 * /assistants — versioned configurations of a graph.
 *
 * Authorization events (custom auth): create → `assistants:create`; search and count →
 * `assistants:search`; get, versions, schemas and graph → `assistants:read`; patch and /latest →
 * `assistants:update`; delete → `assistants:delete`. An assistant outside the handler's filter is
 * a 404 (a create with its id a 409).
 */
import { randomUUID } from 'node:crypto';
import { RequestValidationError } from '@berth/errors';
import { z } from 'zod';
import { metadataOf, type RequestAuth } from '../auth/index.js';
import type { JsonObject } from '../storage/sql.js';
import type { ServerContext } from './context.js';
import {
  Assistant,
  AssistantCount,
  AssistantCreate,
  AssistantLatest,
  AssistantPatch,
  AssistantPath,
  AssistantSearch,
  AssistantVersion,
  AssistantVersions,
  GraphDrawing,
  GraphSchemas,
  Selected,
  Subgraphs,
  assistantJson,
  assistantVersionJson,
} from './schemas.js';
import type { AgentApi } from './access.js';

const SubgraphsQuery = z.strictObject({ recurse: z.enum(['true', 'false']).optional() });

export function assistantRoutes(api: AgentApi, ctx: ServerContext): void {
  const tags = ['assistants'];
  /** The assistant `ref` names, if the handler for `assistants:read` lets the user see it. */
  const readable = async (auth: RequestAuth, ref: string) =>
    ctx.resolveAssistant(ref, (await ctx.authz.authorize(auth, 'assistants:read', { assistant_id: ref })).filter);

  api
    .route({
      method: 'post',
      path: '/assistants',
      access: ['custom_auth'],
      summary: 'Create an assistant',
      tags,
      body: AssistantCreate,
      response: Assistant,
      errors: [404, 409],
      handler: async ({ body, auth }) => {
        const graph = ctx.graph(body.graph_id);
        if (body.context) checkContext(ctx, graph.graphId, body.context, ['body', 'context']);
        const request = {
          assistant_id: body.assistant_id ?? randomUUID(),
          graph_id: body.graph_id,
          name: body.name ?? 'Untitled',
          description: body.description ?? null,
          config: (body.config ?? {}) as JsonObject,
          context: (body.context ?? {}) as JsonObject,
          metadata: (body.metadata ?? {}) as JsonObject,
          if_exists: body.if_exists,
        };
        const { filter, value } = await ctx.authz.authorize(auth, 'assistants:create', request);
        return assistantJson(await ctx.assistants.create({ ...request, metadata: metadataOf(value, 'assistants:create') }, filter));
      },
    })
    .route({
      method: 'post',
      path: '/assistants/search',
      access: ['custom_auth'],
      summary: 'Search assistants',
      tags,
      body: AssistantSearch,
      response: Selected(Assistant),
      handler: async ({ body, res, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'assistants:search', { ...body });
        const query = { ...body, metadata: body.metadata as JsonObject | undefined, filter };
        const found = await ctx.assistants.search(query);
        const total = await ctx.assistants.count(query);
        res.setHeader('X-Pagination-Total', String(total));
        if (body.offset + found.length < total) res.setHeader('X-Pagination-Next', String(body.offset + found.length));
        return found.map((a) => select(assistantJson(a), body.select));
      },
    })
    .route({
      method: 'post',
      path: '/assistants/count',
      access: ['custom_auth'],
      summary: 'Count assistants',
      tags,
      body: AssistantCount,
      response: z.number().int(),
      handler: async ({ body, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'assistants:search', { ...body });
        return ctx.assistants.count({ ...body, metadata: body.metadata as JsonObject | undefined, filter });
      },
    })
    .route({
      method: 'get',
      path: '/assistants/{assistant_id}',
      access: ['custom_auth'],
      summary: 'Get an assistant',
      tags,
      params: AssistantPath,
      response: Assistant,
      errors: [404],
      handler: async ({ params, auth }) => assistantJson(await readable(auth, params.assistant_id)),
    })
    .route({
      method: 'patch',
      path: '/assistants/{assistant_id}',
      access: ['custom_auth'],
      summary: 'Update an assistant: creates version N+1 and makes it active',
      description: '`context` is the complete new configuration; nothing is merged from earlier versions. `metadata` is merged.',
      tags,
      params: AssistantPath,
      body: AssistantPatch,
      response: Assistant,
      errors: [404],
      handler: async ({ params, body, auth }) => {
        const request = { assistant_id: params.assistant_id, ...body };
        const { filter, value } = await ctx.authz.authorize(auth, 'assistants:update', request);
        const current = await ctx.resolveAssistant(params.assistant_id, filter);
        const graphId = body.graph_id ?? current.graph_id;
        ctx.graph(graphId);
        if (body.context) checkContext(ctx, graphId, body.context, ['body', 'context']);
        const metadata = value.metadata === undefined ? undefined : metadataOf(value, 'assistants:update');
        return assistantJson(
          await ctx.assistants.patch(
            current.assistant_id,
            { ...body, config: body.config as JsonObject | undefined, context: body.context as JsonObject | undefined, metadata },
            filter,
          ),
        );
      },
    })
    .route({
      method: 'delete',
      path: '/assistants/{assistant_id}',
      access: ['custom_auth'],
      summary: 'Delete an assistant with all its versions',
      tags,
      params: AssistantPath,
      query: z.strictObject({ delete_threads: z.enum(['true', 'false']).optional() }),
      errors: [404],
      handler: async ({ params, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'assistants:delete', { assistant_id: params.assistant_id });
        const assistant = await ctx.resolveAssistant(params.assistant_id, filter);
        await ctx.assistants.delete(assistant.assistant_id, filter);
      },
    })
    .route({
      method: 'post',
      path: '/assistants/{assistant_id}/latest',
      access: ['custom_auth'],
      summary: 'Make a version the active one: later runs use its context',
      tags,
      params: AssistantPath,
      body: AssistantLatest,
      response: Assistant,
      errors: [404],
      handler: async ({ params, body, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'assistants:update', { assistant_id: params.assistant_id, version: body.version });
        const assistant = await ctx.resolveAssistant(params.assistant_id, filter);
        return assistantJson(await ctx.assistants.setLatest(assistant.assistant_id, body.version, filter));
      },
    })
    .route({
      method: 'post',
      path: '/assistants/{assistant_id}/versions',
      access: ['custom_auth'],
      summary: 'List versions, newest first',
      tags,
      params: AssistantPath,
      body: AssistantVersions,
      response: z.array(AssistantVersion),
      errors: [404],
      handler: async ({ params, body, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'assistants:read', { assistant_id: params.assistant_id });
        const assistant = await ctx.resolveAssistant(params.assistant_id, filter);
        const versions = await ctx.assistants.versions(assistant.assistant_id, { ...body, metadata: body.metadata as JsonObject | undefined }, filter);
        return versions.map(assistantVersionJson);
      },
    })
    .route({
      method: 'get',
      path: '/assistants/{assistant_id}/schemas',
      access: ['custom_auth'],
      summary: "JSON Schemas of the assistant's graph",
      tags,
      params: AssistantPath,
      response: GraphSchemas,
      errors: [404],
      handler: async ({ params, auth }) => {
        const assistant = await readable(auth, params.assistant_id);
        return ctx.schemas(assistant.graph_id);
      },
    })
    .route({
      method: 'get',
      path: '/assistants/{assistant_id}/subgraphs',
      access: ['custom_auth'],
      summary: "JSON Schemas of the subgraphs of the assistant's graph, by namespace",
      tags,
      params: AssistantPath,
      query: SubgraphsQuery,
      response: Subgraphs,
      errors: [404],
      handler: async ({ params, query, auth }) => ctx.subgraphs(await readable(auth, params.assistant_id), undefined, query.recurse === 'true'),
    })
    .route({
      method: 'get',
      path: '/assistants/{assistant_id}/subgraphs/{namespace}',
      access: ['custom_auth'],
      summary: 'JSON Schemas of the subgraphs under a namespace (`node` or `node|inner`)',
      tags,
      params: AssistantPath.extend({ namespace: z.string().min(1) }),
      query: SubgraphsQuery,
      response: Subgraphs,
      errors: [404],
      handler: async ({ params, query, auth }) => ctx.subgraphs(await readable(auth, params.assistant_id), params.namespace, query.recurse === 'true'),
    })
    .route({
      method: 'get',
      path: '/assistants/{assistant_id}/graph',
      access: ['custom_auth'],
      summary: "Nodes and edges of the assistant's graph",
      tags,
      params: AssistantPath,
      query: z.strictObject({
        xray: z
          .string()
          .regex(/^(true|false|\d+)$/)
          .optional(),
      }),
      response: GraphDrawing,
      errors: [404],
      handler: async ({ params, query, auth }) => {
        const assistant = await readable(auth, params.assistant_id);
        const xray = query.xray === undefined || query.xray === 'false' ? false : query.xray === 'true' ? true : Number(query.xray);
        return ctx.drawing(assistant, xray);
      },
    });
}

/** Refuses context keys the graph's context schema does not define (422). */
export function checkContext(ctx: ServerContext, graphId: string, context: Record<string, unknown>, loc: (string | number)[]): void {
  const problems = ctx.contextProblems(graphId, context);
  if (problems.length) {
    throw new RequestValidationError(problems.map((p) => ({ loc: [...loc, ...p.path], msg: p.message, type: p.type })));
  }
}

function select<T extends Record<string, unknown>>(row: T, fields: string[] | undefined): Partial<T> {
  if (!fields?.length) return row;
  return Object.fromEntries(Object.entries(row).filter(([k]) => fields.includes(k))) as Partial<T>;
}
