/**
 * Tasks are runs: a task's id is its run's id, its `contextId` the run's thread. How a run stands
 * becomes the task's state; its final values become the task's artifact (the last AI message's
 * text, and the graph's `structured_response` as a DataPart), and a pending interrupt of the
 * thread's latest run makes that run's task `input-required`, the interrupt's value its status message.
 */
import type { Run, RunStore } from '../storage/runs.js';
import type { Json, JsonObject } from '../storage/sql.js';
import type { Thread, ThreadStore } from '../storage/threads.js';
import type { Artifact, Message, Part, Task, TaskState } from './wire.js';

/** Where a run's A2A message is kept (in the run's metadata), for the task's history. */
export const MESSAGE_KEY = 'a2a_message';

/** The artifact a finished task has; one per task, so one id. */
export const ARTIFACT_NAME = 'result';

interface StoredMessage {
  type?: string;
  role?: string;
  content?: unknown;
}

/** The text of a LangChain message's content: a string, or its text blocks joined. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((block) =>
      typeof block === 'string'
        ? block
        : block && typeof block === 'object' && (block as { type?: unknown }).type === 'text'
          ? String((block as { text?: unknown }).text ?? '')
          : '',
    )
    .join('');
}

const isAi = (m: StoredMessage) => m.type === 'ai' || m.type === 'AIMessage' || m.type === 'AIMessageChunk' || m.role === 'assistant' || m.role === 'ai';

/** The parts of a finished run's result; empty when its values have neither an AI message nor a structured response. */
export function resultParts(values: Json | null | undefined): Part[] {
  if (!values || typeof values !== 'object' || Array.isArray(values)) return [];
  const parts: Part[] = [];
  const messages = (values as JsonObject).messages;
  if (Array.isArray(messages)) {
    const last = [...(messages as StoredMessage[])].reverse().find((m) => m && typeof m === 'object' && isAi(m));
    if (last) parts.push({ text: textOf(last.content) });
  }
  const structured = (values as JsonObject).structured_response;
  if (structured !== undefined && structured !== null) parts.push({ data: structured });
  return parts;
}

export const artifactIdOf = (runId: string) => `${runId}-${ARTIFACT_NAME}`;

export function artifactOf(runId: string, values: Json | null | undefined): Artifact | undefined {
  const parts = resultParts(values);
  return parts.length ? { artifactId: artifactIdOf(runId), name: ARTIFACT_NAME, parts } : undefined;
}

/** The text of a `messages-tuple` event (`[message, metadata]`) when its message is the AI's; '' otherwise. */
export function aiText(data: unknown): string {
  const message = (Array.isArray(data) ? data[0] : undefined) as StoredMessage | undefined;
  return message && typeof message === 'object' && isAi(message) ? textOf(message.content) : '';
}

/** The values the thread's pending interrupts ask with (LangGraph's `{value, id}` entries). */
export function interruptValues(interrupts: JsonObject | undefined): { id?: string; value: unknown }[] {
  return Object.values(interrupts ?? {})
    .flatMap((list) => (Array.isArray(list) ? list : [list]))
    .map((i) => {
      const entry = (i ?? {}) as { id?: unknown; value?: unknown };
      return { ...(typeof entry.id === 'string' ? { id: entry.id } : {}), value: entry.value ?? null };
    });
}

/** The agent's question: a string interrupt value as text, anything else as data. */
export function interruptMessage(run: Pick<Run, 'run_id' | 'thread_id'>, interrupts: JsonObject | undefined): Message {
  const parts: Part[] = interruptValues(interrupts).map(({ value }) => (typeof value === 'string' ? { text: value } : { data: value }));
  return { messageId: `${run.run_id}-input-required`, contextId: run.thread_id, taskId: run.run_id, role: 'agent', parts };
}

/**
 * How a run stands as a task. `interrupted` (the run was cancelled) is `canceled`; a successful run
 * that left its thread waiting at an interrupt, and is still the thread's latest, is `input-required`.
 */
