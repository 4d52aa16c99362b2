/**
 * The A2A methods on top of the run service: a message starts a run (or resumes the thread's
 * pending interrupt), a task is read from its run, its thread and the run's final values.
 */
import { randomUUID } from 'node:crypto';
import type { Request } from 'express';
import { isUuid } from '@berth/ids';
import { ConflictError, NotFoundError } from '@berth/errors';
import type { RequestAuth } from '../auth/index.js';
import { INVALID_PARAMS, JsonRpcError } from '../api/json-rpc.js';
import { passHeaders } from '../api/runs.js';
import type { ServerContext } from '../api/context.js';
import type { RunRequest } from '../runs/run-service.js';
import type { Assistant } from '../storage/assistants.js';
import type { Run } from '../storage/runs.js';
import type { JsonObject } from '../storage/sql.js';
import { notCancelable, taskNotFound, unsupported } from './errors.js';
import { aiText, ARTIFACT_NAME, artifactIdOf, artifactOf, MESSAGE_KEY, resumeValue, runInput, stateOf, taskOf, taskView, type TaskView } from './tasks.js';
import { TERMINAL_STATES, type Message, type StreamEvent, type Task, type TaskState } from './wire.js';

/** Who asks, about which agent. */
export interface Caller {
  auth: RequestAuth;
  req: Request;
  assistant: Assistant;
}

export interface SendOptions {
  /** Answer at once with the task as it is (1.0 `returnImmediately`, 0.3 `blocking: false`). */
  returnImmediately: boolean;
  historyLength?: number;
  /** Called with the new run's id before the run exists, so nothing it does is missed (push configs). */
  beforeRun?: (taskId: string, contextId: string) => Promise<unknown>;
  /** The run streams its AI messages (`messages-tuple`) for SendStreamingMessage's artifact chunks. @default false */
  streaming?: boolean;
  /** Undoes `beforeRun` when the run could not be created. */
  runFailed?: (taskId: string) => Promise<void>;
}

export class A2aTasks {
  constructor(private readonly ctx: ServerContext) {}

  /** The run of a task of this assistant that the user may `action`; -32001 otherwise. */
  async find(caller: Caller, taskId: string, action: 'threads:read' | 'threads:update' = 'threads:read'): Promise<Run> {
    if (!isUuid(taskId)) throw taskNotFound(taskId);
    const run = await this.ctx.runs.getById(taskId);
    if (!run || run.assistant_id !== caller.assistant.assistant_id) throw taskNotFound(taskId);
    const { filter } = await this.ctx.authz.authorize(caller.auth, action, { thread_id: run.thread_id, run_id: run.run_id });
    try {
      return await this.ctx.runs.get(run.thread_id, run.run_id, filter);
    } catch (error) {
      if (error instanceof NotFoundError) throw taskNotFound(taskId);
      throw error;
    }
  }

  /** What a task is read from, as of now. */
  view(run: Run): Promise<TaskView> {
    return taskView(this.ctx, run);
  }

  async task(run: Run, options: { historyLength?: number } = {}): Promise<Task> {
    return taskOf(await this.view(run), options);
  }

