/**
 * Thread state as the LangGraph API shows it (values, next, tasks, checkpoint, …), read through
 * the thread's graph and the server's checkpointer; state updates and history.
 */
import { ConflictError, NotFoundError, RequestValidationError, type ValidationIssue } from '@berth/errors';
import type { BaseCheckpointSaver } from '@langchain/langgraph';
import type { CheckpointTuple } from '@langchain/langgraph-checkpoint';
import type { LoadedGraph } from '../project/index.js';
import type { MetadataFilter } from '../storage/sql.js';
import type { Thread, ThreadStore } from '../storage/threads.js';
import { toWire } from './serialize.js';

interface Snapshot {
  values: unknown;
  next: string[];
  tasks: { id: string; name: string; path?: unknown; error?: unknown; interrupts?: unknown[]; state?: Snapshot | RunnableConfig; result?: unknown }[];
  config?: RunnableConfig;
  parentConfig?: RunnableConfig;
  metadata?: Record<string, unknown>;
  createdAt?: string;
}

type RunnableConfig = { configurable?: Record<string, unknown> };

type StateGraph = {
  getState(config: object, options?: object): Promise<Snapshot>;
  getStateHistory(config: object, options?: object): AsyncIterable<Snapshot>;
  updateState(config: object, values: unknown, asNode?: string): Promise<{ configurable?: Record<string, unknown> }>;
  nodes?: Record<string, unknown>;
  /** The StateGraph a compiled graph came from: its channels are the state's keys. */
  builder?: { channels?: Record<string, unknown> };
};

/** `as_node` values LangGraph gives a meaning besides node names: write as the input, copy the checkpoint. */
const PSEUDO_NODES = new Set(['__input__', '__copy__']);

/**
 * What is wrong with a state update for this graph: values that are not an object, keys the graph
 * has no state channel for, a node it does not have. LangGraph would otherwise throw deep inside
 * updateState (a 500), or store keys nothing reads.
 */
function stateUpdateIssues(graph: StateGraph, values: unknown, asNode: string | undefined): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  if (asNode !== undefined && graph.nodes && !Object.hasOwn(graph.nodes, asNode) && !PSEUDO_NODES.has(asNode)) {
    issues.push({ loc: ['body', 'as_node'], msg: `The graph has no node "${asNode}" (nodes: ${Object.keys(graph.nodes).join(', ')})`, type: 'value_error' });
  }
  const channels = graph.builder?.channels;
  // A graph whose state is one value (the `__root__` channel) takes any update.
  if (values == null || !channels || Object.hasOwn(channels, '__root__')) return issues;
  if (typeof values !== 'object' || Array.isArray(values)) {
    issues.push({ loc: ['body', 'values'], msg: 'Input should be an object of state channel values', type: 'dict_type' });
    return issues;
  }
  const known = Object.keys(channels).filter((name) => !name.startsWith('__'));
  for (const key of Object.keys(values)) {
    if (!Object.hasOwn(channels, key) || key.startsWith('__')) {
      issues.push({ loc: ['body', 'values', key], msg: `The graph's state has no channel "${key}" (channels: ${known.join(', ')})`, type: 'extra_forbidden' });
    }
  }
  return issues;
}

/** A checkpoint as the LangGraph API shows it; null for a config naming none. */
export function checkpointOf(threadId: string, config: RunnableConfig | undefined) {
  const c = config?.configurable;
  if (!c?.checkpoint_id) return null;
  return {
    thread_id: threadId,
    checkpoint_ns: String(c.checkpoint_ns ?? ''),
    checkpoint_id: String(c.checkpoint_id),
    checkpoint_map: (c.checkpoint_map as Record<string, string> | undefined) ?? null,
  };
}

function isSnapshot(state: Snapshot | RunnableConfig | undefined): state is Snapshot {
  return state !== undefined && 'values' in state && 'next' in state;
}

