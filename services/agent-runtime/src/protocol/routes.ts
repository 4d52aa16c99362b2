/**
 * Protocol v2 transports of a thread: `POST /threads/{thread_id}/commands`, the SSE stream
 * `POST /threads/{thread_id}/stream/events` and the WebSocket on `GET
 * /threads/{thread_id}/stream/events` (commands and events on one socket).
 *
 * Events come from the thread's broker stream (protocol/events.ts), so any process serves them
 * and `since` replays across processes; a stream stays open across runs until the client leaves.
 * A stream opened on a thread that does not exist yet (clients open it before `run.start`
 * creates the thread) is authorized at its first event: it gets events only once the thread
 * exists and passes the user's `threads:read` filter, and is closed otherwise.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { EventBroker } from '@berth/broker';
import { NotFoundError, isBerthError } from '@berth/errors';
import { SseWriter } from '@berth/http';
import type { Request as ExpressRequest } from 'express';
import { isSupportedChannel } from '@langchain/langgraph/stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { z } from 'zod';
import type { RequestAuth } from '../auth/index.js';
import { AuthHttpError } from '../auth/errors.js';
import type { ServerContext } from '../api/context.js';
import { passHeaders } from '../api/runs.js';
import { ThreadPath } from '../api/schemas.js';
import {
  CommandResponseSchema,
  CommandSchema,
  errorResponse,
  FilterSchema,
  ProtocolCommandError,
  ProtocolCommands,
  subscriptionId,
  type CommandResponse,
  type SubscriptionHost,
} from './commands.js';
import { fromSince, matches, threadStreamKey, toProtocolEvent, type EventFilter, type ProtocolEvent } from './events.js';
import type { AgentApi } from '../api/access.js';

const STREAM_BODY = z.strictObject({
  ...FilterSchema.shape,
  channels: FilterSchema.shape.channels.refine((channels) => channels.every(isSupportedChannel), 'unsupported channel'),
});

const COMMAND_EVENTS =
  'Server-sent events of the thread (protocol v2): one per event of its runs started through protocol v2 that matches the filter, ' +
  '`id:` the event_id, `event:` the method, data `{type:"event", seq, event_id, method, params:{namespace, timestamp, data}}`. ' +
  'Open across runs until the client disconnects; `since` replays the events after that seq';

export class ProtocolTransport {
  readonly commands: ProtocolCommands;
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024 });

  constructor(
    private readonly ctx: ServerContext,
    private readonly broker: EventBroker,
  ) {
    this.commands = new ProtocolCommands(ctx);
  }

  /**
   * The events of a thread after `since`, for a user: yields nothing (and ends) when the thread
   * does not pass their `threads:read` filter once it exists; ends when `signal` aborts.
   */
  async *events(threadId: string, auth: RequestAuth, since: number | undefined, signal: AbortSignal): AsyncGenerator<ProtocolEvent> {
    const { filter } = await this.ctx.authz.authorize(auth, 'threads:read', { thread_id: threadId });
    const visible = () =>
      this.ctx.threads.get(threadId, filter).then(
        () => true,
        (error: unknown) => {
          if (error instanceof NotFoundError) return false;
          throw error;
        },
      );
    let allowed = await visible();
    for await (const raw of this.broker.subscribe(threadStreamKey(threadId), { from: fromSince(since), signal })) {
      if (!allowed && !(allowed = await visible())) return;
      yield toProtocolEvent(raw);
    }
  }

  /** Closes the open WebSockets (the HTTP server's close does not see upgraded connections). */
  close(): void {
    for (const ws of this.wss.clients) {
      ws.close(1001, 'server stopping');
      setTimeout(() => ws.terminate(), 1000).unref();
    }
    this.wss.close();
  }

  /** 404 for a thread that exists and does not pass the user's `threads:read` filter. */
  checkReadable(threadId: string, auth: RequestAuth): Promise<void> {
    return this.commands.readableIfExists(threadId, auth);
  }

  routes(api: AgentApi): void {
    const tags = ['protocol'];
    api
      .route({
        // Credentials: as every thread route (custom auth: threads:read / threads:create_run / threads:update per command).
        method: 'post',
        path: '/threads/{thread_id}/commands',
        access: ['custom_auth'],
        summary: 'Run a protocol v2 command on a thread (answers a success or error envelope)',
        tags,
        params: ThreadPath,
        body: z.unknown(),
        response: CommandResponseSchema,
        handler: async ({ params, body, req, auth }) => {
          const parsed = CommandSchema.safeParse(body);
          if (!parsed.success) return invalidCommand(body);
          return this.commands.handle(params.thread_id, parsed.data, auth, passHeaders(req));
        },
      })
      .route({
        // Credentials: as every thread route (custom auth: threads:read).
        method: 'post',
        path: '/threads/{thread_id}/stream/events',
        access: ['custom_auth'],
        summary: "Stream a thread's protocol v2 events (SSE)",
        tags,
        params: ThreadPath,
        body: STREAM_BODY,
        events: COMMAND_EVENTS,
        errors: [404],
        handler: async ({ params, body, res, auth }) => {
          await this.checkReadable(params.thread_id, auth);
          const abort = new AbortController();
          const sse = new SseWriter(res);
          sse.onClose(() => abort.abort());
          try {
            for await (const event of this.events(params.thread_id, auth, body.since, abort.signal)) {
              if (matches(event, body)) sse.send({ id: event.event_id, event: event.method, data: event });
            }
          } catch (error) {
            if (!abort.signal.aborted) this.ctx.log.warn({ err: error, threadId: params.thread_id }, 'protocol event stream failed');
          }
          sse.end();
        },
      });
  }

  /**
   * The WebSocket on `GET /threads/{thread_id}/stream/events`: `authenticate` runs the server's
   * checks on the upgrade request (deployment credential, custom auth); a refusal closes the
   * socket with code 4000 + the HTTP status, as the SDK reads it.
   */
  upgradeHandler(authenticate: (req: IncomingMessage) => Promise<RequestAuth>): (req: IncomingMessage, socket: Duplex, head: Buffer) => boolean {
    const wss = this.wss;
    return (req, socket, head) => {
      const path = (req.url ?? '').split('?')[0] ?? '';
      const match = /^\/threads\/([^/]+)\/stream\/events$/.exec(path);
      if (!match || req.method !== 'GET') return false;
      const threadId = decodeURIComponent(match[1]!);
      wss.handleUpgrade(req, socket, head, (ws) => {
        // Listening at once: commands sent right after the handshake wait for the checks, in order.
        const checked = authenticate(req).then(async (auth) => {
          await this.checkReadable(threadId, auth);
          return auth;
        });
        new SocketSession(this, ws, threadId, checked, passHeaders(req as ExpressRequest)).start();
        checked.catch((error: unknown) => {
          const status =
            error instanceof AuthHttpError
              ? error.status
              : error instanceof NotFoundError
                ? 404
                : isBerthError(error) && error.code === 'unauthenticated'
                  ? 401
                  : isBerthError(error) && error.code === 'permission_denied'
                    ? 403
                    : 500;
          if (status === 500) this.ctx.log.error({ err: error, threadId }, 'protocol WebSocket refused');
          ws.close(4000 + status, status === 500 ? 'internal error' : (error as Error).message.slice(0, 100));
        });
      });
      return true;
    };
  }
}

