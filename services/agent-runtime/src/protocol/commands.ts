/**
 * Protocol v2 commands of a thread (`POST /threads/{thread_id}/commands`, and the WebSocket).
 * Each answers an envelope — `{type:"success", id, result, meta}` or `{type:"error", id, error,
 * message}` — never an HTTP error: bad input is `invalid_argument`, a thread the user may not
 * see is `no_such_run`, a refusal of the project's auth is `permission_denied`.
 *
 * Authorization (custom auth) per command, as the classic routes of the same operations:
 * `run.start`, `input.respond`, `state.fork` → `threads:create_run` (and `threads:read` for the
 * thread's state they look at); `input.inject` → `threads:update`; `state.get`,
 * `state.listCheckpoints`, `agent.getTree` and the subscription commands → `threads:read`.
 */
import { isBerthError, NotFoundError, RequestValidationError } from '@berth/errors';
import { z } from 'zod';
import type { RequestAuth } from '../auth/index.js';
import type { ServerContext } from '../api/context.js';
import type { Json, JsonObject, MetadataFilter } from '../storage/sql.js';
import type { ProtocolRun } from '../storage/runs.js';
import type { RunRequest } from '../runs/run-service.js';
import { seqOfEventId, type EventFilter, type Namespace } from './events.js';

export type ErrorCode =
  | 'invalid_argument'
  | 'unknown_command'
  | 'unknown_error'
  | 'no_such_run'
  | 'no_such_subscription'
  | 'no_such_interrupt'
  | 'no_such_checkpoint'
  | 'permission_denied'
  | 'not_supported';

export interface Command {
  id: number;
  method: string;
  params?: Record<string, unknown> | undefined;
}

export type CommandResponse =
  | { type: 'success'; id: number; result: unknown; meta: { thread_id: string; applied_through_seq: number } }
  | { type: 'error'; id: number | null; error: ErrorCode; message: string };

/** A command refused with a protocol error code. */
export class ProtocolCommandError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ProtocolCommandError';
  }
}

/** The answer to a command, as documented (result: the command's own). */
export const CommandResponseSchema = z.union([
  z.strictObject({
    type: z.literal('success'),
    id: z.number().int(),
    result: z.unknown(),
    meta: z.strictObject({ thread_id: z.string(), applied_through_seq: z.number().int() }),
  }),
  z.strictObject({ type: z.literal('error'), id: z.number().int().nullable(), error: z.string(), message: z.string() }),
]);

export const CommandSchema = z.object({ id: z.number().int().nonnegative(), method: z.string(), params: z.record(z.string(), z.unknown()).optional() });

const NamespaceSchema = z.array(z.string());
export const FilterSchema = z.object({
  channels: z.array(z.string()).min(1),
  namespaces: z.array(NamespaceSchema).optional(),
  depth: z.number().int().nonnegative().optional(),
  since: z.number().int().nonnegative().optional(),
});
const Obj = z.record(z.string(), z.unknown());
const Goto = z.union([z.string(), Obj, z.array(z.union([z.string(), Obj]))]);
const MultitaskStrategy = z.enum(['reject', 'rollback', 'interrupt', 'enqueue']);
const RunStart = z.object({
  assistant_id: z.string().min(1),
  input: z.unknown().optional(),
  config: Obj.optional(),
  context: Obj.optional(),
  metadata: Obj.optional(),
  multitaskStrategy: MultitaskStrategy.optional(),
  /** The SDK sends both spellings. */
  multitask_strategy: MultitaskStrategy.optional(),
});
const Resume = { update: Obj.optional(), goto: Goto.optional(), config: Obj.optional(), metadata: Obj.optional() };
const InputRespond = z.union([
  z.object({ responses: z.array(z.object({ interrupt_id: z.string(), response: z.unknown() })).min(1), ...Resume }),
  z.object({ interrupt_id: z.string(), response: z.unknown(), ...Resume }),
]);
const InputInject = z.object({
  namespace: NamespaceSchema.optional(),
  message: z.object({ role: z.enum(['user', 'system']), content: z.string(), name: z.string().optional() }),
});
const StateGet = z.object({ namespace: NamespaceSchema.optional(), keys: z.array(z.string()).optional() });
const ListCheckpoints = z.object({ namespace: NamespaceSchema.optional(), limit: z.number().int().min(1).max(1000).optional(), before: z.string().optional() });
const StateFork = z.object({ checkpoint_id: z.string().min(1), input: z.unknown().optional(), config: Obj.optional() });
const Unsubscribe = z.object({ subscription_id: z.string() });
const Reconnect = z.object({ run_id: z.string().optional(), last_event_id: z.string().optional(), subscriptions: z.array(z.string()).optional() });

