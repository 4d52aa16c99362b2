/**
 * Runs on a thread and threadless runs: create, stream (SSE), wait, join, list, get, cancel (one,
 * or many with POST /runs/cancel), delete; and the deployment's queue across threads (POST /runs/search).
 *
 * Runs inherit their thread's authorization (custom auth): creating a run (also /stream, /wait,
 * /runs/batch) → `threads:create_run`; listing, getting, joining and streaming → `threads:read`;
 * cancel → `threads:update` (bulk: once per request, its filter applied to each run's thread);
 * the queue → `threads:search` (its filter applied to each run's thread);
 * delete → `threads:delete`. A thread outside the filter is a 404.
 */
import type { Request, Response } from 'express';
import type { HandlerInput } from '@berth/http';
import { SseWriter } from '@berth/http';
import type { SubscribeFrom } from '@berth/broker';
import { z } from 'zod';
import { Uuid } from '@berth/ids';
import { ConflictError, NotFoundError } from '@berth/errors';
import type { RequestAuth } from '../auth/index.js';
import type { RunRequest } from '../runs/run-service.js';
import type { Run, RunStatus } from '../storage/runs.js';
import type { Json } from '../storage/sql.js';
import type { ServerContext } from './context.js';
import { Flag, Run as RunSchema, RunCreate, RunOutput, RunPath, ThreadPath, runJson } from './schemas.js';
import type { AgentApi } from './access.js';

const RunPage = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).default(10),
  offset: z.coerce.number().int().min(0).default(0),
  status: z.enum(['pending', 'running', 'success', 'error', 'timeout', 'interrupted']).optional(),
  select: z.union([z.string(), z.array(z.string())]).optional(),
});

/** Most runs one `POST /runs/cancel` names by id. */
export const MAX_CANCEL_IDS = 1000;
/** Runs read per round trip when cancelling by status. */
const CANCEL_PAGE = 100;

const BulkCancel = z
  .strictObject({
    /** Only runs of this thread. */
    thread_id: Uuid.optional(),
    run_ids: z.array(Uuid).min(1).max(MAX_CANCEL_IDS).optional(),
    /** Every unfinished run in this status (`all`: pending and running) the caller may update. */
    status: z.enum(['pending', 'running', 'all']).optional(),
  })
  .refine((b) => (b.run_ids === undefined) !== (b.status === undefined), {
    message: 'name the runs to cancel: run_ids or status (not both)',
    path: ['run_ids'],
  });

/** Most runs one `POST /runs/search` answers with. */
export const MAX_RUN_SEARCH = 100;

const QueueSearch = z.strictObject({
  /** Which unfinished runs: queued (`pending`), `running`, or both. */
  status: z
    .array(z.enum(['pending', 'running']))
    .min(1)
    .default(['pending', 'running']),
  limit: z.number().int().min(1).max(MAX_RUN_SEARCH).default(20),
  offset: z.number().int().min(0).default(0),
});

const ActionQuery = z.enum(['interrupt', 'rollback']).default('interrupt');

/** What the SSE routes send, for the OpenAPI document. */
const STREAM_EVENTS =
  'Server-sent events: `metadata` {run_id, attempt} first, then one event per chunk of the requested stream modes ' +
  '(`values`, `updates`, `messages`, `custom`, …; `<mode>|<namespace>` for subgraphs with stream_subgraphs), `error` {error, message} when the run fails. ' +
  'Each event has an `id` (its sequence number in the run, from "0"); send the last one seen as Last-Event-ID to resume';

/** What a failed run records as its thread's `error`. */
export interface RunError {
  error: string;
  message: string;
}

function dropSdkAssistantAlias(item: unknown): unknown {
  if (item && typeof item === 'object' && 'assistantId' in item) {
    const { assistantId, ...rest } = item as Record<string, unknown>;
    if ((rest as { assistant_id?: unknown }).assistant_id === assistantId) return rest;
  }
  return item;
}

/** `x-*` request headers and user-agent go to the graph's configurable, credentials excepted. */
export function passHeaders(req: Request): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value !== 'string') continue;
    if ((name.startsWith('x-') && !['x-api-key', 'x-tenant-id', 'x-service-key'].includes(name)) || name === 'user-agent') out[name] = value;
  }
  return out;
}

/** `cancel_on_disconnect`: the client left, so nobody hears of a failure to cancel but the log. */
export async function cancelLeftRun(ctx: ServerContext, runId: string): Promise<void> {
  try {
    const run = await ctx.runs.getById(runId);
    if (run) await ctx.runService.cancel(run, 'interrupt', false);
  } catch (error) {
    ctx.log.warn({ err: error, runId }, 'could not cancel the run its client disconnected from');
  }
}

