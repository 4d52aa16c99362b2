/**
 * Wire shapes of the agent server (LangGraph API compatible), each defined once. Request bodies
 * are strict: an unknown field is a 422, never silently dropped. Response objects are strict too:
 * a handler returning a field its route does not declare fails (a 500 and the route's response
 * test), so /openapi.json describes exactly what is sent.
 */
import { z } from 'zod';
import { Uuid } from '@berth/ids';
import type { Assistant as AssistantRow, AssistantVersion as AssistantVersionRow } from '../storage/assistants.js';
import type { Run as RunRow } from '../storage/runs.js';
import type { Thread as ThreadRow } from '../storage/threads.js';
import { MAX_THREAD_TTL_MINUTES } from '@berth/langgraph-project';
import { STREAM_MODES } from '../runs/stream-modes.js';

/** Data whose shape the graph or the caller decides (state values, metadata and context values, interrupt values): any JSON. */
export const UserData = z.unknown();
/** An object of user data (metadata, context, configurable). */
export const JsonObject = z.record(z.string(), UserData);
export const Page = { limit: z.number().int().min(1).max(1000).default(10), offset: z.number().int().min(0).default(0) };
export const SortOrder = z.enum(['asc', 'desc']).optional();

/** A graph name or an assistant UUID (the graph's system assistant). */
export const AssistantRef = z.string().min(1);
export const Config = z
  .strictObject({
    tags: z.array(z.string()).optional(),
    recursion_limit: z.number().int().positive().optional(),
    configurable: JsonObject.optional(),
  })
  // Other RunnableConfig keys are the caller's own.
  .catchall(UserData);
/** Where a run resumes or forks, or a state update applies, as the client names it. */
export const CheckpointBody = z.strictObject({
  checkpoint_id: z.string().optional(),
  checkpoint_ns: z.string().optional(),
  checkpoint_map: z.record(z.string(), z.string()).nullable().optional(),
  thread_id: z.string().optional(),
});

export const AssistantCreate = z.strictObject({
  assistant_id: Uuid.optional(),
  graph_id: z.string().min(1),
  config: Config.optional(),
  context: JsonObject.optional(),
  metadata: JsonObject.optional(),
  if_exists: z.enum(['raise', 'do_nothing']).default('raise'),
  name: z.string().optional(),
  description: z.string().nullable().optional(),
});

export const AssistantPatch = z.strictObject({
  graph_id: z.string().min(1).optional(),
  config: Config.optional(),
  context: JsonObject.optional(),
  metadata: JsonObject.optional(),
  name: z.string().optional(),
  description: z.string().nullable().optional(),
});

export const AssistantSearch = z.strictObject({
  metadata: JsonObject.optional(),
  graph_id: z.string().optional(),
  name: z.string().optional(),
  ...Page,
  sort_by: z.enum(['assistant_id', 'graph_id', 'name', 'created_at', 'updated_at']).optional(),
  sort_order: SortOrder,
  select: z.array(z.string()).optional(),
});
export const AssistantCount = z.strictObject({ metadata: JsonObject.optional(), graph_id: z.string().optional(), name: z.string().optional() });
export const AssistantVersions = z.strictObject({ metadata: JsonObject.optional(), ...Page });
export const AssistantLatest = z.strictObject({ version: z.number().int().min(1) });

export const ThreadStatus = z.enum(['idle', 'busy', 'interrupted', 'error']);
/** A graph `Command`, as the client sends it (resume/update are user data; goto names nodes or sends). */
const Command = z.strictObject({ resume: UserData.optional(), update: UserData.optional(), goto: UserData.optional() });
/**
 * A thread's TTL as the LangGraph API takes it: `{strategy, ttl}` (minutes of inactivity), or the
 * minutes alone (strategy `delete`), as the SDKs also accept it.
 */
export const ThreadTtlBody = z
  .union([
    z.number().positive().max(MAX_THREAD_TTL_MINUTES),
    z.strictObject({ strategy: z.enum(['delete', 'keep_latest']).default('delete'), ttl: z.number().positive().max(MAX_THREAD_TTL_MINUTES) }),
  ])
  .transform((t) => (typeof t === 'number' ? { strategy: 'delete' as const, minutes: t } : { strategy: t.strategy, minutes: t.ttl }));

