/**
 * The API side of runs: validate and queue a run (with its multitask strategy), stream its
 * events, wait for it, cancel it. Execution happens in the worker role (see worker.ts).
 */
import { randomUUID } from 'node:crypto';
import { ConflictError, NotFoundError, RequestValidationError } from '@berth/errors';
import type { Logger } from '@berth/log';
import type { BrokerEvent, EventBroker, SubscribeFrom } from '@berth/broker';
import { metadataOf, type Authorizer, type RequestAuth } from '../auth/index.js';
import type { Assistant } from '../storage/assistants.js';
import type { Json, JsonObject } from '../storage/sql.js';
import {
  noAssistantFor,
  type MultitaskStrategy,
  type ProtocolRun,
  type Run,
  type RunKwargs,
  type RunResult,
  type RunStatus,
  type RunStore,
} from '../storage/runs.js';
import type { ThreadStore } from '../storage/threads.js';
import type { RunDispatcher } from './dispatcher.js';
import type { LocalSlot } from './worker.js';

export interface RunRequest {
  assistant_id: string;
  input?: unknown;
  command?: { resume?: unknown; update?: unknown; goto?: unknown } | null;
  config?: JsonObject;
  context?: JsonObject;
  metadata?: JsonObject;
  stream_mode?: string | string[];
  stream_subgraphs?: boolean;
  stream_resumable?: boolean;
  interrupt_before?: string[] | '*';
  interrupt_after?: string[] | '*';
  multitask_strategy?: MultitaskStrategy;
  on_disconnect?: 'cancel' | 'continue';
  on_completion?: 'delete' | 'keep';
  if_not_exists?: 'create' | 'reject';
  after_seconds?: number;
  checkpoint_id?: string;
  checkpoint?: { checkpoint_id?: string } | null;
  durability?: 'sync' | 'async' | 'exit';
  /** POSTed the run when it ends (see runs/webhooks.ts). */
  webhook?: string;
  /** Set by protocol v2 commands (never by the classic routes' schemas): see RunKwargs.protocol. */
  protocol?: ProtocolRun;
}

const TERMINAL = new Set(['success', 'error', 'timeout', 'interrupted']);

export interface RunServiceDeps {
  threads: ThreadStore;
  runs: RunStore;
  broker: EventBroker;
  dispatcher: RunDispatcher;
  /**
   * The id and graph of the assistant a run names (an id, or a graph name for its system
   * assistant); that it still exists is checked when the run is created.
   */
  resolveAssistant(ref: string): Promise<Pick<Assistant, 'assistant_id' | 'graph_id'>>;
  checkContext(graphId: string, context: Record<string, unknown>): void;
  /** Runs the `threads:create_run` handler of custom auth; without it every run is allowed. */
  authz?: Authorizer;
  log: Logger;
  /** Starts a due run in this process when a local worker has room; false to use the queue. */
  runLocally?: (runId: string) => boolean;
  /** Holds a slot of a local worker for a run about to be created, which may then claim it at once. */
  reserveLocal?: () => LocalSlot | undefined;
  /** How a run this process is executing ended, once it has; undefined when it runs elsewhere. */
  localResult?: (runId: string) => Promise<RunResult | undefined> | undefined;
  /** Checks a run's webhook URL (422 when refused); unset: this server sends no webhooks (422). */
  checkWebhook?: (url: string) => Promise<void>;
}

/**
 * The authenticated user in a run's `config.configurable`, where graph code finds it: the keys the
 * LangGraph servers set (`langgraph_auth_user`, `langgraph_auth_user_id`,
 * `langgraph_auth_permissions`) and `graph_auth_user` (the platform interface's name for the user).
 */
export function authConfigurable(auth: RequestAuth): JsonObject {
  if (!auth) return {};
  const user = JSON.parse(JSON.stringify(auth.user)) as JsonObject;
  return {
    langgraph_auth_user: user,
    graph_auth_user: user,
    langgraph_auth_user_id: auth.user.identity,
    langgraph_auth_permissions: [...auth.permissions],
  };
}

export class RunService {
  constructor(private readonly deps: RunServiceDeps) {}