function parse<T extends z.ZodType>(schema: T, params: unknown, method: string): z.output<T> {
  const parsed = schema.safeParse(params ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw new ProtocolCommandError('invalid_argument', `${method}: ${issue.path.length ? `${issue.path.join('.')}: ` : ''}${issue.message}`);
}

/** The command's error envelope for any failure (one place maps errors to codes). */
export function errorResponse(id: number | null, error: unknown): CommandResponse {
  if (error instanceof ProtocolCommandError) return { type: 'error', id, error: error.code, message: error.message };
  if (error instanceof RequestValidationError) return { type: 'error', id, error: 'invalid_argument', message: error.message };
  if (error instanceof NotFoundError) return { type: 'error', id, error: 'no_such_run', message: error.message };
  if (isBerthError(error)) {
    const code: ErrorCode =
      error.code === 'permission_denied' || error.code === 'unauthenticated'
        ? 'permission_denied'
        : error.code === 'invalid_argument' || error.code === 'validation_failed' || error.code === 'conflict'
          ? 'invalid_argument'
          : 'unknown_error';
    return { type: 'error', id, error: code, message: error.message };
  }
  return { type: 'error', id, error: 'unknown_error', message: 'the command failed on the server' };
}

/** A subscription of a WebSocket; its id carries its filter, so that a reconnect anywhere can restore it. */
export interface Subscription extends EventFilter {
  id: string;
}

export function subscriptionId(filter: EventFilter): string {
  const json = JSON.stringify({ c: filter.channels, n: filter.namespaces, d: filter.depth });
  return `sub_${Buffer.from(json).toString('base64url')}.${Math.random().toString(36).slice(2, 10)}`;
}

export function filterOfSubscriptionId(id: string): EventFilter | undefined {
  const match = /^sub_([A-Za-z0-9_-]+)\.[a-z0-9]+$/.exec(id);
  if (!match) return undefined;
  try {
    const raw = JSON.parse(Buffer.from(match[1]!, 'base64url').toString()) as { c?: unknown; n?: unknown; d?: unknown };
    const parsed = FilterSchema.safeParse({ channels: raw.c, namespaces: raw.n, depth: raw.d });
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** What a transport does for the subscription commands (only the WebSocket has any). */
export interface SubscriptionHost {
  /** Adds a subscription (replacing one of the same id); its events, from `since`, follow the command's answer. */
  subscribe(filter: EventFilter & { since?: number | undefined }, id?: string): { subscription_id: string };
  unsubscribe(id: string): boolean;
}

export class ProtocolCommands {
  constructor(private readonly ctx: ServerContext) {}

  /** Runs one command; with a `host`, the subscription commands act on its subscriptions. */
  async handle(threadId: string, command: Command, auth: RequestAuth, headers: Record<string, string>, host?: SubscriptionHost): Promise<CommandResponse> {
    try {
      const result = await this.dispatch(threadId, command, auth, headers, host);
      return { type: 'success', id: command.id, result, meta: { thread_id: threadId, applied_through_seq: 0 } };
    } catch (error) {
      if (!(error instanceof ProtocolCommandError) && !isBerthError(error))
        this.ctx.log.error({ err: error, threadId, method: command.method }, 'protocol command failed');
      return errorResponse(command.id, error);
    }
  }

  private async dispatch(threadId: string, command: Command, auth: RequestAuth, headers: Record<string, string>, host?: SubscriptionHost): Promise<unknown> {
    const { method, params } = command;
    switch (method) {
      case 'run.start':
        return this.runStart(threadId, parse(RunStart, params, method), auth, headers);
      case 'input.respond':
        return this.inputRespond(threadId, parse(InputRespond, params, method), auth, headers);
      case 'input.inject':
        return this.inputInject(threadId, parse(InputInject, params, method), auth);
      case 'state.get':
        return this.stateGet(threadId, parse(StateGet, params, method), auth);
      case 'state.listCheckpoints':
        return this.listCheckpoints(threadId, parse(ListCheckpoints, params, method), auth);
      case 'state.fork':
        return this.fork(threadId, parse(StateFork, params, method), auth, headers);
      case 'agent.getTree':
        return this.tree(threadId, auth);
      case 'subscription.subscribe': {
        const filter = parse(FilterSchema, params, method);
        await this.readableIfExists(threadId, auth);
        return this.host(host, method).subscribe(filter);
      }
      case 'subscription.unsubscribe': {
        const { subscription_id } = parse(Unsubscribe, params, method);
        if (!this.host(host, method).unsubscribe(subscription_id))
          throw new ProtocolCommandError('no_such_subscription', `no subscription ${subscription_id} on this connection`);
        return {};
      }
      case 'subscription.reconnect':
        return this.reconnect(threadId, parse(Reconnect, params, method), auth, this.host(host, method));
      default:
        throw new ProtocolCommandError('unknown_command', `unknown command: ${method}`);
    }
  }

  private host(host: SubscriptionHost | undefined, method: string): SubscriptionHost {
    if (!host)
      throw new ProtocolCommandError(
        'not_supported',
        `${method} is a WebSocket command: over HTTP, each POST /threads/{thread_id}/stream/events is a subscription`,
      );
    return host;
  }

  /** The `threads:read` filter, once the thread is known to pass it (else no_such_run). */
  private async readable(threadId: string, auth: RequestAuth): Promise<MetadataFilter | undefined> {
    const { filter } = await this.ctx.authz.authorize(auth, 'threads:read', { thread_id: threadId });
    await this.ctx.threads.get(threadId, filter);
    return filter;
  }

  /**
   * Refuses (no_such_run) a thread that exists and does not pass the user's `threads:read` filter;
   * a thread not created yet passes (its events are checked once it exists: see routes.ts).
   */
  async readableIfExists(threadId: string, auth: RequestAuth): Promise<void> {
    const { filter } = await this.ctx.authz.authorize(auth, 'threads:read', { thread_id: threadId });
    if (await this.ctx.threads.find(threadId)) await this.ctx.threads.get(threadId, filter);
  }

  /** The thread's pending interrupts, from its saved state (none for a thread that does not exist yet). */
  private async pendingInterrupts(threadId: string, filter: MetadataFilter | undefined): Promise<{ id: string }[]> {
    const state = await this.ctx.state.state(threadId, { subgraphs: true, filter });
    return state.interrupts as { id: string }[];
  }

  /** The assistant the thread's runs use (its latest run's: protocol commands keep them all on one). */
  private async boundAssistant(threadId: string): Promise<string | undefined> {
    const [last] = await this.ctx.runs.list(threadId, { limit: 1, offset: 0 });
    return last?.assistant_id;
  }

  /** Queues a protocol run (see RunKwargs.protocol), creating the thread when it is new. */
  private async startRun(threadId: string, request: RunRequest, protocol: ProtocolRun, auth: RequestAuth, headers: Record<string, string>) {
    return this.ctx.runService.create(threadId, { stream_mode: ['values'], if_not_exists: 'create', ...request, protocol }, headers, auth);
  }

  /** The assistant of the thread's runs, resolved; no_such_run for a thread without runs. */
  private async threadAssistant(threadId: string, what: string) {
    const assistantId = await this.boundAssistant(threadId);
    if (!assistantId) throw new ProtocolCommandError('no_such_run', `thread ${threadId} has no run to ${what}`);
    return this.ctx.resolveAssistant(assistantId);
  }

  private async runStart(threadId: string, params: z.output<typeof RunStart>, auth: RequestAuth, headers: Record<string, string>) {
    const assistant = await this.ctx.resolveAssistant(params.assistant_id).catch((error: unknown) => {
      throw error instanceof NotFoundError ? new ProtocolCommandError('invalid_argument', `no assistant ${params.assistant_id}`, { cause: error }) : error;
    });
    const exists = await this.ctx.threads.find(threadId);
    let pending: { id: string }[] = [];
    if (exists) {
      const filter = await this.readable(threadId, auth);
      const bound = await this.boundAssistant(threadId);
      if (bound && bound !== assistant.assistant_id)
        throw new ProtocolCommandError('invalid_argument', `thread ${threadId} is bound to assistant ${bound}; cannot run ${params.assistant_id}`);
      if (params.input !== undefined && params.input !== null) pending = await this.pendingInterrupts(threadId, filter);
    }
    // Input given while the thread waits at interrupts answers them (as the JS server does).
    const resume = pending.length > 0;
    const run = await this.startRun(
      threadId,
      {
        assistant_id: assistant.assistant_id,
        ...(resume ? { command: { resume: params.input } } : { input: params.input ?? null }),
        ...(params.config ? { config: params.config as JsonObject } : {}),
        ...(params.config?.configurable && typeof (params.config.configurable as JsonObject).checkpoint_id === 'string'
          ? { checkpoint_id: (params.config.configurable as JsonObject).checkpoint_id as string }
          : {}),
        ...(params.context ? { context: params.context as JsonObject } : {}),
        ...(params.metadata ? { metadata: params.metadata as JsonObject } : {}),
        multitask_strategy: params.multitaskStrategy ?? params.multitask_strategy ?? 'enqueue',
      },
      { graph: assistant.graph_id, answered: resume ? pending.map((p) => p.id) : [] },
      auth,
      headers,
    );
    return { run_id: run.run_id };
  }

  private async inputRespond(threadId: string, params: z.output<typeof InputRespond>, auth: RequestAuth, headers: Record<string, string>) {
    const filter = await this.readable(threadId, auth);
    const responses = 'responses' in params ? params.responses : [{ interrupt_id: params.interrupt_id, response: params.response }];
    const pending = new Set((await this.pendingInterrupts(threadId, filter)).map((i) => i.id));
    if (!pending.size) throw new ProtocolCommandError('no_such_run', `thread ${threadId} is not waiting at an interrupt`);
    const unknown = responses.find((r) => !pending.has(r.interrupt_id));
    if (unknown) throw new ProtocolCommandError('no_such_interrupt', `thread ${threadId} has no pending interrupt ${unknown.interrupt_id}`);
    const assistant = await this.threadAssistant(threadId, 'resume');
    const resume = Object.fromEntries(responses.map((r) => [r.interrupt_id, r.response])) as Json;
    await this.startRun(
      threadId,
      {
        assistant_id: assistant.assistant_id,
        command: { resume, ...(params.update ? { update: params.update } : {}), ...(params.goto !== undefined ? { goto: params.goto } : {}) },
        ...(params.config ? { config: params.config as JsonObject } : {}),
        ...(params.metadata ? { metadata: params.metadata as JsonObject } : {}),
      },
      { graph: assistant.graph_id, answered: responses.map((r) => r.interrupt_id) },
      auth,
      headers,
    );
    return {};
  }

  /** Adds a message to the thread's `messages` (as a state update): the next run sees it. */
  private async inputInject(threadId: string, params: z.output<typeof InputInject>, auth: RequestAuth) {
    if (params.namespace?.length) throw new ProtocolCommandError('not_supported', 'input.inject into a subgraph namespace is not supported');
    const { filter } = await this.ctx.authz.authorize(auth, 'threads:update', { thread_id: threadId });
    const { role, content, name } = params.message;
    await this.ctx.state.update(
      threadId,
      { values: { messages: [{ type: role === 'user' ? 'human' : 'system', content, ...(name ? { name } : {}) }] } },
      filter,
    );
    return {};
  }

  private async stateGet(threadId: string, params: z.output<typeof StateGet>, auth: RequestAuth) {
    const filter = await this.readable(threadId, auth);
    const state = await this.ctx.state.state(threadId, {
      filter,
      ...(params.namespace?.length ? { checkpoint: { checkpoint_ns: params.namespace.join('|') } } : {}),
    });
    const values = (state.values ?? {}) as Record<string, unknown>;
    const picked = params.keys ? Object.fromEntries(Object.entries(values).filter(([key]) => params.keys!.includes(key))) : values;
    const checkpoint = state.checkpoint ? { id: state.checkpoint.checkpoint_id, ns: state.checkpoint.checkpoint_ns ?? '' } : undefined;
    return { values: picked, ...(checkpoint ? { checkpoint } : {}) };
  }

  private async listCheckpoints(threadId: string, params: z.output<typeof ListCheckpoints>, auth: RequestAuth) {
    const filter = await this.readable(threadId, auth);
    const history = await this.ctx.state.history(threadId, {
      limit: params.limit ?? 10,
      filter,
      ...(params.before ? { before: params.before } : {}),
      ...(params.namespace?.length ? { checkpoint: { checkpoint_ns: params.namespace.join('|') } } : {}),
    });
    return {
      checkpoints: history.flatMap((s) => {
        if (!s.checkpoint) return [];
        const metadata = s.metadata ?? {};
        const writes = metadata.writes as Record<string, unknown> | null | undefined;
        const node = writes ? Object.keys(writes)[0] : undefined;
        return [
          {
            id: s.checkpoint.checkpoint_id,
            timestamp: s.created_at ?? '',
            step: typeof metadata.step === 'number' ? metadata.step : 0,
            ...(node ? { node_name: node } : {}),
            metadata,
          },
        ];
      }),
    };
  }

  private async fork(threadId: string, params: z.output<typeof StateFork>, auth: RequestAuth, headers: Record<string, string>) {
    const filter = await this.readable(threadId, auth);
    await this.ctx.state.state(threadId, { checkpoint: { checkpoint_id: params.checkpoint_id }, filter }).catch((error: unknown) => {
      throw error instanceof NotFoundError ? new ProtocolCommandError('no_such_checkpoint', error.message, { cause: error }) : error;
    });
    const assistant = await this.threadAssistant(threadId, 'fork from');
    const run = await this.startRun(
      threadId,
      {
        assistant_id: assistant.assistant_id,
        input: (params.input ?? null) as Json,
        checkpoint_id: params.checkpoint_id,
        ...(params.config ? { config: params.config as JsonObject } : {}),
      },
      { graph: assistant.graph_id, answered: [] },
      auth,
      headers,
    );
    return { run_id: run.run_id, thread_id: threadId };
  }

  /**
   * The agent tree as the thread's saved state has it: the root (its status the thread's) and the
   * subgraphs the state holds open (waiting at an interrupt, or running).
   */
  private async tree(threadId: string, auth: RequestAuth) {
    const { filter } = await this.ctx.authz.authorize(auth, 'threads:read', { thread_id: threadId });
    const thread = await this.ctx.threads.get(threadId, filter);
    const state = await this.ctx.state.state(threadId, { subgraphs: true, filter });
    type Task = (typeof state.tasks)[number];
    type Node = { namespace: Namespace; status: string; graph_name: string; children?: Node[] };
    const children = (tasks: Task[], parent: Namespace): Node[] =>
      tasks
        .filter((task) => task.state)
        .map((task) => {
          const namespace = [...parent, `${task.name}:${task.id}`];
          const below = children(task.state!.tasks as Task[], namespace);
          return { namespace, status: task.interrupts.length ? 'interrupted' : 'running', graph_name: task.name, ...(below.length ? { children: below } : {}) };
        });
    const below = children(state.tasks, []);
    const status = { idle: 'completed', busy: 'running', interrupted: 'interrupted', error: 'failed' }[thread.status as string] ?? 'started';
    return { tree: { namespace: [], status, graph_name: (await this.boundGraph(threadId)) ?? 'root', ...(below.length ? { children: below } : {}) } };
  }

  private async boundGraph(threadId: string): Promise<string | undefined> {
    const assistantId = await this.boundAssistant(threadId);
    return assistantId ? (await this.ctx.assistants.get(assistantId).catch(() => undefined))?.graph_id : undefined;
  }

  private async reconnect(threadId: string, params: z.output<typeof Reconnect>, auth: RequestAuth, host: SubscriptionHost) {
    await this.readableIfExists(threadId, auth);
    const since = params.last_event_id === undefined ? undefined : seqOf(params.last_event_id);
    const filters = (params.subscriptions ?? []).map((id) => ({ id, filter: filterOfSubscriptionId(id) }));
    const unknown = filters.find((f) => !f.filter);
    if (unknown) throw new ProtocolCommandError('no_such_subscription', `not a subscription of this server: ${unknown.id}`);
    for (const { id, filter } of filters) host.subscribe({ ...filter!, since }, id);
    // The events missed follow this answer (their number is not known before they are read).
    return { restored: true };
  }
}

function seqOf(eventId: string): number {
  const seq = seqOfEventId(eventId);
  if (seq === undefined) throw new ProtocolCommandError('invalid_argument', `not an event id of this server: ${eventId}`);
  return seq;
}
