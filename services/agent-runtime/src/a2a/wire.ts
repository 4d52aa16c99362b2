/**
 * A2A objects and their two wire shapes. Inside, a task, message or event is the A2A 1.0 JSON
 * (ProtoJSON: camelCase, `{text}`/`{data}`/`{url}`/`{raw}` parts) with lowercase state and role
 * names; {@link toWire} writes it for the version the client speaks: 1.0 (`TASK_STATE_WORKING`,
 * `ROLE_AGENT`, stream events wrapped as `{task}`/`{statusUpdate}`/`{artifactUpdate}`) or 0.3
 * (`kind` on every object, `working`, `agent`, `{kind:"file", file:{uri|bytes}}` parts, flat events
 * with `final`). Incoming messages are read in either shape.
 */
import { z } from 'zod';
import { INVALID_PARAMS, JsonRpcError } from '../api/json-rpc.js';

export type Version = '1.0' | '0.3';
export type TaskState = 'submitted' | 'working' | 'completed' | 'failed' | 'canceled' | 'input-required' | 'rejected' | 'auth-required';
export const TERMINAL_STATES: ReadonlySet<TaskState> = new Set(['completed', 'failed', 'canceled', 'rejected']);

export interface Part {
  text?: string;
  data?: unknown;
  url?: string;
  /** Base64 of the file's bytes. */
  raw?: string;
  mediaType?: string;
  filename?: string;
  metadata?: Record<string, unknown>;
}

export interface Message {
  messageId: string;
  contextId?: string;
  taskId?: string;
  role: 'user' | 'agent';
  parts: Part[];
  metadata?: Record<string, unknown>;
}

export interface TaskStatus {
  state: TaskState;
  message?: Message;
  timestamp: string;
}

export interface Artifact {
  artifactId: string;
  name?: string;
  parts: Part[];
}

export interface Task {
  id: string;
  contextId: string;
  status: TaskStatus;
  artifacts?: Artifact[];
  history?: Message[];
  metadata?: Record<string, unknown>;
}

export type StreamEvent =
  | { task: Task }
  | { statusUpdate: { taskId: string; contextId: string; status: TaskStatus; final: boolean } }
  | { artifactUpdate: { taskId: string; contextId: string; artifact: Artifact; append?: boolean; lastChunk?: boolean } };

export interface PushConfig {
  id: string;
  taskId: string;
  url: string;
  token?: string;
}

const stateName = (state: TaskState) => `TASK_STATE_${state.toUpperCase().replace('-', '_')}`;

function partV03(part: Part): Record<string, unknown> {
  const meta = part.metadata ? { metadata: part.metadata } : {};
  if (part.text !== undefined) return { kind: 'text', text: part.text, ...meta };
  if (part.url !== undefined || part.raw !== undefined) {
    const file = {
      ...(part.url !== undefined ? { uri: part.url } : { bytes: part.raw }),
      ...(part.mediaType ? { mimeType: part.mediaType } : {}),
      ...(part.filename ? { name: part.filename } : {}),
    };
    return { kind: 'file', file, ...meta };
  }
  // 0.3 DataParts hold objects only: anything else is wrapped, marked as the 1.0 SDK marks it.
  const data = part.data;
  if (typeof data === 'object' && data !== null && !Array.isArray(data)) return { kind: 'data', data, ...meta };
  return { kind: 'data', data: { value: data ?? null }, metadata: { ...part.metadata, data_part_compat: true } };
}

function messageWire(message: Message, version: Version): Record<string, unknown> {
  if (version === '1.0') return { ...message, role: message.role === 'user' ? 'ROLE_USER' : 'ROLE_AGENT' };
  return { kind: 'message', ...message, parts: message.parts.map(partV03) };
}

function statusWire(status: TaskStatus, version: Version): Record<string, unknown> {
  return {
    state: version === '1.0' ? stateName(status.state) : status.state,
    ...(status.message ? { message: messageWire(status.message, version) } : {}),
    timestamp: status.timestamp,
  };
}

function artifactWire(artifact: Artifact, version: Version): Record<string, unknown> {
  return version === '1.0' ? { ...artifact } : { ...artifact, parts: artifact.parts.map(partV03) };
}

export function taskWire(task: Task, version: Version): Record<string, unknown> {
  return {
    ...(version === '0.3' ? { kind: 'task' } : {}),
    id: task.id,
    contextId: task.contextId,
    status: statusWire(task.status, version),
    ...(task.artifacts?.length ? { artifacts: task.artifacts.map((a) => artifactWire(a, version)) } : {}),
    ...(task.history?.length ? { history: task.history.map((m) => messageWire(m, version)) } : {}),
    ...(task.metadata ? { metadata: task.metadata } : {}),
  };
}