/** Interval of WebSocket pings (as the SSE writer's heartbeats). */
const PING_MS = 15_000;

/** Subscriptions one WebSocket may hold at once. */
const MAX_SUBSCRIPTIONS = 64;

function invalidCommand(body: unknown): CommandResponse {
  const id = typeof body === 'object' && body !== null && Number.isInteger((body as { id?: unknown }).id) ? (body as { id: number }).id : null;
  return { type: 'error', id, error: 'invalid_argument', message: 'a protocol command is {id: integer >= 0, method: string, params?: object}' };
}

/**
 * One WebSocket: its subscriptions, and one pump sending the thread's events that match any of
 * them, in seq order (clients rely on one ordered wire: a run's end must not overtake its last
 * values). A new subscription restarts the pump from the start of the retained stream (from
 * `since` for a reconnect), as the SDK's own SSE transport reopens its stream: the events already
 * sent come again, and clients drop them by event_id.
 */
class SocketSession implements SubscriptionHost {
  private readonly filters = new Map<string, EventFilter>();
  /** Where the pump restarts once the command being answered is: set by the subscriptions it made. */
  private restartAt: number | undefined;
  private pump: { abort: AbortController; done: Promise<void> } | undefined;
  /** Messages received and not yet being answered. */
  private waiting = 0;
  private readonly closed = new AbortController();