  /**
   * Queues a run; without `threadId` on a new temporary thread (a threadless run). With custom
   * auth, the `threads:create_run` handler sees the run first: its filter must match an existing
   * thread (404 otherwise), its edits of `value.metadata` become the run's metadata (and the
   * metadata of a thread the run creates), and the user goes into the run's configurable.
   * `options.run_id` names the run (a cron tick's, derived from the tick); a run of that id
   * existing already fails with the runs table's unique violation.
   */
  async create(
    threadId: string | undefined,
    request: RunRequest,
    headers: Record<string, string>,
    auth?: RequestAuth,
    options: { run_id?: string } = {},
  ): Promise<Run> {
    const { threads, runs, broker, dispatcher } = this.deps;
    const assistant = await this.deps.resolveAssistant(request.assistant_id).catch((error: unknown) => {
      throw error instanceof NotFoundError ? new NotFoundError(noAssistantFor(request.assistant_id), { cause: error }) : error;
    });
    if (request.context) this.deps.checkContext(assistant.graph_id, request.context);
    if (request.webhook !== undefined) await this.checkWebhook(request.webhook);
    const temporary = threadId === undefined;
    const thread_id = threadId ?? randomUUID();
    const run_id = options.run_id ?? randomUUID();
    const multitask_strategy = request.multitask_strategy ?? 'enqueue';
    const modes = request.stream_mode === undefined ? ['values'] : Array.isArray(request.stream_mode) ? request.stream_mode : [request.stream_mode];
    const kwargs: RunKwargs = {
      input: (request.input ?? null) as Json,
      command: (request.command ?? null) as RunKwargs['command'],
      config: request.config ?? {},
      context: request.context ?? {},
      stream_mode: modes,
      stream_subgraphs: request.stream_subgraphs ?? false,
      stream_resumable: request.stream_resumable ?? false,
      ...(request.interrupt_before ? { interrupt_before: request.interrupt_before } : {}),
      ...(request.interrupt_after ? { interrupt_after: request.interrupt_after } : {}),
      ...((request.checkpoint_id ?? request.checkpoint?.checkpoint_id) ? { checkpoint_id: request.checkpoint_id ?? request.checkpoint!.checkpoint_id! } : {}),
      ...(request.durability ? { durability: request.durability } : {}),
      ...(request.webhook !== undefined ? { webhook: request.webhook } : {}),
      ...(request.protocol ? { protocol: request.protocol } : {}),
      on_completion: request.on_completion ?? 'delete',
      temporary,
      headers,
    };
    const authorized = this.deps.authz
      ? await this.deps.authz.authorize(auth, 'threads:create_run', {
          thread_id: threadId,
          assistant_id: assistant.assistant_id,
          run_id,
          status: 'pending',
          metadata: request.metadata ?? {},
          prevent_insert_if_inflight: multitask_strategy === 'reject',
          multitask_strategy,
          if_not_exists: request.if_not_exists ?? 'reject',
          after_seconds: request.after_seconds ?? 0,
          kwargs,
        })
      : undefined;
    const metadata = authorized ? metadataOf(authorized.value, 'threads:create_run') : (request.metadata ?? {});
    // A thread this run creates is the user's by construction: the filter applies to existing ones.
    let created = false;
    if (temporary) {
      await threads.create({ thread_id, metadata, if_exists: 'raise', temporary: true });
      created = true;
    } else if (request.if_not_exists === 'create') {
      created = (await threads.insert({ thread_id, metadata })) !== undefined;
    }
    if (auth) {
      // Set last, so a client cannot pose as someone else through config.configurable.
      const configurable = { ...((kwargs.config?.configurable as JsonObject | undefined) ?? {}), ...authConfigurable(auth) };
      kwargs.config = { ...kwargs.config, configurable };
    }
    const delayMs = (request.after_seconds ?? 0) * 1000;
    // A run that may start at once is claimed by the statement that creates it, for a local slot.
    const slot = delayMs > 0 ? undefined : this.deps.reserveLocal?.();
    const { run, superseded, claimed } = await runs
      .create({
        run_id,
        thread_id,
        assistant_id: assistant.assistant_id,
        graph_id: assistant.graph_id,
        metadata,
        kwargs,
        multitask_strategy,
        after_seconds: request.after_seconds ?? 0,
        ...(authorized?.filter && !created ? { threadFilter: authorized.filter } : {}),
        ...(slot ? { claimFor: { owner: slot.owner, leaseMs: slot.leaseMs } } : {}),
      })
      .catch(async (error: unknown) => {
        slot?.release();
        // A threadless run that could not be created (its assistant is gone) leaves no thread.
        if (temporary) {
          await threads
            .delete(thread_id)
            .catch((cleanup: unknown) =>
              this.deps.log.warn({ err: cleanup, threadId: thread_id }, 'could not delete the thread of a threadless run that was not created'),
            );
        }
        throw error;
      });
    if (claimed) slot!.start(claimed);
    else slot?.release();
    const action = run.multitask_strategy === 'rollback' ? 'rollback' : 'interrupt';
    for (const old of superseded) {
      if (old.status === 'running') {
        await runs.requestCancel(old.run_id, action);
        await broker.sendControl(old.run_id, { action });
      } else await broker.end(old.run_id);
    }
    if (!claimed && (delayMs > 0 || !this.deps.runLocally?.(run.run_id))) await dispatcher.dispatch(run.run_id, delayMs);
    return run;
  }

