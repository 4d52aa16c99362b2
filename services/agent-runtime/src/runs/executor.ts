/**
 * Executes one run: builds the graph with the server's checkpointer, streams it, publishes every
 * chunk as an SSE event through the broker, and reports how the run ended.
 */
import type { BaseCheckpointSaver, BaseStore } from '@langchain/langgraph';
import type { EventBroker } from '@berth/broker';
import type { Logger } from '@berth/log';
import type { LoadedGraph } from '@berth/langgraph-project';
import type { Assistant } from '../storage/assistants.js';
import { FENCE_KEY, RunFencedError, type WriteFence } from '../storage/checkpoint-batch.js';
import { retryTransient } from '../storage/retry.js';
import type { Run } from '../storage/runs.js';
import type { RunTracing } from '../tracing/run-tracing.js';
import type { Json, JsonObject } from '../storage/sql.js';
import { toWire } from './serialize.js';
import { toCommand } from './thread-state.js';
import { EventPipe } from './event-pipe.js';
import { StreamTranslator, graphModes } from './stream-modes.js';
import { interruptsIn, ProtocolPublisher, type GraphProtocolEvent } from '../protocol/events.js';
import { secondsSince } from '@berth/metrics';
import { runFirstEvent } from './metrics.js';

export interface RunOutcome {
  /** A graph that stops at an interrupt still ends its run `success`; its thread becomes `interrupted`. */
  status: 'success' | 'error';
  interrupted: boolean;
  values: Json | null;
  /**
   * What `/wait` and `/join` answer: the last root `values` chunk — `{__interrupt__: [...]}` when
   * the run stopped at an interrupt, as the LangGraph API answers — else `values`.
   */
  output: Json | null;
  /** Open interrupts by task id. */
  interrupts: JsonObject;
  error?: { error: string; message: string };
}

/** What the root stream showed of how the run ended. */
interface StreamOutcome {
  /** The last root `values` chunk that is state (not an `__interrupt__` one). */
  values?: unknown;
  /** The last root `values` chunk of any kind. */
  output?: unknown;
  /** A root `__interrupt__` update came by. */
  interrupted: boolean;
}

export interface ExecutorDeps {
  graph(graphId: string): LoadedGraph;
  /** The thread's latest checkpoint id (root namespace), if any. */
  latestCheckpoint(threadId: string): Promise<string | null>;
  /** The thread's recorded next protocol v2 event number (see protocol/events.ts). */
  eventSeq(threadId: string): Promise<number>;
  checkpointer: BaseCheckpointSaver & {
    /** Declares the durability of the run on a thread (see BerthPostgresSaver); returns its release. */
    runDurability?(threadId: string, durability: 'sync' | 'async' | 'exit'): () => void;
    /** Waits for the thread's writes queued behind (async durability); rejects when one failed. */
    flushThread?(threadId: string): Promise<void>;
    /** Declares that the thread has no checkpoint yet (its first read needs no query); returns its release. */
    primeEmpty?(threadId: string): () => void;
  };
  /** The long-term store graphs see as `config.store` / `getStore()`. */
  store: BaseStore;
  broker: EventBroker;
  log: Logger;
  /** Traces every run (a tracer callback per run); none: runs are not traced. */
  tracing?: RunTracing;
  /**
   * How long the run's events, and its last read of the state, are retried while the database is
   * unreachable (the worker holds the run that long; the lease's abort ends it sooner).
   * @default 65_000
   */
  retryWritesMs?: number;
}

/** Thrown into the graph's signal when a client cancels the run. */
export class RunCancelledError extends Error {
  constructor(readonly action: 'interrupt' | 'rollback') {
    super(`run cancelled (${action})`);
    this.name = 'RunCancelledError';
  }
}

/** The `{__interrupt__: [...]}` chunk LangGraph streams (values and updates) when a run stops at an interrupt. */
function isInterruptChunk(data: unknown): boolean {
  return typeof data === 'object' && data !== null && '__interrupt__' in data;
}

export class RunExecutor {
  constructor(private readonly deps: ExecutorDeps) {}