/** The namespace (and checkpoint, when known) of a subgraph task whose state was not read. */
export function taskCheckpoint(threadId: string, config: RunnableConfig | undefined) {
  const c = config?.configurable;
  if (!c) return null;
  return {
    thread_id: threadId,
    checkpoint_ns: String(c.checkpoint_ns ?? ''),
    ...(c.checkpoint_id ? { checkpoint_id: String(c.checkpoint_id) } : {}),
    ...(c.checkpoint_map ? { checkpoint_map: c.checkpoint_map as Record<string, string> } : {}),
  };
}

/** A StateSnapshot as the LangGraph API's ThreadState. */
function stateJson(threadId: string, s: Snapshot): ThreadStateJson {
  return { ...subgraphStateJson(threadId, s), interrupts: toWire((s.tasks ?? []).flatMap((t) => t.interrupts ?? [])) as Interrupt[] };
}

/** A state without `interrupts` (its tasks hold them): a subgraph task's state (with subgraphs=true), as the LangGraph API nests it. */
function subgraphStateJson(threadId: string, s: Snapshot): SubgraphStateJson {
  return {
    values: toWire(s.values) ?? {},
    next: s.next ?? [],
    tasks: (s.tasks ?? []).map((t) => ({
      id: t.id,
      name: t.name,
      path: (toWire(t.path ?? null) as unknown[] | null) ?? null,
      error: t.error ? String(t.error) : null,
      interrupts: toWire(t.interrupts ?? []) as Interrupt[],
      checkpoint: isSnapshot(t.state) ? null : taskCheckpoint(threadId, t.state),
      state: isSnapshot(t.state) ? subgraphStateJson(threadId, t.state) : null,
      result: toWire(t.result ?? null),
    })),
    checkpoint: checkpointOf(threadId, s.config),
    metadata: (toWire(s.metadata ?? null) as Record<string, unknown> | null) ?? null,
    created_at: s.createdAt ?? null,
    parent_checkpoint: checkpointOf(threadId, s.parentConfig),
  };
}

type Interrupt = { id: string; value: unknown };
type CheckpointJson = NonNullable<ReturnType<typeof checkpointOf>>;

/** The JSON of a thread's state (GET /threads/{id}/state; its schema is ThreadState in api/schemas.ts). */
export interface ThreadStateJson extends SubgraphStateJson {
  interrupts: Interrupt[];
}

interface SubgraphStateJson {
  values: unknown;
  next: string[];
  tasks: {
    id: string;
    name: string;
    path: unknown[] | null;
    error: string | null;
    interrupts: Interrupt[];
    checkpoint: ReturnType<typeof taskCheckpoint>;
    state: SubgraphStateJson | null;
    result: unknown;
  }[];
  checkpoint: CheckpointJson | null;
  metadata: Record<string, unknown> | null;
  created_at: string | null;
  parent_checkpoint: CheckpointJson | null;
}

const EMPTY: ThreadStateJson = { values: {}, next: [], tasks: [], checkpoint: null, metadata: null, created_at: null, parent_checkpoint: null, interrupts: [] };

export class ThreadStateService {
  constructor(
    private readonly threads: ThreadStore,
    private readonly graph: (graphId: string) => LoadedGraph,
    private readonly checkpointer: BaseCheckpointSaver,
  ) {}

  /** The thread's state (at a checkpoint); NotFoundError when the thread is missing or does not match `filter`. */
  async state(threadId: string, options: { checkpointId?: string; subgraphs?: boolean; filter?: MetadataFilter | undefined } = {}) {
    // The latest checkpoint is read while the thread is (it is used only once the thread passes the filter).
    const latest = options.checkpointId ? undefined : this.checkpointer.getTuple({ configurable: { thread_id: threadId } });
    latest?.catch(() => undefined);
    const thread = await this.threads.get(threadId, options.filter);
    const graph = await this.graphOf(thread, latest);
    if (!graph) return EMPTY;
    const configurable = { thread_id: threadId, ...(options.checkpointId ? { checkpoint_id: options.checkpointId } : {}) };
    const snapshot = await graph.getState({ configurable }, { subgraphs: options.subgraphs ?? false });
    if (options.checkpointId && !snapshot.createdAt) {
      throw new NotFoundError(`Checkpoint ${options.checkpointId} not found on thread ${threadId}`);
    }
    return stateJson(threadId, snapshot);
  }