export const ThreadCreate = z.strictObject({
  thread_id: Uuid.optional(),
  metadata: JsonObject.optional(),
  if_exists: z.enum(['raise', 'do_nothing']).default('raise'),
  /** State updates to apply to the new thread, one checkpoint per superstep (needs `metadata.graph_id`). */
  supersteps: z
    .array(
      z.strictObject({
        updates: z.array(z.strictObject({ values: UserData.nullable().optional(), command: Command.nullable().optional(), as_node: z.string() })).min(1),
      }),
    )
    .optional(),
  ttl: ThreadTtlBody.optional(),
});
/** `ttl` replaces the thread's TTL, counted from now; null removes it. */
export const ThreadPatch = z.strictObject({ metadata: JsonObject.optional(), ttl: ThreadTtlBody.nullable().optional() });
export const ThreadSearch = z.strictObject({
  ids: z.array(Uuid).optional(),
  metadata: JsonObject.optional(),
  values: JsonObject.optional(),
  status: ThreadStatus.optional(),
  ...Page,
  sort_by: z.enum(['thread_id', 'status', 'created_at', 'updated_at', 'state_updated_at']).optional(),
  sort_order: SortOrder,
  select: z.array(z.string()).optional(),
});
export const ThreadCount = z.strictObject({ metadata: JsonObject.optional(), values: JsonObject.optional(), status: ThreadStatus.optional() });

export const AssistantPath = z.strictObject({ assistant_id: AssistantRef });
export const ThreadPath = z.strictObject({ thread_id: Uuid });
export const RunPath = z.strictObject({ thread_id: Uuid, run_id: Uuid });

const StreamMode = z.enum(STREAM_MODES);
const NodeList = z.union([z.literal('*'), z.array(z.string())]);

export const RunCreate = z.strictObject({
  assistant_id: AssistantRef,
  input: UserData.optional(),
  command: Command.nullable().optional(),
  checkpoint: CheckpointBody.nullable().optional(),
  checkpoint_id: z.string().optional(),
  config: Config.optional(),
  context: JsonObject.optional(),
  metadata: JsonObject.optional(),
  stream_mode: z.union([StreamMode, z.array(StreamMode)]).optional(),
  stream_subgraphs: z.boolean().optional(),
  stream_resumable: z.boolean().optional(),
  interrupt_before: NodeList.optional(),
  interrupt_after: NodeList.optional(),
  multitask_strategy: z.enum(['reject', 'interrupt', 'rollback', 'enqueue']).optional(),
  on_disconnect: z.enum(['cancel', 'continue']).optional(),
  on_completion: z.enum(['delete', 'keep']).optional(),
  if_not_exists: z.enum(['create', 'reject']).optional(),
  after_seconds: z.number().min(0).max(86_400).optional(),
  durability: z.enum(['sync', 'async', 'exit']).optional(),
  /** Accepted for compatibility; `durability` supersedes it. */
  checkpoint_during: z.boolean().optional(),
  /** Accepted for compatibility: a resume always needs a pending interrupt here. */
  strict_resume: z.boolean().optional(),
  /** An http(s) URL the run is POSTed to when it ends, signed (Standard Webhooks); see GET .../webhooks. */
  webhook: z.string().min(1).max(2048).optional(),
});

export const Flag = z.enum(['0', '1', 'true', 'false']).transform((v) => v === '1' || v === 'true');

// --- Responses --------------------------------------------------------------------------------

export const Timestamp = z.iso.datetime({ offset: true });
const MultitaskStrategy = z.enum(['reject', 'interrupt', 'rollback', 'enqueue']);
const RunStatus = z.enum(['pending', 'running', 'success', 'error', 'timeout', 'interrupted']);
/** How a run failed: the error's class name and message. */
const ErrorBody = z.strictObject({ error: z.string(), message: z.string() });
/** A graph's interrupt: the value the graph passed to interrupt() (user data) and, from LangGraph 1.0 on, its id; other versions add fields. */
const Interrupt = z.looseObject({ id: z.string().optional(), value: UserData });