  /**
   * 422 unless `url` may receive run webhooks here: an absolute http(s) URL whose host is not a
   * refused address, on a server that has a signing secret (crons check theirs with it too).
   */
  async checkWebhook(url: string): Promise<void> {
    if (this.deps.checkWebhook) return this.deps.checkWebhook(url);
    throw new RequestValidationError([
      { loc: ['body', 'webhook'], msg: 'this server sends no webhooks: it has no signing secret (BERTH_WEBHOOK_SECRET)', type: 'value_error' },
    ]);
  }

  /** Events of a run for an SSE response. `from` decides what is replayed. */
  events(runId: string, from: SubscribeFrom, signal?: AbortSignal): AsyncIterable<BrokerEvent> {
    return this.deps.broker.subscribe(runId, { from, ...(signal ? { signal } : {}) });
  }

  /**
   * Whether the run's events can still be subscribed to (a subscription to a forgotten stream
   * would wait for an event that never comes): it has not ended, or its stream is retained.
   */
  async eventsRetained(run: Run): Promise<boolean> {
    if (!TERMINAL.has(run.status)) return true;
    if (await this.deps.broker.isEnded(run.run_id)) return true;
    // Recorded as ended, its stream is about to be: the worker ends it right after (worker.ts).
    return Date.now() - run.updated_at.getTime() < 30_000;
  }

  /** Resolves once the run has finished, with its final status and values. */
  async join(run: Run, signal?: AbortSignal): Promise<{ status?: RunStatus; output: Json | null }> {
    const local = TERMINAL.has(run.status) ? undefined : await this.deps.localResult?.(run.run_id);
    if (local) return local;
    if (!TERMINAL.has(run.status)) {
      for await (const event of this.deps.broker.subscribe(run.run_id, { from: 'now', ...(signal ? { signal } : {}) })) void event;
    }
    // The stream may have ended before we subscribed: the run row is the truth.
    const result = await this.waitFinished(run.run_id, signal);
    return { ...(result ? { status: result.status } : {}), output: result?.output ?? null };
  }

  /** Stops a run: pending ones end at once, running ones within moments (their worker aborts the graph). */
  async cancel(run: Run, action: 'interrupt' | 'rollback', wait: boolean): Promise<void> {
    if (TERMINAL.has(run.status)) throw new ConflictError(`Run ${run.run_id} has already ended (${run.status})`);
    if (await this.deps.runs.cancelPending(run.run_id, action)) {
      await this.deps.broker.end(run.run_id);
      await this.deps.threads.idleWhenNoRuns(run.thread_id);
      const next = await this.deps.runs.nextOnThread(run.thread_id);
      if (next) await this.deps.dispatcher.dispatch(next.run_id);
      return;
    }
    await this.deps.runs.requestCancel(run.run_id, action);
    await this.deps.broker.sendControl(run.run_id, { action });
    if (wait) await this.waitFinished(run.run_id);
  }

  private async waitFinished(runId: string, signal?: AbortSignal): Promise<RunResult | undefined> {
    for (let delay = 5; ; delay = Math.min(delay * 2, 200)) {
      const current = await this.deps.runs.result(runId);
      if (!current || TERMINAL.has(current.status)) return current;
      if (signal?.aborted) throw signal.reason;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
