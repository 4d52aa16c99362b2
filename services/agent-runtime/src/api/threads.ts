/**
 * /threads — durable conversation state: CRUD, search, copy, prune, state, history.
 *
 * Authorization events (custom auth): create → `threads:create`; search and count →
 * `threads:search`; get, copy, state and history reads and the thread's stream → `threads:read`;
 * patch and state updates → `threads:update`; delete and prune → `threads:delete` (prune: once
 * for the whole request, its filter applied to each thread: those outside it are not pruned). A
 * thread outside the handler's filter is a 404.
 */
import { randomUUID } from 'node:crypto';
import { RequestValidationError } from '@berth/errors';
import { z } from 'zod';
import { Uuid } from '@berth/ids';
import { metadataOf, type RequestAuth } from '../auth/index.js';
import type { JsonObject } from '../storage/sql.js';
import type { Thread as ThreadRow } from '../storage/threads.js';
import type { ServerContext } from './context.js';
import {
  CheckpointBody,
  Flag,
  JsonObject as JsonObjectSchema,
  Selected,
  StateUpdateResult,
  Thread,
  ThreadCount,
  ThreadCreate,
  ThreadPatch,
  ThreadPath,
  ThreadSearch,
  ThreadState,
  UserData,
  iso,
  threadJson,
} from './schemas.js';
import { threadStreamRoutes } from './thread-stream.js';
import type { AgentApi } from './access.js';

/** Most threads one `POST /threads/prune` names. */
export const MAX_PRUNE_IDS = 1000;

const PruneBody = z.strictObject({
  thread_ids: z.array(Uuid).min(1).max(MAX_PRUNE_IDS),
  strategy: z.enum(['delete', 'keep_latest']).default('delete'),
});

/** A thread's JSON with its `ttl` (GET `?include=ttl`). */
function withTtl(thread: ThreadRow) {
  const json = threadJson(thread);
  if (!thread.ttl_strategy || thread.ttl_minutes === null) return json;
  return { ...json, ttl: { strategy: thread.ttl_strategy, ttl: thread.ttl_minutes, expires_at: iso(thread.expires_at) } };
}

const StateUpdate = z.strictObject({
  /** State values to write: the graph's own shape (checked against its channels). */
  values: UserData.optional(),
  as_node: z.string().optional(),
  checkpoint: CheckpointBody.nullable().optional(),
  checkpoint_id: z.string().optional(),
});
const HistoryBody = z.strictObject({
  limit: z.number().int().min(1).max(1000).default(10),
  /** A checkpoint id, a checkpoint, or a config naming one (`{configurable: {...}}`: what the JS SDK's `before` is typed as). */
  before: z.union([z.string(), CheckpointBody, z.strictObject({ configurable: CheckpointBody })]).optional(),
  metadata: JsonObjectSchema.optional(),
  checkpoint: CheckpointBody.optional(),
  select: z.array(z.string()).optional(),
});