export const Assistant = z
  .strictObject({
    assistant_id: Uuid,
    graph_id: z.string(),
    config: Config,
    context: JsonObject,
    metadata: JsonObject,
    version: z.number().int(),
    name: z.string(),
    description: z.string().nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Assistant' });
/** One version of an assistant, as POST /assistants/{id}/versions lists them. */
export const AssistantVersion = Assistant.omit({ updated_at: true }).meta({ id: 'AssistantVersion' });

export const Thread = z
  .strictObject({
    thread_id: Uuid,
    created_at: Timestamp,
    updated_at: Timestamp,
    state_updated_at: Timestamp,
    metadata: JsonObject,
    config: JsonObject,
    status: ThreadStatus,
    /** The latest state values: the graph's own shape. */
    values: UserData,
    /** Open interrupts by task id. */
    interrupts: z.record(z.string(), z.array(Interrupt)),
    error: ErrorBody.optional(),
    /** With `?include=ttl` on GET, for a thread that has a TTL: its strategy, minutes and next expiry. */
    ttl: z.strictObject({ strategy: z.enum(['delete', 'keep_latest']), ttl: z.number(), expires_at: Timestamp.nullable() }).optional(),
  })
  .meta({ id: 'Thread' });

export const RunKwargs = z.strictObject({
  input: UserData.optional(),
  command: Command.nullable().optional(),
  config: Config.optional(),
  context: JsonObject.optional(),
  stream_mode: z.array(StreamMode),
  stream_subgraphs: z.boolean(),
  stream_resumable: z.boolean(),
  interrupt_before: NodeList.optional(),
  interrupt_after: NodeList.optional(),
  checkpoint_id: z.string().optional(),
  durability: z.enum(['sync', 'async', 'exit']).optional(),
  on_completion: z.enum(['delete', 'keep']).optional(),
  temporary: z.boolean(),
  /** Request headers passed on to the graph's configurable (x-* and user-agent). */
  headers: z.record(z.string(), z.string()).optional(),
  webhook: z.string().optional(),
});
export const Run = z
  .strictObject({
    run_id: Uuid,
    thread_id: Uuid,
    assistant_id: Uuid,
    created_at: Timestamp,
    updated_at: Timestamp,
    status: RunStatus,
    metadata: JsonObject,
    kwargs: RunKwargs,
    multitask_strategy: MultitaskStrategy,
  })
  .meta({ id: 'Run' });

/** A checkpoint of a thread (a subgraph's when checkpoint_ns is not empty). */
export const Checkpoint = z.strictObject({
  thread_id: z.string(),
  checkpoint_ns: z.string(),
  checkpoint_id: z.string(),
  /** Checkpoint ids by namespace, for a subgraph's checkpoint. */
  checkpoint_map: z.record(z.string(), z.string()).nullable(),
});
/** The checkpoint namespace of a subgraph task whose state was not asked for (subgraphs=false). */
const TaskCheckpoint = Checkpoint.partial({ checkpoint_id: true, checkpoint_map: true });

const ThreadTask = z.strictObject({
  id: z.string(),
  name: z.string(),
  /** LangGraph's path of the task (node names, indexes, nested paths of pushed tasks): its shape is LangGraph's. */
  path: z.array(z.unknown()).nullable(),
  error: z.string().nullable(),
  interrupts: z.array(Interrupt),
  checkpoint: TaskCheckpoint.nullable(),
  /** The subgraph's state, with subgraphs=true. */
  get state() {
    return SubgraphState.nullable();
  },
  /** What the task wrote (user data). */
  result: UserData,
});

/** A subgraph task's state: a ThreadState without `interrupts` (its tasks hold them), as the LangGraph API nests it. */
const SubgraphState = z
  .strictObject({
    /** The state values: the graph's own shape. */
    values: UserData,
    next: z.array(z.string()),
    tasks: z.array(ThreadTask),
    checkpoint: Checkpoint.nullable(),
    /** Checkpoint metadata: LangGraph's source, step and parents with the run's metadata. */
    metadata: JsonObject.nullable(),
    created_at: Timestamp.nullable(),
    parent_checkpoint: Checkpoint.nullable(),
  })
  .meta({ id: 'SubgraphState' });

export const ThreadState = SubgraphState.extend({ interrupts: z.array(Interrupt) }).meta({ id: 'ThreadState' });

/** The answer to POST /threads/{id}/state: the checkpoint the update wrote. */
export const StateUpdateResult = z.strictObject({ checkpoint: Checkpoint.nullable() });

/** A JSON Schema document derived from the graph's own declarations. */
const JsonSchemaDocument = JsonObject.nullable();
export const GraphSchemas = z.strictObject({
  graph_id: z.string(),
  input_schema: JsonSchemaDocument,
  output_schema: JsonSchemaDocument,
  state_schema: JsonSchemaDocument,
  /** Same as context_schema, as the LangGraph.js server reports it. */
  config_schema: JsonSchemaDocument,
  context_schema: JsonSchemaDocument,
});
/** Subgraphs by namespace; each under the SDK's names and the LangGraph.js server's short ones. */
export const Subgraphs = z.record(
  z.string(),
  GraphSchemas.extend({ state: JsonSchemaDocument, input: JsonSchemaDocument, output: JsonSchemaDocument, config: JsonSchemaDocument }),
);

const NodeId = z.union([z.string(), z.number()]);
export const GraphDrawing = z.strictObject({
  nodes: z.array(
    z.strictObject({
      id: NodeId,
      type: z.string(),
      /** `{id, name}` of a runnable node; a JSON Schema (the graph's input or output) for a schema node. */
      data: z.union([z.strictObject({ id: z.array(z.string()), name: z.string() }), JsonObject]),
      metadata: JsonObject.optional(),
    }),
  ),
  edges: z.array(z.strictObject({ source: NodeId, target: NodeId, data: z.string().optional(), conditional: z.boolean().optional() })),
});

/**
 * The answer of /runs/wait and /join: the run's final state values (the graph's own shape), or
 * `{"__error__": {error, message}}` when the run failed.
 */
export const RunOutput = UserData;

/** A list answer whose items may carry only the fields `select` names. */
export const Selected = <T extends z.ZodObject>(item: T) => z.array(item.partial());

/** A timestamp as the API writes it (null stays null). */
export function iso(d: Date): string;
export function iso(d: Date | null): string | null;
export function iso(d: Date | null): string | null {
  return d?.toISOString() ?? null;
}

export function assistantVersionJson(a: AssistantVersionRow) {
  return {
    assistant_id: a.assistant_id,
    graph_id: a.graph_id,
    config: a.config,
    context: a.context,
    metadata: a.metadata,
    version: a.version,
    name: a.name,
    description: a.description,
    created_at: iso(a.created_at),
  };
}

export function assistantJson(a: AssistantRow) {
  return { ...assistantVersionJson(a), updated_at: iso(a.updated_at) };
}

export function threadJson(t: ThreadRow) {
  return {
    thread_id: t.thread_id,
    created_at: iso(t.created_at),
    updated_at: iso(t.updated_at),
    state_updated_at: iso(t.state_updated_at),
    metadata: t.metadata,
    config: t.config,
    status: t.status,
    values: t.values ?? null,
    // Stored as JSON; their shapes are checked when the response is parsed.
    interrupts: t.interrupts as z.input<typeof Thread>['interrupts'],
    ...(t.error ? { error: t.error as z.input<typeof ErrorBody> } : {}),
  };
}

export function runJson(r: RunRow) {
  return {
    run_id: r.run_id,
    thread_id: r.thread_id,
    assistant_id: r.assistant_id,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
    status: r.status,
    metadata: r.metadata,
    // Stored as JSON (the request as it was accepted); its shape is checked when the response is parsed.
    kwargs: withoutAuthUser(r.kwargs) as z.input<typeof RunKwargs>,
    multitask_strategy: r.multitask_strategy,
  };
}

/**
 * The authenticated user travels to the graph in the run's configurable, but may hold whatever
 * the auth handler returned (tokens included): it is not echoed back in run responses.
 */
function withoutAuthUser(kwargs: RunRow['kwargs']): RunRow['kwargs'] {
  const configurable = kwargs.config?.configurable as Record<string, unknown> | undefined;
  if (!configurable || !('langgraph_auth_user' in configurable || 'graph_auth_user' in configurable)) return kwargs;
  const { langgraph_auth_user: _a, graph_auth_user: _b, ...rest } = configurable;
  return { ...kwargs, config: { ...kwargs.config, configurable: rest } } as RunRow['kwargs'];
}
