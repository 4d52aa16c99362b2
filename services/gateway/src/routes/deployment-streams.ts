/**
 * What a client watches live on a deployment. Its revisions' build and deploy logs: a page of
 * entries as JSON (a time range, keyset paging forwards by `offset`, the last N by `tail`, backwards
 * from a line by `before`), or, with `follow=true` (from the start or the `tail`), server-sent
 * events — the entries there are, then each one as the control plane writes it (it wakes on the
 * write, it does not poll), until the revision's log ends or the client leaves. Each entry's `id:`
 * is its id, so a client that lost the connection resumes with `Last-Event-ID` and gets exactly the
 * entries it missed. And the deployment's changes (`/events`): a nudge to read it again.
 */
import { once } from 'node:events';
import type { Principal } from '@berth/auth';
import { systemClock, type Clock } from '@berth/clock';
import { RequestValidationError } from '@berth/errors';
import type { Logger } from '@berth/log';
import { SseWriter, type SseEvent } from '@berth/http';
import { timestampDate, timestampFromDate, type LogEntry } from '@berth/proto';
import type { Request, Response } from 'express';
import type { z } from 'zod';
import type { GatewayApi } from '../access.js';
import type { ControlPlaneClients } from '../control-plane.js';
import { DeploymentPath, LOG_PAGE, LogsOut, LogsQuery, RevisionPath } from '../deployment-schemas.js';
import { deploymentIdOf, revisionIdOf } from './deployments.js';

export interface StreamRouteDeps {
  controlPlane: ControlPlaneClients;
  /** Where a stream that broke after it started is told of (its client gets an `error` event). */
  logger: Logger;
  /** The clock of the streams' heartbeats. @default systemClock */
  clock?: Clock;
  /**
   * How often an idle stream sends a `: heartbeat` comment, in milliseconds (keeps proxies from
   * closing it).
   * @default 15000
   */
  heartbeatMs?: number;
}

const EVENTS =
  'with follow=true: `log` events (data: an entry as in `logs`, `id:` its id; send the last one back as ' +
  'Last-Event-ID to resume), `: heartbeat` comments while idle, and `end` (data: `{"revision_id"}`) once the ' +
  "revision's log has ended (it failed, was interrupted or retired, or was deleted); then the stream closes";

function logJson(entry: LogEntry) {
  const timestamp = entry.timestamp ? timestampDate(entry.timestamp) : new Date(0);
  return { id: Number(entry.id), timestamp: timestamp.toISOString(), level: entry.level, message: entry.message, type: entry.type };
}

/**
 * Where a stream resumes: after the Last-Event-ID a reconnecting client sends (it wins over the
 * `offset` or `tail` of the URL it reconnects to), else as asked.
 */
function resumeAt(req: Request, query: Query): { offset: number; tail?: number } {
  const lastEventId = req.header('last-event-id');
  if (lastEventId === undefined) return { offset: query.offset ?? 0, ...(query.tail ? { tail: query.tail } : {}) };
  if (!/^\d{1,15}$/.test(lastEventId.trim())) {
    throw new RequestValidationError([{ loc: ['header', 'last-event-id'], msg: 'Last-Event-ID must be the id of a log entry', type: 'value_error' }]);
  }
  return { offset: Number(lastEventId.trim()) };
}

type Query = z.output<typeof LogsQuery>;

export function deploymentStreamRoutes(api: GatewayApi, deps: StreamRouteDeps): void {
  const tags = ['deployments'];
  const serve = (auth: Principal, deploymentId: string, revisionId: string, query: Query, req: Request, res: Response) =>
    query.follow ? follow(deps, auth, { deploymentId, revisionId }, query, req, res) : page(deps, auth, { deploymentId, revisionId }, query);

  api
    .route({
      method: 'get',
      path: '/v2/deployments/{deployment_id}/revisions/{revision_id}/logs',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Build and deploy logs of a revision',
      description:
        'Entries come oldest first; pass `next_offset` back as `offset` to read on. `tail=N` answers the last N ' +
        'entries instead of the first (the newest lines of a long log), and `before=<id>` the `limit` entries just ' +
        'before that one, to page backwards from a line (pass the id of the oldest entry you have; fewer than `limit` ' +
        'means there are none before). `since`/`until` keep the entries written in that time range (with `tail` and ' +
        '`before` too). With `follow=true` the answer is a stream of server-sent events instead (see the 200 answer), ' +
        'from the first entry, or with `tail=N` from the last N; a tenant may follow a limited number of logs at once ' +
        '(429 beyond). Parameters that do not go together (`tail` with `offset`, `limit` or `before`; `before` with ' +
        '`offset` or `follow`) are a 422.',
      tags,
      params: RevisionPath,
      query: LogsQuery,
      response: LogsOut,
      events: EVENTS,
      errors: [404, 429, 503],
      handler: ({ params, query, auth, req, res }) => serve(auth, deploymentIdOf(params.deployment_id), revisionIdOf(params.revision_id), query, req, res),
    })
    .route({
      method: 'get',
      path: '/v2/deployments/{deployment_id}/logs',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Build and deploy logs of the latest revision',
      description:
        'Like the logs of a revision, for the newest one; `revision_id` says which that was. With `follow=true`, ' +
        'the revision that is the newest when the stream starts is followed.',
      tags,
      params: DeploymentPath,
      query: LogsQuery,
      response: LogsOut,
      events: EVENTS,
      errors: [404, 429, 503],
      handler: ({ params, query, auth, req, res }) => serve(auth, deploymentIdOf(params.deployment_id), '', query, req, res),
    })
    .route({
      method: 'get',
      path: '/v2/deployments/{deployment_id}/events',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Watch a deployment for changes (server-sent events)',
      description:
        'Instead of polling a deployment and its revisions: read them again at each `changed` event. It counts toward ' +
        'the streams a tenant may hold open at once (429 beyond), like a followed log.',
      tags,
      params: DeploymentPath,
      events:
        '`changed` (data: `{"deployment_id"}`) at once and after each change of the deployment or its revisions (a ' +
        'revision made or moved on, the serving revision or its health, secrets, config; changes close together may ' +
        'come as one); `: heartbeat` comments while idle; `deleted` when the deployment is deleted, then the stream closes',
      errors: [404, 429, 503],
      handler: async ({ params, auth, res }) => {
        const deploymentId = deploymentIdOf(params.deployment_id);
        await relay(
          deps,
          res,
          (signal) => deps.controlPlane.deployments.watchDeployment({ tenantId: auth.tenantId, deploymentId }, { signal }),
          (message) => [{ event: message.deleted ? 'deleted' : 'changed', data: { deployment_id: deploymentId } }],
        );
      },
    });
}