  constructor(
    private readonly transport: ProtocolTransport,
    private readonly ws: WebSocket,
    private readonly threadId: string,
    private readonly checked: Promise<RequestAuth>,
    private readonly headers: Record<string, string>,
  ) {}

  start(): void {
    // Pings keep an idle socket open through proxies that close quiet connections.
    const ping = setInterval(() => this.ws.ping(), PING_MS).unref();
    this.ws.on('close', () => {
      clearInterval(ping);
      this.closed.abort();
    });
    // Commands are answered in the order they came, once the socket's checks passed (none when they failed).
    let queue = this.checked.then(
      () => true,
      () => false,
    );
    this.ws.on('message', (data) => {
      this.waiting++;
      queue = queue.then(async (ok) => {
        this.waiting--;
        if (ok) await this.onMessage(String(data), await this.checked);
        return ok;
      });
    });
  }

  private async onMessage(text: string, auth: RequestAuth): Promise<void> {
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return this.send({ type: 'error', id: null, error: 'invalid_argument', message: 'a protocol command must be JSON' });
    }
    const parsed = CommandSchema.safeParse(body);
    let response: CommandResponse;
    try {
      response = parsed.success ? await this.transport.commands.handle(this.threadId, parsed.data, auth, this.headers, this) : invalidCommand(body);
    } catch (error) {
      response = errorResponse(parsed.data?.id ?? null, error);
    }
    this.send(response);
    // The answer first, then what the new subscriptions replay: the client knows them by then.
    // Commands that came together (a client's subscriptions, sent at once) are all answered
    // first and replayed in one pass: a replay for the first alone would deliver the run's end
    // before the events only a later one selects, and a client may stop listening at the end.
    if (this.restartAt !== undefined && this.waiting === 0) {
      const since = this.restartAt;
      this.restartAt = undefined;
      await this.restart(since, auth);
    }
  }

  subscribe(filter: EventFilter & { since?: number | undefined }, id?: string): { subscription_id: string } {
    const subscription_id = id ?? subscriptionId(filter);
    // Each one replays the thread's stream: a socket may not ask for that without end.
    if (this.filters.size >= MAX_SUBSCRIPTIONS && !this.filters.has(subscription_id)) {
      throw new ProtocolCommandError('invalid_argument', `at most ${MAX_SUBSCRIPTIONS} subscriptions per connection: unsubscribe some first`);
    }
    this.filters.set(subscription_id, { channels: filter.channels, namespaces: filter.namespaces, depth: filter.depth });
    this.restartAt = Math.min(this.restartAt ?? Infinity, filter.since ?? 0);
    return { subscription_id };
  }

  unsubscribe(id: string): boolean {
    return this.filters.delete(id);
  }

  private async restart(since: number, auth: RequestAuth): Promise<void> {
    if (this.pump) {
      this.pump.abort.abort();
      await this.pump.done;
    }
    if (this.closed.signal.aborted) return;
    const abort = new AbortController();
    const signal = AbortSignal.any([abort.signal, this.closed.signal]);
    const done = (async () => {
      try {
        for await (const event of this.transport.events(this.threadId, auth, since || undefined, signal)) {
          if ([...this.filters.values()].some((filter) => matches(event, filter))) this.send(event);
        }
      } catch (error) {
        if (!signal.aborted) this.ws.close(4500, (error as Error).message.slice(0, 100));
      }
    })();
    this.pump = { abort, done };
  }

  private send(message: unknown): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify(message));
  }
}