export function threadRoutes(api: AgentApi, ctx: ServerContext): void {
  const tags = ['threads'];
  /** The filter of the handler for `threads:read` on a thread. */
  const readable = async (auth: RequestAuth, threadId: string) => (await ctx.authz.authorize(auth, 'threads:read', { thread_id: threadId })).filter;

  api
    .route({
      method: 'post',
      path: '/threads',
      access: ['custom_auth'],
      summary: 'Create a thread',
      tags,
      body: ThreadCreate,
      response: Thread,
      errors: [409],
      handler: async ({ body, auth }) => {
        const request = {
          thread_id: body.thread_id ?? randomUUID(),
          metadata: (body.metadata ?? {}) as JsonObject,
          if_exists: body.if_exists,
          ...(body.ttl ? { ttl: { strategy: body.ttl.strategy, ttl: body.ttl.minutes } } : {}),
        };
        const { filter, value } = await ctx.authz.authorize(auth, 'threads:create', request);
        if (body.supersteps?.length) {
          const graphId = body.metadata?.graph_id;
          if (typeof graphId !== 'string') {
            throw new RequestValidationError([
              { loc: ['body', 'metadata', 'graph_id'], msg: 'supersteps need the graph of the thread: set metadata.graph_id', type: 'missing' },
            ]);
          }
          await ctx.state.checkSupersteps(ctx.graph(graphId).graphId, body.supersteps);
        }
        const { ttl: _asAuthSeesIt, ...created } = request;
        const thread = await ctx.threads.create({ ...created, metadata: metadataOf(value, 'threads:create'), ...(body.ttl ? { ttl: body.ttl } : {}) }, filter);
        if (!body.supersteps?.length) return threadJson(thread);
        // The thread's first checkpoints, e.g. another thread's history replayed (needs metadata.graph_id).
        const update = await ctx.authz.authorize(auth, 'threads:update', { thread_id: thread.thread_id });
        await ctx.state.bulkUpdate(thread.thread_id, body.supersteps, update.filter).catch(async (error: unknown) => {
          // Refused supersteps leave no thread behind (unless it was there before: if_exists do_nothing).
          if (body.if_exists === 'raise') await ctx.threads.delete(thread.thread_id);
          throw error;
        });
        return threadJson(await ctx.threads.get(thread.thread_id, update.filter));
      },
    })
    .route({
      method: 'post',
      path: '/threads/search',
      access: ['custom_auth'],
      summary: 'Search threads',
      tags,
      body: ThreadSearch,
      response: Selected(Thread),
      handler: async ({ body, res, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'threads:search', { ...body });
        const query = { ...body, metadata: body.metadata as JsonObject | undefined, values: body.values as JsonObject | undefined, filter };
        const [found, total] = await Promise.all([ctx.threads.search(query), ctx.threads.count(query)]);
        res.setHeader('X-Pagination-Total', String(total));
        if (body.offset + found.length < total) res.setHeader('X-Pagination-Next', String(body.offset + found.length));
        return found.map((t) => {
          const json = threadJson(t);
          return body.select?.length ? Object.fromEntries(Object.entries(json).filter(([k]) => body.select!.includes(k))) : json;
        });
      },
    })
    .route({
      method: 'post',
      path: '/threads/prune',
      access: ['custom_auth'],
      summary: 'Prune threads: delete them, or keep only their latest checkpoint (keep_latest)',
      description:
        `At most ${MAX_PRUNE_IDS} ids per call. Threads that do not exist, that custom auth hides, or that have a pending or running run ` +
        '(cancel it first) are left as they are and not counted.',
      tags,
      body: PruneBody,
      response: z.strictObject({ pruned_count: z.number().int() }),
      handler: async ({ body, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'threads:delete', { thread_ids: body.thread_ids, strategy: body.strategy });
        return { pruned_count: await ctx.threads.prune([...new Set(body.thread_ids)], body.strategy, filter) };
      },
    })
    .route({
      method: 'post',
      path: '/threads/count',
      access: ['custom_auth'],
      summary: 'Count threads',
      tags,
      body: ThreadCount,
      response: z.number().int(),
      handler: async ({ body, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'threads:search', { ...body });
        return ctx.threads.count({ ...body, metadata: body.metadata as JsonObject | undefined, values: body.values as JsonObject | undefined, filter });
      },
    })
    .route({
      method: 'get',
      path: '/threads/{thread_id}',
      access: ['custom_auth'],
      summary: 'Get a thread',
      tags,
      params: ThreadPath,
      query: z.strictObject({ include: z.union([z.string(), z.array(z.string())]).optional() }),
      response: Thread,
      errors: [404],
      handler: async ({ params, query, auth }) => {
        const thread = await ctx.threads.get(params.thread_id, await readable(auth, params.thread_id));
        return [query.include ?? []].flat().includes('ttl') ? withTtl(thread) : threadJson(thread);
      },
    })
    .route({
      method: 'patch',
      path: '/threads/{thread_id}',
      access: ['custom_auth'],
      summary: "Merge metadata into a thread's metadata",
      tags,
      params: ThreadPath,
      body: ThreadPatch,
      response: Thread,
      errors: [404],
      handler: async ({ params, body, auth }) => {
        const request = { thread_id: params.thread_id, metadata: body.metadata as JsonObject | undefined };
        const { filter, value } = await ctx.authz.authorize(auth, 'threads:update', request);
        const metadata = value.metadata === undefined ? undefined : metadataOf(value, 'threads:update');
        return threadJson(await ctx.threads.patch(params.thread_id, { metadata, ...(body.ttl !== undefined ? { ttl: body.ttl } : {}) }, filter));
      },
    })
    .route({
      method: 'delete',
      path: '/threads/{thread_id}',
      access: ['custom_auth'],
      summary: 'Delete a thread with its runs and checkpoints',
      tags,
      params: ThreadPath,
      errors: [404],
      handler: async ({ params, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'threads:delete', { thread_id: params.thread_id });
        await ctx.threads.delete(params.thread_id, filter);
        await ctx.deleteCheckpoints(params.thread_id);
      },
    })
    .route({
      method: 'post',
      path: '/threads/{thread_id}/copy',
      access: ['custom_auth'],
      summary: 'Copy a thread with its checkpoints',
      tags,
      params: ThreadPath,
      response: Thread,
      errors: [404],
      handler: async ({ params, auth }) => {
        const copy = await ctx.threads.copy(params.thread_id, randomUUID(), await readable(auth, params.thread_id));
        await ctx.copyCheckpoints(params.thread_id, copy.thread_id);
        return threadJson(copy);
      },
    })
    .route({
      method: 'get',
      path: '/threads/{thread_id}/state',
      access: ['custom_auth'],
      summary: 'The current state of a thread',
      tags,
      params: ThreadPath,
      query: z.strictObject({ subgraphs: Flag.optional(), select: z.union([z.string(), z.array(z.string())]).optional() }),
      response: ThreadState,
      errors: [404],
      handler: async ({ params, query, auth }) =>
        ctx.state.state(params.thread_id, { subgraphs: query.subgraphs ?? false, filter: await readable(auth, params.thread_id) }),
    })
    .route({
      method: 'post',
      path: '/threads/{thread_id}/state',
      access: ['custom_auth'],
      summary: "Update a thread's state (409 while a run is active)",
      tags,
      params: ThreadPath,
      body: StateUpdate,
      response: StateUpdateResult,
      errors: [404, 409],
      handler: async ({ params, body, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'threads:update', { thread_id: params.thread_id });
        const checkpoint = { ...body.checkpoint, ...(body.checkpoint_id ? { checkpoint_id: body.checkpoint_id } : {}) };
        return ctx.state.update(params.thread_id, { values: body.values, ...(body.as_node ? { as_node: body.as_node } : {}), checkpoint }, filter);
      },
    })
    .route({
      method: 'get',
      path: '/threads/{thread_id}/state/{checkpoint_id}',
      access: ['custom_auth'],
      summary: 'The state of a thread at a checkpoint',
      tags,
      params: z.strictObject({ thread_id: Uuid, checkpoint_id: z.string().min(1) }),
      query: z.strictObject({ subgraphs: Flag.optional() }),
      response: ThreadState,
      errors: [404],
      handler: async ({ params, query, auth }) =>
        ctx.state.state(params.thread_id, {
          checkpoint: { checkpoint_id: params.checkpoint_id },
          subgraphs: query.subgraphs ?? false,
          filter: await readable(auth, params.thread_id),
        }),
    })
    .route({
      method: 'post',
      path: '/threads/{thread_id}/state/checkpoint',
      access: ['custom_auth'],
      summary: 'The state of a thread at a checkpoint',
      tags,
      params: ThreadPath,
      // A root checkpoint by id, or a subgraph's state by namespace (its latest, or by id).
      body: z.strictObject({ checkpoint: CheckpointBody, subgraphs: z.boolean().optional() }),
      response: ThreadState,
      errors: [404],
      handler: async ({ params, body, auth }) =>
        ctx.state.state(params.thread_id, { checkpoint: body.checkpoint, subgraphs: body.subgraphs ?? false, filter: await readable(auth, params.thread_id) }),
    })
    .route({
      method: 'get',
      path: '/threads/{thread_id}/history',
      access: ['custom_auth'],
      summary: 'Past states of a thread, newest first',
      tags,
      params: ThreadPath,
      query: z.strictObject({ limit: z.coerce.number().int().min(1).max(1000).default(10), before: z.string().optional() }),
      response: z.array(ThreadState),
      errors: [404],
      handler: async ({ params, query, auth }) =>
        ctx.state.history(params.thread_id, {
          limit: query.limit,
          ...(query.before ? { before: query.before } : {}),
          filter: await readable(auth, params.thread_id),
        }),
    })
    .route({
      method: 'post',
      path: '/threads/{thread_id}/history',
      access: ['custom_auth'],
      summary: 'Past states of a thread, newest first',
      tags,
      params: ThreadPath,
      body: HistoryBody,
      response: z.array(ThreadState),
      errors: [404],
      handler: async ({ params, body, auth }) => {
        const before =
          typeof body.before === 'string'
            ? body.before
            : body.before && 'configurable' in body.before
              ? body.before.configurable.checkpoint_id
              : body.before?.checkpoint_id;
        const filter = await readable(auth, params.thread_id);
        return ctx.state.history(params.thread_id, {
          limit: body.limit,
          ...(before ? { before } : {}),
          ...(body.metadata ? { metadata: body.metadata } : {}),
          ...(body.checkpoint ? { checkpoint: body.checkpoint } : {}),
          filter,
        });
      },
    });
  threadStreamRoutes(api, ctx);
}