  async execute(run: Run, assistant: Assistant, signal: AbortSignal): Promise<RunOutcome> {
    const started = performance.now();
    const { broker } = this.deps;
    const kwargs = run.kwargs;
    const stop = new AbortController();
    const configurable = {
      ...((assistant.config.configurable as JsonObject | undefined) ?? {}),
      ...((kwargs.config?.configurable as JsonObject | undefined) ?? {}),
      ...(kwargs.headers ?? {}),
      thread_id: run.thread_id,
      run_id: run.run_id,
      graph_id: assistant.graph_id,
      assistant_id: assistant.assistant_id,
      ...(kwargs.checkpoint_id ? { checkpoint_id: kwargs.checkpoint_id } : {}),
      // The checkpointer writes only while this attempt holds the run (see checkpoint-batch.ts).
      [FENCE_KEY]: { runId: run.run_id, attempt: run.attempt } satisfies WriteFence,
    };
    const requested = kwargs.stream_mode.length ? kwargs.stream_mode : ['values'];
    const config = {
      configurable,
      context: { ...assistant.context, ...(kwargs.context ?? {}) },
      recursionLimit: (kwargs.config?.recursion_limit as number | undefined) ?? (assistant.config.recursion_limit as number | undefined) ?? 25,
      tags: [...((assistant.config.tags as string[] | undefined) ?? []), ...((kwargs.config?.tags as string[] | undefined) ?? [])],
      metadata: {
        ...run.metadata,
        run_id: run.run_id,
        thread_id: run.thread_id,
        graph_id: assistant.graph_id,
        assistant_id: assistant.assistant_id,
        run_attempt: run.attempt,
      },
      // A failure on this side of the stream (an event that cannot be published or sent) stops
      // the graph through this signal, so that it ends its runs (and their traces) as failed.
      signal: AbortSignal.any([signal, stop.signal]),
      // The root run of the trace is the run itself (its id), as the LangGraph API records it: an
      // attempt that takes the run over adds to that trace instead of starting another.
      runId: run.run_id,
      // The trace's root run is LangGraph's (named "LangGraph", as the anchor's traces and streamed
      // events are); its metadata (above) names the graph, assistant, thread and run.
      ...(this.deps.tracing ? { callbacks: this.deps.tracing.handlers() } : {}),
      // values and updates always: the last root values are the run's output, and a root
      // `__interrupt__` update says the run stopped at an interrupt (see `finalState`).
      streamMode: [...new Set([...graphModes(requested), 'values' as const, 'updates' as const])],
      subgraphs: true,
      ...(kwargs.interrupt_before ? { interruptBefore: kwargs.interrupt_before } : {}),
      ...(kwargs.interrupt_after ? { interruptAfter: kwargs.interrupt_after } : {}),
      ...(kwargs.durability ? { durability: kwargs.durability } : {}),
    };
    const graph = await this.deps.graph(assistant.graph_id).getGraph(config, { checkpointer: this.deps.checkpointer, store: this.deps.store });
    const retryWritesMs = this.deps.retryWritesMs ?? 65_000;
    const events = new EventPipe(broker, run.run_id, { retryMs: retryWritesMs, signal });
    events.push('metadata', { run_id: run.run_id, attempt: run.attempt });

    // A protocol v2 run also publishes to its thread's protocol stream (see protocol/events.ts).
    const protocol = kwargs.protocol
      ? new ProtocolPublisher(broker, run.thread_id, kwargs.protocol, { retryMs: retryWritesMs, signal, startAt: await this.deps.eventSeq(run.thread_id) })
      : undefined;
    protocol?.start();
    const translator = new StreamTranslator(requested);
    let failure: unknown;
    const seen: StreamOutcome = { interrupted: false };
    // LangGraph's default durability is async.
    const releaseDurability = this.deps.checkpointer.runDurability?.(run.thread_id, kwargs.durability ?? 'async');
    // The claim found the thread without a checkpoint: the graph's first read of it is known.
    const releaseEmpty =
      run.attempt === 1 && run.start_checkpoint_id === null && !kwargs.checkpoint_id ? this.deps.checkpointer.primeEmpty?.(run.thread_id) : undefined;
    try {
      const input = await this.input(run);
      const chunks = protocol ? this.protocolChunks(graph, input, config, protocol) : this.chunks(graph, input, config, requested.includes('events'));
      let first = true;
      for await (const [namespace, mode, data] of chunks) {
        if (first) {
          first = false;
          runFirstEvent.observe(secondsSince(started));
        }
        if (stop.signal.aborted) continue; // the graph is stopping: its last chunks go nowhere
        try {
          if (mode === 'events') {
            events.push('events', data);
            continue;
          }
          if (namespace.length === 0) {
            if (mode === 'values') seen.output = data;
            if (isInterruptChunk(data)) seen.interrupted = true;
            else if (mode === 'values') seen.values = data;
          }
          if (namespace.length && !kwargs.stream_subgraphs) continue;
          for (const event of translator.translate(namespace, mode as never, data)) events.push(event.event, event.data);
        } catch (error) {
          stop.abort(error);
        }
      }
      if (stop.signal.aborted) throw stop.signal.reason;
      // The run's checkpoints may have been written behind: it ends once they are all saved. Its
      // events are published meanwhile (a publishing failure surfaces at the final flush below).
      await Promise.all([this.deps.checkpointer.flushThread?.(run.thread_id), events.flush().catch(() => undefined)]);
    } catch (error) {
      failure = stop.signal.aborted && !signal.aborted ? stop.signal.reason : error;
    } finally {
      releaseDurability?.();
      releaseEmpty?.();
    }
    if (failure) await this.deps.checkpointer.flushThread?.(run.thread_id).catch(() => undefined);
    // Cancelled, timed out, lease lost — or another attempt holds the run: nothing more of this
    // attempt is recorded (the worker decides what its end is).
    if (failure && (signal.aborted || failure instanceof RunFencedError)) {
      await Promise.all([events.flush().catch(() => undefined), protocol?.flush().catch(() => undefined)]);
      throw signal.aborted ? (signal.reason ?? failure) : failure;
    }

    const state =
      // A run that ran to its end: its last values are the thread's state, no need to read it back.
      !failure && seen.values !== undefined && !seen.interrupted && !kwargs.interrupt_before && !kwargs.interrupt_after
        ? { values: seen.values, tasks: [], next: [] }
        : await retryTransient('reading the state at the end of the run', () => graph.getState({ configurable: { thread_id: run.thread_id } }), {
            until: Date.now() + retryWritesMs,
            log: this.deps.log,
            context: { runId: run.run_id },
            stopped: () => signal.aborted,
          });
    const interrupts: JsonObject = {};
    for (const task of state.tasks ?? []) {
      if (task.interrupts?.length) interrupts[task.id] = toWire(task.interrupts) as Json;
    }
    const values = toWire(state.values) as Json;
    if (failure) {
      const error = { error: (failure as Error).name ?? 'Error', message: (failure as Error).message ?? String(failure) };
      this.deps.log.warn({ err: failure, runId: run.run_id }, 'run failed');
      events.push('error', error);
      await Promise.all([events.flush(), protocol?.flush()]);
      return { status: 'error', interrupted: false, values, output: values, interrupts, error };
    }
    // LangGraph itself streams the `values` and `updates` chunks `{__interrupt__: [...]}` when a run
    // stops at an interrupt, as the LangGraph API sends them: nothing is added here.
    const interrupted = Object.keys(interrupts).length > 0 || (state.next?.length ?? 0) > 0;
    // Pending interrupts as the saved state has them (a subgraph's too), not only as streamed.
    for (const task of state.tasks ?? []) protocol?.requestInput([], interruptsIn(task.interrupts ?? []));
    await Promise.all([events.flush(), protocol?.flush()]);
    return { status: 'success', interrupted, values, output: seen.output === undefined ? values : (toWire(seen.output) as Json), interrupts };
  }

