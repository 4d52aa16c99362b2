/**
 * Thread state as the LangGraph API shows it (values, next, tasks, checkpoint, …), read through
 * the thread's graph and the server's checkpointer; state updates and history.
 */
import { BerthError, ConflictError, NotFoundError, RequestValidationError, type ValidationIssue } from '@berth/errors';
import { Command, type BaseCheckpointSaver } from '@langchain/langgraph';
import type { CheckpointTuple } from '@langchain/langgraph-checkpoint';
import type { LoadedGraph } from '@berth/langgraph-project';
import type { AssistantStore } from '../storage/assistants.js';
import type { RunStore } from '../storage/runs.js';
import type { JsonObject, MetadataFilter } from '../storage/sql.js';
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
  bulkUpdateState(config: object, supersteps: { updates: { values?: unknown; asNode?: string }[] }[]): Promise<{ configurable?: Record<string, unknown> }>;
  getSubgraphsAsync(namespace?: string, recurse?: boolean): AsyncIterable<[string, StateGraph]>;
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
function stateUpdateIssues(graph: StateGraph, values: unknown, asNode: string | undefined, loc: (string | number)[] = ['body']): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  if (asNode !== undefined && graph.nodes && !Object.hasOwn(graph.nodes, asNode) && !PSEUDO_NODES.has(asNode)) {
    issues.push({ loc: [...loc, 'as_node'], msg: `The graph has no node "${asNode}" (nodes: ${Object.keys(graph.nodes).join(', ')})`, type: 'value_error' });
  }
  const channels = graph.builder?.channels;
  // A graph whose state is one value (the `__root__` channel) takes any update.
  if (values == null || !channels || Object.hasOwn(channels, '__root__')) return issues;
  if (typeof values !== 'object' || Array.isArray(values)) {
    issues.push({ loc: [...loc, 'values'], msg: 'Input should be an object of state channel values', type: 'dict_type' });
    return issues;
  }
  const known = Object.keys(channels).filter((name) => !name.startsWith('__'));
  for (const key of Object.keys(values)) {
    if (!Object.hasOwn(channels, key) || key.startsWith('__')) {
      issues.push({ loc: [...loc, 'values', key], msg: `The graph's state has no channel "${key}" (channels: ${known.join(', ')})`, type: 'extra_forbidden' });
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

/** Which checkpoint of a thread: the latest (nothing given), one by id, or a subgraph's (`checkpoint_ns`). */
export interface CheckpointRef {
  checkpoint_id?: string | undefined;
  checkpoint_ns?: string | undefined;
  checkpoint_map?: Record<string, string> | null | undefined;
}

/** A graph `Command` as clients send it. */
export interface CommandBody {
  resume?: unknown;
  update?: unknown;
  goto?: unknown;
}

/** One superstep of a bulk state update: updates applied together, each as if its node returned it. */
export interface Superstep {
  updates: { values?: unknown; command?: CommandBody | null | undefined; as_node: string }[];
}

/** A client's command as LangGraph's `Command`. */
export function toCommand(command: CommandBody): Command {
  return new Command({
    ...(command.resume !== undefined ? { resume: command.resume } : {}),
    ...(command.update !== undefined && command.update !== null ? { update: command.update as Record<string, unknown> } : {}),
    ...(command.goto !== undefined && command.goto !== null ? { goto: command.goto as string } : {}),
  });
}

/** The configurable naming a checkpoint of the thread (the root namespace unless `ref` says otherwise). */
function configurableOf(threadId: string, ref: CheckpointRef | undefined): Record<string, unknown> {
  return {
    thread_id: threadId,
    checkpoint_ns: ref?.checkpoint_ns ?? '',
    ...(ref?.checkpoint_id ? { checkpoint_id: ref.checkpoint_id } : {}),
    ...(ref?.checkpoint_map ? { checkpoint_map: ref.checkpoint_map } : {}),
  };
}

/** A checkpoint namespace (`node:<task id>|child:<task id>`) as the path of subgraph names (`node|child`). */
function subgraphPath(namespace: string): string {
  return namespace
    .split('|')
    .filter((part) => !/^\d+$/.test(part))
    .map((part) => part.split(':')[0])
    .join('|');
}

export class ThreadStateService {
  constructor(
    private readonly threads: ThreadStore,
    private readonly graph: (graphId: string) => LoadedGraph,
    private readonly checkpointer: BaseCheckpointSaver,
    private readonly runs: Pick<RunStore, 'list'>,
    private readonly assistants: Pick<AssistantStore, 'get'>,
  ) {}

  /** The thread's state (at a checkpoint, of a subgraph); NotFoundError when the thread is missing or does not match `filter`. */
  async state(threadId: string, options: { checkpoint?: CheckpointRef; subgraphs?: boolean; filter?: MetadataFilter | undefined } = {}) {
    const ref = options.checkpoint;
    // The latest checkpoint is read while the thread is (it is used only once the thread passes the filter).
    const latest = ref?.checkpoint_id || ref?.checkpoint_ns ? undefined : this.checkpointer.getTuple({ configurable: { thread_id: threadId } });
    latest?.catch(() => undefined);
    const thread = await this.threads.get(threadId, options.filter);
    const graph = await this.graphOf(thread, latest);
    if (!graph) return EMPTY;
    if (ref?.checkpoint_ns) await this.subgraphAt(graph, ref.checkpoint_ns, ['body', 'checkpoint', 'checkpoint_ns']);
    const snapshot = await graph.getState({ configurable: configurableOf(threadId, ref) }, { subgraphs: options.subgraphs ?? false });
    if (ref?.checkpoint_id && !snapshot.createdAt) {
      throw new NotFoundError(`Checkpoint ${ref.checkpoint_id} not found on thread ${threadId}`);
    }
    return stateJson(threadId, snapshot);
  }

  /** Past states (of a subgraph with `checkpoint`), newest first; NotFoundError when the thread is missing or does not match `filter`. */
  async history(
    threadId: string,
    options: { limit: number; before?: string; metadata?: Record<string, unknown>; checkpoint?: CheckpointRef; filter?: MetadataFilter | undefined },
  ) {
    const thread = await this.threads.get(threadId, options.filter);
    const graph = await this.graphOf(thread);
    if (!graph) return [];
    const ns = options.checkpoint?.checkpoint_ns;
    if (ns) await this.subgraphAt(graph, ns, ['body', 'checkpoint', 'checkpoint_ns']);
    const out = [];
    for await (const snapshot of graph.getStateHistory(
      { configurable: configurableOf(threadId, options.checkpoint) },
      {
        limit: options.limit,
        ...(options.before ? { before: { configurable: { thread_id: threadId, checkpoint_ns: ns ?? '', checkpoint_id: options.before } } } : {}),
        ...(options.metadata ? { filter: options.metadata } : {}),
      },
    )) {
      out.push(stateJson(threadId, snapshot));
    }
    return out;
  }

  /**
   * Writes values into the thread's state (a subgraph's, when `checkpoint.checkpoint_ns` names
   * one) as if `asNode` had returned them. Refused while a run is active; NotFoundError when the
   * thread is missing or does not match `filter`.
   */
  async update(threadId: string, body: { values?: unknown; as_node?: string; checkpoint?: CheckpointRef }, filter?: MetadataFilter) {
    const { graph } = await this.updatable(threadId, filter);
    const ns = body.checkpoint?.checkpoint_ns;
    const target = ns ? await this.subgraphAt(graph, ns, ['body', 'checkpoint', 'checkpoint_ns']) : graph;
    const issues = stateUpdateIssues(target, body.values, body.as_node);
    if (issues.length > 0) throw new RequestValidationError(issues);
    const config = await graph
      .updateState({ configurable: configurableOf(threadId, body.checkpoint) }, body.values ?? null, body.as_node)
      .catch(asValidationError);
    await this.saveValues(graph, threadId);
    return { checkpoint: checkpointOf(threadId, config) };
  }

  /**
   * Applies supersteps of updates to the thread's state, one checkpoint each (how a thread is
   * rebuilt from another's history). Same refusals as `update`; nothing is written when an
   * update does not fit the graph.
   */
  async bulkUpdate(threadId: string, supersteps: Superstep[], filter?: MetadataFilter) {
    const { graph } = await this.updatable(threadId, filter);
    throwSuperstepIssues(graph, supersteps);
    const config = await graph
      .bulkUpdateState(
        { configurable: configurableOf(threadId, undefined) },
        supersteps.map((step) => ({
          updates: step.updates.map((u) => ({ values: u.command ? toCommand(u.command) : (u.values ?? null), asNode: u.as_node })),
        })),
      )
      .catch(asValidationError);
    await this.saveValues(graph, threadId);
    return { checkpoint: checkpointOf(threadId, config) };
  }

  /**
   * Refuses (422) supersteps that do not fit the graph, before a thread is made for them; a
   * factory is built without config, as a new thread's graph is.
   */
  async checkSupersteps(graphId: string, supersteps: Superstep[]): Promise<void> {
    const graph = await this.graph(graphId).getGraph({ configurable: {} }, { checkpointer: null });
    throwSuperstepIssues(graph as unknown as StateGraph, supersteps);
  }

  /** The thread's graph for a state update: refused while a run is active or before the thread has a graph. */
  private async updatable(threadId: string, filter: MetadataFilter | undefined) {
    const thread = await this.threads.get(threadId, filter);
    if (thread.status === 'busy') throw new ConflictError(`Thread ${threadId} is busy with a run; update its state when the run has ended`);
    const graph = await this.graphOf(thread);
    if (!graph) throw new ConflictError(`Thread ${threadId} has no graph yet: run it once (or create it with metadata.graph_id) before updating its state`);
    return { thread, graph };
  }

  /** Copies the state after an update to the thread row (status and values, as a run's end does). */
  private async saveValues(graph: StateGraph, threadId: string) {
    const after = await graph.getState({ configurable: { thread_id: threadId } });
    await this.threads.setState(threadId, { status: after.next?.length ? 'interrupted' : 'idle', values: toWire(after.values) as never });
  }

  /** The subgraph a checkpoint namespace belongs to; a 422 at `loc` when the graph has none there. */
  private async subgraphAt(graph: StateGraph, namespace: string, loc: (string | number)[]): Promise<StateGraph> {
    const path = subgraphPath(namespace);
    for await (const [name, subgraph] of graph.getSubgraphsAsync(path, true)) {
      if (name === path) return subgraph;
    }
    throw new RequestValidationError([{ loc, msg: `The graph has no subgraph at "${path}" (checkpoint namespace "${namespace}")`, type: 'value_error' }]);
  }

  private async graphOf(thread: Thread, latest?: Promise<CheckpointTuple | undefined>): Promise<StateGraph | undefined> {
    const graphId = thread.metadata.graph_id;
    if (typeof graphId !== 'string') return undefined;
    const loaded = this.graph(graphId);
    const checkpointer = latest ? withLatestRead(this.checkpointer, thread.thread_id, latest) : this.checkpointer;
    // A factory builds the graph from the config, so it gets the one the thread's runs used.
    const config = loaded.kind === 'factory' ? await this.lastRunConfig(thread.thread_id) : {};
    const graph = await loaded.getGraph({ ...config, configurable: { ...config.configurable, thread_id: thread.thread_id } }, { checkpointer });
    return graph as unknown as StateGraph;
  }

  /**
   * The config of the thread's latest run as its graph saw it: the assistant's config with the
   * run's on top (configurable merged). Empty for a thread without runs.
   */
  private async lastRunConfig(threadId: string): Promise<{ configurable?: Record<string, unknown>; [key: string]: unknown }> {
    const [run] = await this.runs.list(threadId, { limit: 1, offset: 0 });
    if (!run) return {};
    const assistant = await this.assistants.get(run.assistant_id).catch((error: unknown) => {
      if (error instanceof NotFoundError) return undefined; // deleted since: the run's own config still applies
      throw error;
    });
    const base = (assistant?.config ?? {}) as JsonObject;
    const own = (run.kwargs.config ?? {}) as JsonObject;
    return { ...base, ...own, configurable: { ...(base.configurable as JsonObject | undefined), ...(own.configurable as JsonObject | undefined) } };
  }
}

function throwSuperstepIssues(graph: StateGraph, supersteps: Superstep[]): void {
  const issues = supersteps.flatMap((step, i) =>
    step.updates.flatMap((u, j) => (u.command ? [] : stateUpdateIssues(graph, u.values, u.as_node, ['body', 'supersteps', i, 'updates', j]))),
  );
  if (issues.length > 0) throw new RequestValidationError(issues);
}

/**
 * A state update the graph refuses is the request's fault, a 422 not a 500: LangGraph's own refusals
 * ("Ambiguous update, specify asNode") and what the graph's reducers throw on values they cannot take
 * (a message of an unknown role). Berth's errors and those with a `code` (Postgres, the network) are
 * the server's and pass on.
 */
function asValidationError(error: unknown): never {
  const refused = error instanceof Error && !(error instanceof BerthError) && (error as { code?: unknown }).code === undefined;
  if (refused) throw new RequestValidationError([{ loc: ['body'], msg: error.message, type: 'value_error' }], { cause: error });
  throw error;
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