  /** Past states, newest first; NotFoundError when the thread is missing or does not match `filter`. */
  async history(threadId: string, options: { limit: number; before?: string; metadata?: Record<string, unknown>; filter?: MetadataFilter | undefined }) {
    const thread = await this.threads.get(threadId, options.filter);
    const graph = await this.graphOf(thread);
    if (!graph) return [];
    const out = [];
    for await (const snapshot of graph.getStateHistory(
      { configurable: { thread_id: threadId } },
      { limit: options.limit, ...(options.before ? { before: { configurable: { thread_id: threadId, checkpoint_id: options.before } } } : {}), ...(options.metadata ? { filter: options.metadata } : {}) },
    )) {
      out.push(stateJson(threadId, snapshot));
    }
    return out;
  }

  /**
   * Writes values into the thread's state as if `asNode` had returned them. Refused while a run is
   * active; NotFoundError when the thread is missing or does not match `filter`.
   */
  async update(threadId: string, body: { values?: unknown; as_node?: string; checkpoint_id?: string }, filter?: MetadataFilter) {
    const thread = await this.threads.get(threadId, filter);
    if (thread.status === 'busy') throw new ConflictError(`Thread ${threadId} is busy with a run; update its state when the run has ended`);
    const graph = await this.graphOf(thread);
    if (!graph) throw new ConflictError(`Thread ${threadId} has no graph yet: run it once before updating its state`);
    const issues = stateUpdateIssues(graph, body.values, body.as_node);
    if (issues.length > 0) throw new RequestValidationError(issues);
    const config = await graph.updateState(
      { configurable: { thread_id: threadId, ...(body.checkpoint_id ? { checkpoint_id: body.checkpoint_id } : {}) } },
      body.values ?? null,
      body.as_node,
    ).catch((error: unknown) => {
      // LangGraph refuses updates it cannot attribute to a node, e.g. "Ambiguous update, specify asNode".
      if ((error as Error | undefined)?.name === 'InvalidUpdateError') {
        throw new RequestValidationError([{ loc: ['body'], msg: (error as Error).message, type: 'value_error' }], { cause: error });
      }
      throw error;
    });
    const after = await graph.getState({ configurable: { thread_id: threadId } });
    await this.threads.setState(threadId, { status: after.next?.length ? 'interrupted' : 'idle', values: toWire(after.values) as never });
    return { checkpoint: checkpointOf(threadId, config) };
  }

  private async graphOf(thread: Thread, latest?: Promise<CheckpointTuple | undefined>): Promise<StateGraph | undefined> {
    const graphId = thread.metadata.graph_id;
    if (typeof graphId !== 'string') return undefined;
    const checkpointer = latest ? withLatestRead(this.checkpointer, thread.thread_id, latest) : this.checkpointer;
    const graph = await this.graph(graphId).getGraph({ configurable: { thread_id: thread.thread_id } }, { checkpointer });
    return graph as unknown as StateGraph;
  }
}

/** The checkpointer, except that its first read of the thread's latest root checkpoint is `latest`. */
function withLatestRead(saver: BaseCheckpointSaver, threadId: string, latest: Promise<CheckpointTuple | undefined>): BaseCheckpointSaver {
  let used = false;
  const getTuple: BaseCheckpointSaver['getTuple'] = (config) => {
    const c = config.configurable ?? {};
    if (used || c.thread_id !== threadId || c.checkpoint_id || c.checkpoint_ns) return saver.getTuple(config);
    used = true;
    return latest;
  };
  return new Proxy(saver, {
    get(target, property) {
      if (property === 'getTuple') return getTuple;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