export function stateOf(run: Pick<Run, 'status' | 'run_id'>, thread: Pick<Thread, 'status'> | undefined, latestRunId: string | undefined): TaskState {
  switch (run.status) {
    case 'pending':
      return 'submitted';
    case 'running':
      return 'working';
    case 'interrupted':
      return 'canceled';
    case 'error':
    case 'timeout':
      return 'failed';
    case 'success':
      return thread?.status === 'interrupted' && latestRunId === run.run_id ? 'input-required' : 'completed';
  }
}

export interface TaskView {
  run: Run;
  /** The run's final values (RunStore.result's output); null while it has none. */
  output: Json | null;
  thread: Pick<Thread, 'status' | 'interrupts' | 'error'> | undefined;
  latestRunId: string | undefined;
}

/** What a run's task is read from, as of now. */
export async function taskView(stores: { runs: RunStore; threads: ThreadStore }, run: Run): Promise<TaskView> {
  const [current, result, thread, latest] = await Promise.all([
    stores.runs.getById(run.run_id),
    stores.runs.result(run.run_id),
    stores.threads.find(run.thread_id),
    stores.runs.list(run.thread_id, { limit: 1, offset: 0 }),
  ]);
  return { run: current ?? run, output: result?.output ?? null, thread, latestRunId: latest[0]?.run_id };
}

/** The task of a run. `historyLength` 0 leaves the history out, as the spec asks. */
export function taskOf({ run, output, thread, latestRunId }: TaskView, options: { historyLength?: number; artifacts?: boolean } = {}): Task {
  const state = stateOf(run, thread, latestRunId);
  const timestamp = new Date(run.updated_at).toISOString();
  const error = state === 'failed' && thread?.error && latestRunId === run.run_id ? (thread.error as { message?: unknown }).message : undefined;
  const statusMessage: Message | undefined =
    state === 'input-required'
      ? interruptMessage(run, thread?.interrupts)
      : typeof error === 'string'
        ? { messageId: `${run.run_id}-error`, contextId: run.thread_id, taskId: run.run_id, role: 'agent', parts: [{ text: error }] }
        : undefined;
  const artifact = state === 'completed' && options.artifacts !== false ? artifactOf(run.run_id, output) : undefined;
  const history: Message[] = [];
  const sent = run.metadata[MESSAGE_KEY] as Message | undefined;
  if (sent && typeof sent === 'object') history.push({ ...sent, contextId: run.thread_id, taskId: run.run_id });
  if (artifact) history.push({ messageId: `${run.run_id}-reply`, contextId: run.thread_id, taskId: run.run_id, role: 'agent', parts: artifact.parts });
  const kept = options.historyLength === undefined ? history : options.historyLength <= 0 ? [] : history.slice(-options.historyLength);
  return {
    id: run.run_id,
    contextId: run.thread_id,
    status: { state, ...(statusMessage ? { message: statusMessage } : {}), timestamp },
    ...(artifact ? { artifacts: [artifact] } : {}),
    ...(kept.length ? { history: kept } : {}),
  };
}

/** A graph's input for a user message: one human message (a string, or content blocks for files and data). */
export function runInput(message: Message): JsonObject {
  const textOnly = message.parts.every((p) => p.text !== undefined);
  const content: Json = textOnly
    ? message.parts.map((p) => p.text!).join('\n')
    : message.parts.map((p): Json => {
        if (p.text !== undefined) return { type: 'text', text: p.text };
        if (p.url !== undefined)
          return {
            type: 'file',
            url: p.url,
            ...(p.mediaType ? { mime_type: p.mediaType } : {}),
            ...(p.filename ? { metadata: { filename: p.filename } } : {}),
          };
        if (p.raw !== undefined)
          return {
            type: 'file',
            data: p.raw,
            mime_type: p.mediaType || 'application/octet-stream',
            ...(p.filename ? { metadata: { filename: p.filename } } : {}),
          };
        return { type: 'text', text: JSON.stringify(p.data ?? null) };
      });
  return { messages: [{ role: 'user', content }] };
}

/** What a message answering an interrupt resumes it with: its one DataPart's data, else its text. */
export function resumeValue(message: Message): Json {
  const data = message.parts.filter((p) => p.data !== undefined);
  if (data.length === 1 && message.parts.length === 1) return data[0]!.data as Json;
  return message.parts.map((p) => p.text ?? (p.data !== undefined ? JSON.stringify(p.data) : '')).join('\n');
}