  /**
   * `[namespace, mode, chunk]` tuples of the graph's stream modes. With the `events` mode the graph
   * runs under streamEvents (v2): its root `on_chain_stream` events carry the same tuples, and the
   * other callback events are passed on as `[[], 'events', record]` — as the LangGraph API does, not
   * those root stream events (they hold internal modes the client did not ask for) nor events of
   * runs tagged `langsmith:hidden` (LangGraph's own plumbing, e.g. the `__start__` node).
   */
  private async *chunks(
    graph: { stream(i: unknown, c: object): Promise<AsyncIterable<unknown>>; streamEvents(i: unknown, c: object): AsyncIterable<unknown> },
    input: unknown,
    config: Record<string, unknown>,
    withEvents: boolean,
  ): AsyncGenerator<[string[], string, unknown]> {
    if (!withEvents) {
      yield* (await graph.stream(input, config)) as AsyncIterable<[string[], string, unknown]>;
      return;
    }
    const rootRunId = (config.metadata as { run_id: string }).run_id;
    for await (const raw of graph.streamEvents(input, { ...config, version: 'v2' })) {
      const event = raw as { event: string; run_id: string; tags?: string[]; data?: { chunk?: unknown } };
      if (event.tags?.includes('langsmith:hidden')) continue;
      if (event.event === 'on_chain_stream' && event.run_id === rootRunId && Array.isArray(event.data?.chunk)) {
        yield event.data.chunk as [string[], string, unknown];
        continue;
      }
      yield [[], 'events', toWire(event)];
    }
  }

  /**
   * A protocol v2 run: LangGraph's own protocol events (`streamEvents` v3: messages as content
   * blocks, tools, subgraph lifecycles…) go to the publisher; the root `values` and `updates`
   * come out as `[namespace, mode, chunk]` tuples too, for the run's outcome and classic stream.
   */
  private async *protocolChunks(
    graph: { streamEvents(i: unknown, c: object): AsyncIterable<unknown> | Promise<AsyncIterable<unknown>> },
    input: unknown,
    config: Record<string, unknown>,
    protocol: ProtocolPublisher,
  ): AsyncGenerator<[string[], string, unknown]> {
    const { streamMode: _modes, subgraphs: _subgraphs, ...rest } = config;
    for await (const raw of await graph.streamEvents(input, { ...rest, version: 'v3' })) {
      const event = raw as GraphProtocolEvent;
      protocol.graphEvent(event);
      const namespace = event.params.namespace ?? [];
      if (namespace.length) continue;
      if (event.method === 'values') yield [[], 'values', event.params.data];
      else if (event.method === 'updates') {
        const data = event.params.data as { node?: string; values?: unknown };
        if (data?.node) yield [[], 'updates', { [data.node]: data.values }];
      }
    }
  }

  /**
   * The run's input. A run taken over from a dead worker continues from its last checkpoint
   * (input null) when it had already written one; otherwise it starts over with its input.
   */
  private async input(run: Run): Promise<unknown> {
    const atStart = run.start_checkpoint_id ?? null;
    const latest = run.attempt > 1 ? await this.deps.latestCheckpoint(run.thread_id) : atStart;
    if (run.attempt > 1 && latest !== atStart) return null;
    const command = run.kwargs.command;
    return command ? toCommand(command) : (run.kwargs.input ?? null);
  }
}