/** How a run ended, once it has: its final values, or for a failed run the error its thread recorded. */
export async function runOutcome(
  ctx: ServerContext,
  run: Run,
  signal: AbortSignal,
): Promise<{ status?: RunStatus; output: Json | null } | { error: RunError }> {
  const { status, output } = await ctx.runService.join(run, signal);
  if (status !== 'error') return { ...(status ? { status } : {}), output };
  const thread = await ctx.threads.get(run.thread_id).catch((error: unknown) => {
    ctx.log.warn({ err: error, runId: run.run_id }, "could not read the failed run's thread for its error");
    return undefined;
  });
  return { error: (thread?.error as RunError | null | undefined) ?? { error: 'Error', message: 'run failed' } };
}

/** What the handlers of the routes starting a run are given. */
type StartInput = HandlerInput<unknown, unknown, z.output<typeof RunCreate>, RequestAuth>;

function locate(res: Response, run: Run, threadless: boolean): void {
  const path = threadless ? `/runs/${run.run_id}` : `/threads/${run.thread_id}/runs/${run.run_id}`;
  res.setHeader('Content-Location', path);
  res.setHeader('Location', `${path}/stream`);
}

export function runRoutes(api: AgentApi, ctx: ServerContext): void {
  const tags = ['runs'];
  /** A run of a thread the handler for `threads:read` lets the user see; 404 otherwise. */
  const readableRun = async (auth: RequestAuth, threadId: string, runId: string) => {
    const { filter } = await ctx.authz.authorize(auth, 'threads:read', { thread_id: threadId, run_id: runId });
    return ctx.runs.get(threadId, runId, filter);
  };

  /** Streams a run's events to the client; a disconnect cancels the run only with on_disconnect=cancel. */
  async function streamRun(res: Response, run: Run, from: SubscribeFrom, cancelOnDisconnect: boolean, threadless: boolean) {
    const abort = new AbortController();
    const path = threadless ? `/runs/${run.run_id}` : `/threads/${run.thread_id}/runs/${run.run_id}`;
    const sse = new SseWriter(res, { headers: { 'Content-Location': path, Location: `${path}/stream` } });
    sse.onClose(() => {
      abort.abort();
      if (cancelOnDisconnect && !res.writableFinished) void cancelLeftRun(ctx, run.run_id);
    });
    try {
      // Every event carries its id (its sequence number in the run, "0" the metadata event), as the
      // LangGraph API sends it: a client resumes after it with Last-Event-ID.
      for await (const event of ctx.runService.events(run.run_id, from, abort.signal)) {
        sse.send({ event: event.event, data: event.data, id: event.id });
      }
    } catch (error) {
      if (!abort.signal.aborted) sse.send({ event: 'error', data: { error: (error as Error).name, message: (error as Error).message } });
    }
    sse.end();
  }

  async function create(threadId: string | undefined, body: z.output<typeof RunCreate>, req: Request, auth: RequestAuth) {
    return ctx.runService.create(threadId, body as RunRequest, passHeaders(req), auth);
  }
  const threadOf = (params: unknown) => (params as { thread_id?: string }).thread_id;

  // The three ways to start a run, each on a thread (`/threads/{thread_id}/runs…`) and threadless
  // (`/runs…`, on a new temporary thread): one handler each, six routes written out.
  const startRun =
    (threadless: boolean) =>
    async ({ params, body, req, res, auth }: StartInput) => {
      const run = await create(threadOf(params), body, req, auth);
      locate(res, run, threadless);
      return runJson(run);
    };
  const startAndStream =
    (threadless: boolean) =>
    async ({ params, body, req, res, auth }: StartInput) => {
      const run = await create(threadOf(params), body, req, auth);
      await streamRun(res, run, 'start', body.on_disconnect === 'cancel', threadless);
    };
  const startAndWait =
    (threadless: boolean) =>
    async ({ params, body, req, res, auth }: StartInput) => {
      const run = await create(threadOf(params), body, req, auth);
      locate(res, run, threadless);
      const abort = new AbortController();
      res.on('close', () => abort.abort());
      const outcome = await runOutcome(ctx, run, abort.signal);
      return 'error' in outcome ? { __error__: outcome.error } : (outcome.output ?? {});
    };
  api
    .route({
      method: 'post',
      path: '/threads/{thread_id}/runs',
      access: ['custom_auth'],
      summary: 'Start a run (returns at once)',
      tags,
      params: ThreadPath,
      body: RunCreate,
      response: RunSchema,
      errors: [404, 409],
      handler: startRun(false),
    })
    .route({
      method: 'post',
      path: '/threads/{thread_id}/runs/stream',
      access: ['custom_auth'],
      summary: 'Start a run and stream its events (SSE)',
      tags,
      params: ThreadPath,
      body: RunCreate,
      events: STREAM_EVENTS,
      errors: [404, 409],
      handler: startAndStream(false),
    })
    .route({
      method: 'post',
      path: '/threads/{thread_id}/runs/wait',
      access: ['custom_auth'],
      summary: 'Start a run and answer with its final values',
      tags,
      params: ThreadPath,
      body: RunCreate,
      response: RunOutput,
      errors: [404, 409],
      handler: startAndWait(false),
    })
    .route({
      method: 'post',
      path: '/runs',
      access: ['custom_auth'],
      summary: 'Start a run on a new temporary thread',
      tags,
      body: RunCreate,
      response: RunSchema,
      errors: [404, 409],
      handler: startRun(true),
    })
    .route({
      method: 'post',
      path: '/runs/stream',
      access: ['custom_auth'],
      summary: 'Start a run and stream its events (SSE)',
      tags,
      body: RunCreate,
      events: STREAM_EVENTS,
      errors: [404, 409],
      handler: startAndStream(true),
    })
    .route({
      method: 'post',
      path: '/runs/wait',
      access: ['custom_auth'],
      summary: 'Start a run and answer with its final values',
      tags,
      body: RunCreate,
      response: RunOutput,
      errors: [404, 409],
      handler: startAndWait(true),
    });

  /** Cancels a run found unfinished; one that ended meanwhile is left as it ended. */
  async function cancelIfUnfinished(run: Run, action: 'interrupt' | 'rollback') {
    if (run.status !== 'pending' && run.status !== 'running') return;
    await ctx.runService.cancel(run, action, false).catch((error: unknown) => {
      if (!(error instanceof ConflictError)) throw error;
    });
  }

  api
    .route({
      method: 'post',
      path: '/runs/cancel',
      access: ['custom_auth'],
      summary: 'Cancel several runs: by ids, or every pending and/or running run (interrupt keeps their checkpoints, rollback deletes them)',
      description: `At most ${MAX_CANCEL_IDS} run_ids per call; a named run that does not exist (or that custom auth hides) is a 404 and nothing is cancelled. Runs that already ended are left as they are.`,
      tags,
      query: z.strictObject({ action: ActionQuery }),
      body: BulkCancel,
      status: 204,
      errors: [404],
      handler: async ({ query, body, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'threads:update', { ...body, action: query.action });
        const scope = { ...(body.thread_id ? { threadId: body.thread_id } : {}), ...(filter ? { threadFilter: filter } : {}) };
        if (body.run_ids) {
          const ids = [...new Set(body.run_ids)];
          const found = await ctx.runs.findForCancel({ ...scope, runIds: ids, limit: ids.length });
          const missing = ids.filter((id) => !found.some((r) => r.run_id === id));
          if (missing.length) throw new NotFoundError(`Runs not found: ${missing.join(', ')}`);
          for (const run of found) await cancelIfUnfinished(run, query.action);
          return;
        }
        // Newest first: cancelling a thread's oldest run dispatches the next, which must not start before its own cancel.
        const statuses: RunStatus[] = body.status === 'all' ? ['pending', 'running'] : [body.status!];
        const done: string[] = [];
        for (;;) {
          const page = await ctx.runs.findForCancel({ ...scope, statuses, exclude: done, limit: CANCEL_PAGE });
          for (const run of page) {
            await cancelIfUnfinished(run, query.action);
            done.push(run.run_id);
          }
          if (page.length < CANCEL_PAGE) return;
        }
      },
    })
    .route({
      method: 'post',
      path: '/runs/search',
      access: ['custom_auth'],
      summary: "The deployment's queue: its pending and running runs across threads, oldest first (a Berth extension)",
      description:
        `At most ${MAX_RUN_SEARCH} a page; X-Pagination-Total says how many there are, X-Pagination-Next the next page's offset. ` +
        'Only runs of threads the caller may search (custom auth: the `threads:search` filter applies to each run’s thread).',
      tags,
      body: QueueSearch,
      response: z.array(RunSchema),
      handler: async ({ body, res, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'threads:search', { ...body });
        const { runs, total } = await ctx.runs.unfinished({
          statuses: body.status,
          limit: body.limit,
          offset: body.offset,
          ...(filter ? { threadFilter: filter } : {}),
        });
        res.setHeader('X-Pagination-Total', String(total));
        if (body.offset + runs.length < total) res.setHeader('X-Pagination-Next', String(body.offset + runs.length));
        return runs.map(runJson);
      },
    })
    .route({
      method: 'post',
      path: '/runs/batch',
      access: ['custom_auth'],
      summary: 'Start several threadless runs',
      tags,
      // The SDK's createBatch sends each payload's own `assistantId` beside `assistant_id`.
      body: z.array(z.preprocess(dropSdkAssistantAlias, RunCreate)).min(1),
      response: z.array(RunSchema),
      handler: async ({ body, req, auth }) => {
        const runs = [];
        for (const item of body) runs.push(runJson(await create(undefined, item, req, auth)));
        return runs;
      },
    })
    .route({
      method: 'get',
      path: '/threads/{thread_id}/runs',
      access: ['custom_auth'],
      summary: 'List runs of a thread, newest first',
      tags,
      params: ThreadPath,
      query: RunPage,
      response: z.array(RunSchema),
      errors: [404],
      handler: async ({ params, query, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'threads:read', { thread_id: params.thread_id });
        await ctx.threads.get(params.thread_id, filter);
        return (await ctx.runs.list(params.thread_id, query)).map(runJson);
      },
    })
    .route({
      method: 'get',
      path: '/threads/{thread_id}/runs/{run_id}',
      access: ['custom_auth'],
      summary: 'Get a run',
      tags,
      params: RunPath,
      response: RunSchema,
      errors: [404],
      handler: async ({ params, auth }) => runJson(await readableRun(auth, params.thread_id, params.run_id)),
    })
    .route({
      method: 'delete',
      path: '/threads/{thread_id}/runs/{run_id}',
      access: ['custom_auth'],
      summary: 'Delete a finished run',
      tags,
      params: RunPath,
      errors: [404, 409],
      handler: async ({ params, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'threads:delete', { thread_id: params.thread_id, run_id: params.run_id });
        await ctx.runs.delete(params.thread_id, params.run_id, filter);
      },
    })
    .route({
      method: 'get',
      path: '/threads/{thread_id}/runs/{run_id}/join',
      access: ['custom_auth'],
      summary: 'Wait for a run to finish; answers with its final values',
      tags,
      params: RunPath,
      query: z.strictObject({ cancel_on_disconnect: Flag.optional() }),
      response: RunOutput,
      errors: [404],
      handler: async ({ params, query, res, auth }) => {
        const run = await readableRun(auth, params.thread_id, params.run_id);
        const abort = new AbortController();
        res.on('close', () => {
          abort.abort();
          if (query.cancel_on_disconnect && !res.writableFinished) void cancelLeftRun(ctx, run.run_id);
        });
        return (await ctx.runService.join(run, abort.signal)).output ?? {};
      },
    })
    .route({
      method: 'get',
      path: '/threads/{thread_id}/runs/{run_id}/stream',
      access: ['custom_auth'],
      summary: "Join a run's event stream (Last-Event-ID resumes a resumable stream)",
      tags,
      params: RunPath,
      events: STREAM_EVENTS,
      query: z.strictObject({
        cancel_on_disconnect: Flag.optional(),
        stream_mode: z.union([z.string(), z.array(z.string())]).optional(),
        namespace: z.union([z.string(), z.array(z.string())]).optional(),
        checkpoint_id: z.string().optional(),
      }),
      errors: [404],
      handler: async ({ params, query, req, res, auth }) => {
        const run = await readableRun(auth, params.thread_id, params.run_id);
        const lastId = req.headers['last-event-id'];
        const from: SubscribeFrom =
          typeof lastId === 'string' && lastId !== ''
            ? lastId === '-1' || lastId === '-'
              ? 'start'
              : { after: lastId }
            : run.kwargs.stream_resumable
              ? 'start'
              : 'now';
        await streamRun(res, run, from, query.cancel_on_disconnect ?? false, false);
      },
    })
    .route({
      method: 'post',
      path: '/threads/{thread_id}/runs/{run_id}/cancel',
      access: ['custom_auth'],
      summary: 'Cancel a run (interrupt keeps its checkpoints, rollback deletes the run)',
      tags,
      params: RunPath,
      query: z.strictObject({
        wait: Flag.optional(),
        action: ActionQuery,
        reason: z.string().optional(),
      }),
      status: 202,
      otherStatuses: { 204: 'with wait=true: the run has stopped' },
      errors: [404, 409],
      handler: async ({ params, query, res, auth }) => {
        const request = { thread_id: params.thread_id, run_id: params.run_id, action: query.action };
        const { filter } = await ctx.authz.authorize(auth, 'threads:update', request);
        const run = await ctx.runs.get(params.thread_id, params.run_id, filter);
        await ctx.runService.cancel(run, query.action, query.wait ?? false);
        res.status(query.wait ? 204 : 202);
      },
    });
}
