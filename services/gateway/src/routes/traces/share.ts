/**
 * Share links (`client.runs.share`, `client.threads.share`, `client.public.runs`): the owner of a
 * trace or thread makes a token that lets anyone read it, read-only — the runs of that trace, or
 * of that thread's traces, and nothing else of the project — until the owner unshares it, which
 * revokes the token for good. The public reads take no credential and are rate-limited per client
 * address. A token that is not one, or no longer, is a 404, as a run outside what it shares.
 */
import { NotFoundError } from '@berth/errors';
import { isUuid } from '@berth/ids';
import { ShareKind } from '@berth/proto';
import type { ExportWorkerClients } from '../../export-worker.js';
import { assertProjectAccess } from './scope.js';
import type { RateLimiter } from '../../rate-limit.js';
import { columnsFor, everyRun, runV2, threadOf, type Document } from './read-v2.js';
import {
  PublicPath,
  PublicRunPath,
  PublicRunQuery,
  PublicRunsOut,
  PublicRunsQueryIn,
  RunSharePath,
  RunV2,
  ShareOut,
  ShareRunIn,
  ShareThreadIn,
  ThreadPath,
  ThreadShareQuery,
  UnshareRunIn,
} from './schemas-v2.js';
import type { GatewayApi } from '../../access.js';

export interface ShareRouteDeps {
  exportWorker: ExportWorkerClients;
  /** Counts the public reads per client address. */
  publicLimiter: RateLimiter;
}

/** Sharing is a person's decision: tenant credentials only, never a deployment's tracing credential (refused twice: by access, and in the handlers). */
const OWNER = ['api_key', 'access_token', 'session'] as const;