/** A stream event (and a push notification's body): 1.0 wraps it in its field, 0.3 writes it flat with `kind`. */
export function eventWire(event: StreamEvent, version: Version): Record<string, unknown> {
  if ('task' in event) return version === '1.0' ? { task: taskWire(event.task, version) } : taskWire(event.task, version);
  if ('statusUpdate' in event) {
    const { final, ...update } = event.statusUpdate;
    const body = { ...update, status: statusWire(update.status, version) };
    // 1.0 dropped `final`: the stream ends after a terminal or interrupted state.
    return version === '1.0' ? { statusUpdate: body } : { kind: 'status-update', ...body, final };
  }
  const body = { ...event.artifactUpdate, artifact: artifactWire(event.artifactUpdate.artifact, version) };
  return version === '1.0' ? { artifactUpdate: body } : { kind: 'artifact-update', ...body };
}

export function pushConfigWire(config: PushConfig, version: Version): Record<string, unknown> {
  const { taskId, ...rest } = config;
  return version === '1.0' ? { ...config } : { taskId, pushNotificationConfig: rest };
}

const metadata = z.record(z.string(), z.unknown()).optional();
/** A part in either shape: 1.0 `{text}`/`{data}`/`{url}`/`{raw}`, or 0.3 with its `kind`. */
const PartIn = z.union([
  z.strictObject({ kind: z.literal('text'), text: z.string(), metadata }),
  z.strictObject({ kind: z.literal('data'), data: z.unknown(), metadata }),
  z.strictObject({
    kind: z.literal('file'),
    file: z.union([
      z.object({ uri: z.string(), mimeType: z.string().optional(), name: z.string().optional() }),
      z.object({ bytes: z.base64(), mimeType: z.string().optional(), name: z.string().optional() }),
    ]),
    metadata,
  }),
  z
    .strictObject({
      text: z.string().optional(),
      data: z.unknown().optional(),
      url: z.string().optional(),
      raw: z.base64().optional(),
      mediaType: z.string().optional(),
      filename: z.string().optional(),
      metadata,
    })
    .refine((p) => [p.text, p.data, p.url, p.raw].filter((v) => v !== undefined).length === 1, 'a part has exactly one of text, data, url, raw'),
]);

export const MessageIn = z.strictObject({
  messageId: z.string().min(1),
  contextId: z.string().optional(),
  taskId: z.string().optional(),
  role: z.enum(['user', 'ROLE_USER', 'agent', 'ROLE_AGENT']),
  parts: z.array(PartIn).min(1),
  metadata,
  extensions: z.array(z.string()).optional(),
  referenceTaskIds: z.array(z.string()).optional(),
  kind: z.literal('message').optional(),
});

/** An incoming message as this module holds it (1.0 parts, lowercase role). */
export function readMessage(raw: z.output<typeof MessageIn>): Message {
  const parts: Part[] = raw.parts.map((p) => {
    const meta = p.metadata ? { metadata: p.metadata } : {};
    if (!('kind' in p)) return p as Part;
    if (p.kind === 'text') return { text: p.text, ...meta };
    if (p.kind === 'data') {
      const wrapped = p.metadata?.data_part_compat === true && typeof p.data === 'object' && p.data !== null && 'value' in p.data;
      return { data: wrapped ? (p.data as { value: unknown }).value : p.data, ...meta };
    }
    const file = p.file;
    return {
      ...('uri' in file ? { url: file.uri } : { raw: file.bytes }),
      ...(file.mimeType ? { mediaType: file.mimeType } : {}),
      ...(file.name ? { filename: file.name } : {}),
      ...meta,
    };
  });
  return {
    messageId: raw.messageId,
    ...(raw.contextId ? { contextId: raw.contextId } : {}),
    ...(raw.taskId ? { taskId: raw.taskId } : {}),
    role: raw.role === 'user' || raw.role === 'ROLE_USER' ? 'user' : 'agent',
    parts,
    ...(raw.metadata ? { metadata: raw.metadata } : {}),
  };
}

/** Parses `params` with `schema`; -32602 naming each problem (in `data`) otherwise. */
export function parseParams<S extends z.ZodType>(schema: S, params: unknown, method: string): z.output<S> {
  const parsed = schema.safeParse(params);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((i) => ({ loc: ['params', ...i.path.map(String)], msg: i.message, type: i.code }));
  throw new JsonRpcError(INVALID_PARAMS, `Invalid params for ${method}: ${problems.map((p) => `${p.loc.join('.')}: ${p.msg}`).join('; ')}`, { problems });
}
