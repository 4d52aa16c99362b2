/**
 * Maps the stream modes a client asks for onto LangGraph's own, and LangGraph's chunks onto the
 * SSE events of the LangGraph API (event `mode` or `mode|namespace` for subgraphs).
 */
import { toWire } from './serialize.js';
import { checkpointOf, taskCheckpoint } from './thread-state.js';

/** Stream modes a run may ask for. */
export const STREAM_MODES = ['values', 'updates', 'messages', 'messages-tuple', 'custom', 'debug', 'tasks', 'checkpoints', 'events'] as const;
export type ApiStreamMode = (typeof STREAM_MODES)[number];
type GraphStreamMode = 'values' | 'updates' | 'messages' | 'custom' | 'debug' | 'tasks' | 'checkpoints';

export function graphModes(requested: readonly string[]): GraphStreamMode[] {
  const modes = new Set<GraphStreamMode>();
  for (const mode of requested) {
    if (mode === 'events') continue; // raw callback events come from streamEvents, not a graph stream mode
    if (mode === 'messages-tuple') modes.add('messages');
    else if (mode === 'messages') {
      // Legacy messages: partial messages come from message chunks, complete ones from values.
      modes.add('messages');
      modes.add('values');
    } else modes.add(mode as GraphStreamMode);
  }
  return [...modes];
}

export interface WireEvent {
  event: string;
  data: unknown;
}

type Config = { configurable?: Record<string, unknown>; callbacks?: unknown; [key: string]: unknown };
type DebugTask = { state?: unknown; [key: string]: unknown };
type DebugChunk = { type?: string; payload?: { config?: Config; parentConfig?: Config; tasks?: DebugTask[]; [key: string]: unknown } };

/** A config as a client sees it: no callbacks, no LangGraph-internal (`__`) configurable keys. */
function publicConfig(config: Config | undefined): Config | undefined {
  if (!config?.configurable) return config;
  const { callbacks: _callbacks, ...rest } = config;
  return { ...rest, configurable: Object.fromEntries(Object.entries(config.configurable).filter(([key]) => !key.startsWith('__'))) };
}

function threadOf(config: Config | undefined): string {
  return String(config?.configurable?.thread_id ?? '');
}

/** A subgraph task's state config (`{configurable: {thread_id, checkpoint_ns}}`) becomes its `checkpoint`, as in thread state. */
function debugTask(task: DebugTask): DebugTask {
  const config = task.state as Config | undefined;
  if (!config?.configurable?.thread_id) return task;
  const { state: _state, ...rest } = task;
  return { ...rest, checkpoint: taskCheckpoint(threadOf(config), config) };
}

/**
 * Debug chunks as the LangGraph API sends them: a `checkpoint` payload names its checkpoint and
 * parent as `checkpoint` / `parent_checkpoint` (the same objects as thread state and history)
 * and its parent config as `parent_config`.
 */
function debugChunk(chunk: DebugChunk): DebugChunk {
  const payload = chunk?.payload;
  if (!payload) return chunk;
  if (chunk.type === 'task_result') return { ...chunk, payload: debugTask(payload) };
  if (chunk.type !== 'checkpoint') return chunk;
  const { parentConfig, config, tasks, ...rest } = payload;
  return {
    ...chunk,
    payload: {
      ...rest,
      config: publicConfig(config),
      parent_config: publicConfig(parentConfig),
      tasks: (tasks ?? []).map(debugTask),
      checkpoint: checkpointOf(threadOf(config), config),
      parent_checkpoint: checkpointOf(threadOf(parentConfig ?? config), parentConfig),
    },
  };
}

type Message = { id?: string; content?: unknown; type?: string; [key: string]: unknown };

/** Per-run translation state (legacy `messages` needs to remember what it has sent). */
export class StreamTranslator {
  private readonly requested: Set<string>;
  private readonly partial = new Map<string, Message>();
  private readonly completed = new Set<string>();

  constructor(requested: readonly string[]) {
    this.requested = new Set(requested);
  }

  translate(namespace: string[], mode: GraphStreamMode, chunk: unknown): WireEvent[] {
    const suffix = namespace.length ? `|${namespace.join('|')}` : '';
    const out: WireEvent[] = [];
    if (mode === 'messages') {
      const [message, metadata] = toWire(chunk) as [Message, Record<string, unknown>];
      if (this.requested.has('messages-tuple')) out.push({ event: `messages${suffix}`, data: [message, metadata] });
      if (this.requested.has('messages')) out.push(...this.legacyPartial(message, metadata, suffix));
      return out;
    }
    const data = toWire(mode === 'debug' ? debugChunk(chunk as DebugChunk) : chunk);
    if (this.requested.has(mode)) out.push({ event: `${mode}${suffix}`, data });
    if (mode === 'values' && this.requested.has('messages') && !namespace.length) out.push(...this.legacyComplete(data, suffix));
    return out;
  }

  private legacyPartial(message: Message, metadata: Record<string, unknown>, suffix: string): WireEvent[] {
    const id = message.id ?? 'unknown';
    const out: WireEvent[] = [];
    const previous = this.partial.get(id);
    if (!previous) out.push({ event: `messages/metadata${suffix}`, data: { [id]: { metadata } } });
    const merged =
      previous && typeof previous.content === 'string' && typeof message.content === 'string'
        ? { ...message, content: previous.content + message.content }
        : message;
    this.partial.set(id, merged);
    out.push({ event: `messages/partial${suffix}`, data: [merged] });
    return out;
  }

  private legacyComplete(values: unknown, suffix: string): WireEvent[] {
    const messages = (values as { messages?: Message[] } | null)?.messages;
    if (!Array.isArray(messages)) return [];
    const fresh = messages.filter((m) => m?.id && !this.completed.has(m.id));
    for (const m of fresh) this.completed.add(m.id!);
    return fresh.length ? [{ event: `messages/complete${suffix}`, data: fresh }] : [];
  }
}