export function shareRoutes(api: GatewayApi, deps: ShareRouteDeps): void {
  const tags = ['traces'];
  const rpc = () => deps.exportWorker.traces;

  /** What a token shares, or a 404 (rate-limited first, so guessing costs the guesser). */
  const resolve = async (token: string, address: string | undefined) => {
    deps.publicLimiter.take(address ?? 'unknown');
    const { target } = await rpc().resolveShare({ shareToken: token });
    if (!target) throw new NotFoundError('no such share link');
    return target;
  };

  /** The runs a share covers: its trace's, or those of its thread's traces. */
  const sharedRuns = async (share: { tenantId: string; sessionId: string; kind: ShareKind; subject: string }, select: string[]) => {
    const sessionIds = [share.sessionId];
    if (share.kind === ShareKind.TRACE) return everyRun(deps.exportWorker, share.tenantId, { sessionIds, traceId: share.subject, select });
    const roots = await everyRun(deps.exportWorker, share.tenantId, { sessionIds, threadId: share.subject, select: ['id'] });
    if (roots.length === 0) return [];
    return everyRun(deps.exportWorker, share.tenantId, { sessionIds, filter: `in(trace_id, ${JSON.stringify(roots.map((r) => r.id))})`, select });
  };

  api
    .route({
      method: 'post',
      path: '/api/v2/runs/{run_id}/share',
      access: [...OWNER],
      summary: "Share a run's trace (`client.runs.share.create()`)",
      description:
        "The trace's share token, made when it has none: anyone with it reads the trace's runs (`/api/v2/public/…`), " +
        'read-only, until it is unshared. A run of another trace, project or tenant is a 404.',
      tags,
      params: RunSharePath,
      body: ShareRunIn,
      response: ShareOut,
      errors: [404, 503],
      handler: async ({ auth, params, body }) => {
        assertProjectAccess(auth, 'share traces');
        if (!isUuid(body.trace_id)) throw new NotFoundError(`trace ${body.trace_id} not found`);
        const run = JSON.parse(
          (await rpc().getRun({ tenantId: auth.tenantId, id: params.run_id, sessionId: body.session_id.toLowerCase() })).runJson,
        ) as Document;
        if (run.trace_id !== body.trace_id.toLowerCase()) throw new NotFoundError(`run ${params.run_id} not found in trace ${body.trace_id}`);
        const answer = await rpc().share({ target: { tenantId: auth.tenantId, sessionId: body.session_id, kind: ShareKind.TRACE, subject: body.trace_id } });
        return { share_token: answer.shareToken };
      },
    })
    .route({
      method: 'delete',
      path: '/api/v2/runs/{run_id}/share',
      access: [...OWNER],
      summary: 'Unshare a trace (`client.runs.share.delete()`)',
      description: 'Revokes the share token of the trace `run_id` (a root run) of project `session_id`; 204 whether or not it was shared.',
      tags,
      params: RunSharePath,
      body: UnshareRunIn,
      errors: [503],
      handler: async ({ auth, params, body }) => {
        assertProjectAccess(auth, 'unshare traces');
        await rpc().unshare({ target: { tenantId: auth.tenantId, sessionId: body.session_id, kind: ShareKind.TRACE, subject: params.run_id } });
      },
    })
    .route({
      method: 'post',
      path: '/api/v2/threads/{thread_id}/share',
      access: [...OWNER],
      summary: 'Share a thread (`client.threads.share.create()`)',
      description: "The thread's share token, made when it has none: anyone with it reads the runs of the thread's traces, read-only, until it is unshared.",
      tags,
      params: ThreadPath,
      body: ShareThreadIn,
      response: ShareOut,
      errors: [404, 503],
      handler: async ({ auth, params, body }) => {
        assertProjectAccess(auth, 'share threads');
        const answer = await rpc().share({
          target: { tenantId: auth.tenantId, sessionId: body.project_id, kind: ShareKind.THREAD, subject: params.thread_id },
        });
        return { share_token: answer.shareToken };
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/threads/{thread_id}/share',
      access: [...OWNER],
      summary: "A thread's share token (`client.threads.share.retrieve()`)",
      description: 'A 404 when the thread is not shared.',
      tags,
      params: ThreadPath,
      query: ThreadShareQuery,
      response: ShareOut,
      errors: [404, 503],
      handler: async ({ auth, params, query }) => {
        assertProjectAccess(auth, 'read share links');
        const answer = await rpc().getShare({
          target: { tenantId: auth.tenantId, sessionId: query.project_id, kind: ShareKind.THREAD, subject: params.thread_id },
        });
        return { share_token: answer.shareToken };
      },
    })
    .route({
      method: 'delete',
      path: '/api/v2/threads/{thread_id}/share',
      access: [...OWNER],
      summary: 'Unshare a thread (`client.threads.share.delete()`)',
      description: "Revokes the thread's share token; 204 whether or not it was shared.",
      tags,
      params: ThreadPath,
      query: ThreadShareQuery,
      errors: [503],
      handler: async ({ auth, params, query }) => {
        assertProjectAccess(auth, 'unshare threads');
        await rpc().unshare({ target: { tenantId: auth.tenantId, sessionId: query.project_id, kind: ShareKind.THREAD, subject: params.thread_id } });
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/public/{share_token}/run/{run_id}',
      access: 'public',
      summary: 'A run of a shared trace or thread (`client.public.runs.retrieve()`)',
      description:
        'No credential: the share token is one. The fields named in `selects` (previews, not full inputs and outputs). ' +
        'A run outside what the token shares, or a token that is not (or no longer) one, is a 404; 429 when one address reads too often.',
      tags,
      params: PublicRunPath,
      query: PublicRunQuery,
      response: RunV2,
      errors: [404, 429, 503],
      handler: async ({ req, params, query }) => {
        const share = await resolve(params.share_token, req.ip);
        const notFound = new NotFoundError(`run ${params.run_id} not found`);
        const read = (id: string) => rpc().getRun({ tenantId: share.tenantId, id, sessionId: share.sessionId });
        const run = JSON.parse((await read(params.run_id)).runJson) as Document;
        const traceId = String(run.trace_id);
        if (share.kind === ShareKind.TRACE && traceId !== share.subject) throw notFound;
        if (share.kind === ShareKind.THREAD) {
          const root = traceId === run.id ? run : (JSON.parse((await read(traceId)).runJson) as Document);
          if (threadOf(root) !== share.subject) throw notFound;
        }
        return runV2(run, query.selects);
      },
    })
    .route({
      method: 'post',
      path: '/api/v2/public/{share_token}/runs/query',
      access: 'public',
      summary: 'The runs of a shared trace or thread (`client.public.runs.query()`)',
      description:
        'No credential: the share token is one. Every run shared, in start order, with the fields named in `selects`; 429 when one address reads too often.',
      tags,
      params: PublicPath,
      body: PublicRunsQueryIn,
      response: PublicRunsOut,
      errors: [404, 429, 503],
      handler: async ({ req, params, body }) => {
        const share = await resolve(params.share_token, req.ip);
        const runs = await sharedRuns(share, columnsFor(body.selects));
        return { items: runs.map((run) => runV2(run, body.selects)) };
      },
    });
}