  /**
   * Starts the task of a message: a new run on the message's context (a new thread when it names
   * none), resuming the thread's pending interrupt when there is one. A message naming a task
   * continues it only while that task is `input-required`.
   */
  async send(caller: Caller, message: Message, options: SendOptions): Promise<{ run: Run; task: Task }> {
    const { ctx } = this;
    let contextId = message.contextId;
    if (message.taskId !== undefined) {
      const previous = await this.find(caller, message.taskId);
      if (contextId !== undefined && contextId !== previous.thread_id) {
        throw new JsonRpcError(INVALID_PARAMS, `Task ${message.taskId} belongs to context ${previous.thread_id}, not ${contextId}`, {
          taskId: message.taskId,
          contextId: previous.thread_id,
        });
      }
      const view = await this.view(previous);
      const state = stateOf(view.run, view.thread, view.latestRunId);
      if (state !== 'input-required') {
        throw unsupported(
          `Task ${message.taskId} is ${state}: only an input-required task takes more input; send a new message in context ${previous.thread_id} instead`,
          { taskId: message.taskId, state },
        );
      }
      contextId = previous.thread_id;
    }
    if (contextId !== undefined && !isUuid(contextId)) {
      throw new JsonRpcError(INVALID_PARAMS, 'message.contextId must be a UUID (it names the thread)', { contextId });
    }
    const threadId = contextId ?? randomUUID();
    // A context the user may not read is as good as a new one to them; creating the run will refuse it.
    const thread =
      contextId === undefined
        ? undefined
        : await ctx.threads.find(threadId, (await ctx.authz.authorize(caller.auth, 'threads:read', { thread_id: threadId })).filter);
    const graphOfThread = thread?.metadata.graph_id;
    if (typeof graphOfThread === 'string' && graphOfThread !== caller.assistant.graph_id) {
      throw new JsonRpcError(INVALID_PARAMS, `Context ${threadId} belongs to another agent`, { contextId: threadId });
    }
    const waiting = thread?.status === 'interrupted' && Object.keys(thread.interrupts ?? {}).length > 0;
    const request: RunRequest = {
      assistant_id: caller.assistant.assistant_id,
      ...(waiting ? { command: { resume: resumeValue(message) } } : { input: runInput(message) }),
      metadata: { [MESSAGE_KEY]: JSON.parse(JSON.stringify({ ...message, contextId: threadId })) as JsonObject },
      if_not_exists: 'create',
      stream_mode: options.streaming ? ['values', 'messages-tuple'] : ['values'],
    };
    const runId = randomUUID();
    await options.beforeRun?.(runId, threadId);
    let run: Run;
    try {
      run = await ctx.runService.create(threadId, request, passHeaders(caller.req), caller.auth, { run_id: runId });
    } catch (error) {
      await options.runFailed?.(runId);
      throw error;
    }
    if (!options.returnImmediately) {
      const abort = new AbortController();
      caller.req.res?.on('close', () => abort.abort());
      await ctx.runService.join(run, abort.signal);
    }
    return { run, task: await this.task(run, options.historyLength !== undefined ? { historyLength: options.historyLength } : {}) };
  }

  /** Cancels a task whose run has not ended; -32002 for any other. */
  async cancel(caller: Caller, taskId: string): Promise<Task> {
    const run = await this.find(caller, taskId, 'threads:update');
    const view = await this.view(run);
    const state = stateOf(view.run, view.thread, view.latestRunId);
    if (state !== 'submitted' && state !== 'working') throw notCancelable(taskId, state);
    try {
      await this.ctx.runService.cancel(view.run, 'interrupt', true);
    } catch (error) {
      // It ended meanwhile: as good as any other ended task.
      if (error instanceof ConflictError) throw notCancelable(taskId, 'ended');
      throw error;
    }
    return this.task(run);
  }

  /**
   * A task's events from now on: the task first, `working` once its run is under way, the text of
   * AI messages as the run streams them (artifact chunks, with `messages-tuple`), then the whole
   * artifact (replacing the chunks) and the final (terminal or interrupted) status. Ends with the run.
   */
  async *events(run: Run, signal: AbortSignal, options: { justCreated: boolean }): AsyncGenerator<StreamEvent> {
    // A run this call just created is shown as it was created, and its events are followed from
    // its start even when it has ended already: they are still retained (an older run's may be
    // gone, and would be waited for in vain).
    const start: TaskView = options.justCreated ? { run, output: null, thread: undefined, latestRunId: run.run_id } : await this.view(run);
    const state = stateOf(start.run, start.thread, start.latestRunId);
    yield { task: taskOf(start) };
    const ids = { taskId: run.run_id, contextId: run.thread_id };
    if (state === 'submitted' || state === 'working') {
      let working = state === 'working';
      let streamed = false;
      for await (const event of this.ctx.runService.events(run.run_id, 'start', signal)) {
        if (!working && event.event !== 'end') {
          working = true;
          yield { statusUpdate: { ...ids, status: { state: 'working', timestamp: new Date().toISOString() }, final: false } };
        }
        const text = event.event === 'messages' ? aiText(event.data) : '';
        if (text) {
          yield {
            artifactUpdate: {
              ...ids,
              artifact: { artifactId: artifactIdOf(run.run_id), name: ARTIFACT_NAME, parts: [{ text }] },
              append: streamed,
              lastChunk: false,
            },
          };
          streamed = true;
        }
      }
      await this.ctx.runService.join(start.run, signal);
    }
    const end = await this.view(run);
    const task = taskOf(end);
    if (task.status.state === 'completed') {
      const artifact = artifactOf(run.run_id, end.output);
      if (artifact) yield { artifactUpdate: { ...ids, artifact, append: false, lastChunk: true } };
    }
    yield { statusUpdate: { ...ids, status: task.status, final: true } };
  }
}

export const isFinal = (state: TaskState) => TERMINAL_STATES.has(state) || state === 'input-required' || state === 'auth-required';
