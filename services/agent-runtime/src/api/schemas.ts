/**
 * Wire shapes of the agent server (LangGraph API compatible). Request bodies are strict: an
 * unknown field is a 422, never silently dropped.
 */
import { z } from 'zod';
import type { Assistant, AssistantVersion } from '../storage/assistants.js';
import type { Run } from '../storage/runs.js';
import type { Thread } from '../storage/threads.js';

export const JsonObject = z.record(z.string(), z.unknown());
const Page = { limit: z.number().int().min(1).max(1000).default(10), offset: z.number().int().min(0).default(0) };
const SortOrder = z.enum(['asc', 'desc']).optional();

/** A graph name or an assistant UUID (the graph's system assistant). */
export const AssistantRef = z.string().min(1);
export const Config = z
  .strictObject({
    tags: z.array(z.string()).optional(),
    recursion_limit: z.number().int().positive().optional(),
    configurable: JsonObject.optional(),
  })
  .catchall(z.unknown());

export const AssistantCreate = z.strictObject({
  assistant_id: z.uuid().optional(),
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
export const ThreadCreate = z.strictObject({
  thread_id: z.uuid().optional(),
  metadata: JsonObject.optional(),
  if_exists: z.enum(['raise', 'do_nothing']).default('raise'),
});
export const ThreadPatch = z.strictObject({ metadata: JsonObject.optional() });
export const ThreadSearch = z.strictObject({
  ids: z.array(z.uuid()).optional(),
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
export const ThreadPath = z.strictObject({ thread_id: z.uuid() });
export const RunPath = z.strictObject({ thread_id: z.uuid(), run_id: z.uuid() });

const iso = (d: Date) => d.toISOString();

export function assistantJson(a: Assistant | AssistantVersion) {
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
    ...('updated_at' in a ? { updated_at: iso(a.updated_at) } : {}),
  };
}

export function threadJson(t: Thread) {
  return {
    thread_id: t.thread_id,
    created_at: iso(t.created_at),
    updated_at: iso(t.updated_at),
    state_updated_at: iso(t.state_updated_at),
    metadata: t.metadata,
    config: t.config,
    status: t.status,
    values: t.values ?? null,
    interrupts: t.interrupts,
    ...(t.error ? { error: t.error } : {}),
  };
}

export function runJson(r: Run) {
  return {
    run_id: r.run_id,
    thread_id: r.thread_id,
    assistant_id: r.assistant_id,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
    status: r.status,
    metadata: r.metadata,
    kwargs: withoutAuthUser(r.kwargs),
    multitask_strategy: r.multitask_strategy,
  };
}

/**
 * The authenticated user travels to the graph in the run's configurable, but may hold whatever
 * the auth handler returned (tokens included): it is not echoed back in run responses.
 */
function withoutAuthUser(kwargs: Run['kwargs']): Run['kwargs'] {
  const configurable = kwargs.config?.configurable as Record<string, unknown> | undefined;
  if (!configurable || !('langgraph_auth_user' in configurable || 'graph_auth_user' in configurable)) return kwargs;
  const { langgraph_auth_user: _a, graph_auth_user: _b, ...rest } = configurable;
  return { ...kwargs, config: { ...kwargs.config, configurable: rest } } as Run['kwargs'];
}

/** Responses are documented loosely: their exact shapes follow the LangGraph API. */
export const AnyJson = z.unknown();

const StreamMode = z.enum(['values', 'updates', 'messages', 'messages-tuple', 'custom', 'debug', 'tasks', 'checkpoints', 'events']);
const NodeList = z.union([z.literal('*'), z.array(z.string())]);

export const RunCreate = z.strictObject({
  assistant_id: AssistantRef,
  input: z.unknown().optional(),
  command: z
    .strictObject({ resume: z.unknown().optional(), update: z.unknown().optional(), goto: z.unknown().optional() })
    .nullable()
    .optional(),
  checkpoint: z.strictObject({ checkpoint_id: z.string().optional(), checkpoint_ns: z.string().optional(), checkpoint_map: z.unknown().optional(), thread_id: z.string().optional() }).nullable().optional(),
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
});

export const Flag = z.enum(['0', '1', 'true', 'false']).transform((v) => v === '1' || v === 'true');