interface Target {
  deploymentId: string;
  /** '' for the deployment's latest revision. */
  revisionId: string;
}

async function page(deps: StreamRouteDeps, auth: Principal, target: Target, query: Query): Promise<z.input<typeof LogsOut>> {
  const answer = await deps.controlPlane.deployments.getRevisionLogs({
    tenantId: auth.tenantId,
    ...target,
    type: query.type ?? '',
    offset: BigInt(query.offset ?? 0),
    limit: query.limit ?? LOG_PAGE,
    tail: query.tail ?? 0,
    before: BigInt(query.before ?? 0),
    ...(query.since ? { since: timestampFromDate(new Date(query.since)) } : {}),
    ...(query.until ? { until: timestampFromDate(new Date(query.until)) } : {}),
  });
  return { logs: answer.logs.map(logJson), next_offset: Number(answer.nextOffset), revision_id: answer.revisionId || null };
}

async function follow(deps: StreamRouteDeps, auth: Principal, target: Target, query: Query, req: Request, res: Response): Promise<void> {
  const { offset, tail } = resumeAt(req, query);
  const request = {
    tenantId: auth.tenantId,
    ...target,
    type: query.type ?? '',
    offset: BigInt(offset),
    tail: tail ?? 0,
    ...(query.since ? { since: timestampFromDate(new Date(query.since)) } : {}),
  };
  await relay(
    deps,
    res,
    (signal) => deps.controlPlane.deployments.followRevisionLogs(request, { signal }),
    (message) => [
      ...message.logs.map((entry) => ({ event: 'log', id: String(entry.id), data: logJson(entry) })),
      ...(message.ended ? [{ event: 'end', data: { revision_id: message.revisionId } }] : []),
    ],
  );
}

/**
 * Answers a control-plane stream as server-sent events, each message as `events` says, until it
 * ends or the client leaves (which cancels the call). The control plane's first message says the
 * stream started: until then a refusal (404, 429, 503) is still an ordinary error answer.
 */
async function relay<T>(
  deps: StreamRouteDeps,
  res: Response,
  call: (signal: AbortSignal) => AsyncIterable<T>,
  events: (message: T) => SseEvent[],
): Promise<void> {
  const gone = new AbortController();
  res.once('close', () => gone.abort(new Error('the client went away')));
  const stream = call(gone.signal)[Symbol.asyncIterator]();
  let next = await stream.next().catch((error: unknown) => {
    gone.abort(error);
    throw error;
  });
  const sse = new SseWriter(res, { clock: deps.clock ?? systemClock, ...(deps.heartbeatMs ? { heartbeatMs: deps.heartbeatMs } : {}) });
  try {
    for (; !next.done && !sse.closed; next = await stream.next()) {
      for (const event of events(next.value)) {
        // A slow reader holds the stream back rather than the gateway's memory.
        if (!sse.send(event) && !sse.closed) await once(res, 'drain', { signal: gone.signal });
      }
    }
  } catch (error) {
    // The status is sent: a client that is still there learns that the stream broke (it may resume).
    if (!gone.signal.aborted) {
      deps.logger.warn({ err: error }, 'a stream from the control plane broke');
      sse.send({ event: 'error', data: { detail: 'the stream broke: open it again (a log resumes with Last-Event-ID)' } });
    }
  } finally {
    gone.abort();
    await stream.return?.().catch(() => undefined);
    sse.end();
  }
}
