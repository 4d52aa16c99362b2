/**
 * A2A on the agent server, driven by the official JS client (`@a2a-js/sdk` 1.3: its 1.0 JSON-RPC
 * transport and its 0.3 one) and by hand where the wire shape itself is the point, against real
 * Postgres. The project is test-projects/a2a (graphs on a `messages` state, no model).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Role, TaskState, type Message, type Task } from '@a2a-js/sdk';
import { Client, ClientFactory } from '@a2a-js/sdk/client';
import { TaskNotFoundError } from '@a2a-js/sdk/errors';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './index.js';
import { startTestServer } from './__tests__/fixtures.js';

const project = (name: string) => fileURLToPath(new URL(`../test-projects/a2a/${name}`, import.meta.url));

let db: TestDatabase;
let server: RunningAgentServer;

beforeAll(async () => {
  db = await createTestDatabase('agenta2a');
  server = await startTestServer(db.url, { configPath: project('langgraph.json') });
}, 60_000);
afterAll(async () => {
  await server?.close();
  await db?.drop();
});

/** A 1.0 client of an assistant, made from its card as any A2A client would. */
const clientOf = (assistant: string): Promise<Client> => new ClientFactory().createFromUrl(`${server.url}/a2a/${assistant}/`);

/** A 0.3 client of an assistant (the SDK's compat transport), on the same endpoint. */
async function legacyClientOf(assistant: string): Promise<Client> {
  const card = await (await clientOf(assistant)).getAgentCard();
  return new Client(new LegacyJsonRpcTransport({ endpoint: `${server.url}/a2a/${assistant}` }), card);
}

const userText = (text: string, extra: Partial<Message> = {}): Message => ({
  messageId: randomUUID(),
  contextId: '',
  taskId: '',
  role: Role.ROLE_USER,
  parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
  ...extra,
});

const send = (message: Message, configuration?: { returnImmediately?: boolean; historyLength?: number }) => ({
  tenant: '',
  message,
  configuration: configuration ? { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: false, ...configuration } : undefined,
  metadata: undefined,
});

const asTask = (result: Task | Message): Task => {
  if (!('status' in result)) throw new Error(`expected a task, got a message: ${JSON.stringify(result)}`);
  return result;
};
const texts = (task: Task) => task.artifacts.flatMap((a) => a.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : undefined)));

/** One JSON-RPC call by hand; the parsed answer. */
async function rpc(assistant: string, method: string, params: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${server.url}/a2a/${assistant}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }),
  });
  return { status: res.status, body: (await res.json()) as { id: unknown; result?: Record<string, any>; error?: { code: number; message: string; data?: any } } };
}

describe('the agent card', () => {
  it('describes the assistant, with its JSON-RPC interfaces (1.0 and 0.3) at the URL the client used', async () => {
    const res = await fetch(`${server.url}/a2a/echo/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } });
    expect(res.status).toBe(200);
    const card = (await res.json()) as Record<string, any>;
    expect(card).toMatchObject({
      name: 'echo',
      description: 'Replies with the last human message, prefixed by "echo: "',
      supportedInterfaces: [
        { url: `${server.url}/a2a/echo`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
        { url: `${server.url}/a2a/echo`, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      ],
      capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: true },
      skills: [{ id: 'echo' }],
    });
    // A 1.0 card carries none of 0.3's top-level fields.
    expect(card.url).toBeUndefined();
    expect(res.headers.get('cache-control')).toMatch(/max-age=\d+/);
    const etag = res.headers.get('etag')!;
    const again = await fetch(`${server.url}/a2a/echo/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0', 'If-None-Match': etag } });
    expect(again.status).toBe(304);
  });

  it('names the public URL behind the gateway (x-forwarded-proto, -host and -prefix)', async () => {
    const res = await fetch(`${server.url}/.well-known/agent-card.json?assistant_id=echo`, {
      headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'gw.example.com', 'x-forwarded-prefix': '/d/0b7c5d2e-1f3a-4c5b-8d6e-7f8091a2b3c4' },
    });
    expect(res.status).toBe(200);
    const card = (await res.json()) as { supportedInterfaces: { url: string }[]; url: string };
    expect(card.supportedInterfaces[0]!.url).toBe('https://gw.example.com/d/0b7c5d2e-1f3a-4c5b-8d6e-7f8091a2b3c4/a2a/echo');
    // Without an A2A-Version header the card is readable by 0.3 clients too.
    expect(card.url).toBe(card.supportedInterfaces[0]!.url);
  });

  it('answers 404 for an assistant that does not exist', async () => {
    expect((await fetch(`${server.url}/a2a/nope/.well-known/agent-card.json`)).status).toBe(404);
    expect((await fetch(`${server.url}/.well-known/agent-card.json?assistant_id=${randomUUID()}`)).status).toBe(404);
  });
});

describe('SendMessage and GetTask (A2A 1.0)', () => {
  it('runs the graph on a new context and answers with the completed task and its artifact', async () => {
    const client = await clientOf('echo');
    const task = asTask(await client.sendMessage(send(userText('hello there'))));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.contextId).toMatch(/^[0-9a-f-]{36}$/);
    expect(texts(task)).toEqual(['echo: hello there']);
    expect(task.history.map((m) => m.role)).toEqual([Role.ROLE_USER, Role.ROLE_AGENT]);

    const got = await client.getTask({ tenant: '', id: task.id });
    expect(got.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(texts(got)).toEqual(['echo: hello there']);

    // The next message in the context is a new task on the same thread: the graph sees both turns.
    const next = asTask(await client.sendMessage(send(userText('again', { contextId: task.contextId }))));
    expect(next.id).not.toBe(task.id);
    expect(next.contextId).toBe(task.contextId);
    expect(texts(next)).toEqual(['echo: again']);
  });

  it('answers in 1.0 wire shapes: {task}, TASK_STATE_*, ROLE_*', async () => {
    const { body } = await rpc('echo', 'SendMessage', { message: { messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'shapes' }] } }, { 'A2A-Version': '1.0' });
    expect(body.result!.task).toMatchObject({
      status: { state: 'TASK_STATE_COMPLETED' },
      artifacts: [{ parts: [{ text: 'echo: shapes' }] }],
      history: [{ role: 'ROLE_USER' }, { role: 'ROLE_AGENT' }],
    });
    expect(body.result!.task.kind).toBeUndefined();
    expect(body.result!.task.status.timestamp).toMatch(/Z$/);
  });

  it('refuses unknown, malformed and foreign task ids with -32001', async () => {
    const client = await clientOf('echo');
    await expect(client.getTask({ tenant: '', id: randomUUID() })).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(client.getTask({ tenant: '', id: 'not-a-uuid' })).rejects.toBeInstanceOf(TaskNotFoundError);
    // A task of another assistant is not this one's.
    const other = asTask(await (await clientOf('structured')).sendMessage(send(userText('x'))));
    const { body } = await rpc('echo', 'GetTask', { id: other.id });
    expect(body.error).toMatchObject({ code: -32001, data: { taskId: other.id } });
  });

  it('puts the graph\'s structured_response in the artifact as a DataPart', async () => {
    const task = asTask(await (await clientOf('structured')).sendMessage(send(userText('abc'))));
    expect(task.artifacts[0]!.parts.map((p) => p.content)).toEqual([
      { $case: 'text', value: 'here it is' },
      { $case: 'data', value: { text: 'abc', length: 3 } },
    ]);
  });

  it('reports a failed graph as a failed task whose status message says why', async () => {
    const task = asTask(await (await clientOf('fail')).sendMessage(send(userText('go'))));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_FAILED);
    expect(task.status?.message?.parts[0]?.content).toEqual({ $case: 'text', value: expect.stringContaining('the agent broke') });
  });
});

describe('A2A 0.3 (message/send, tasks/get)', () => {
  it('works through the SDK\'s 0.3 transport', async () => {
    const client = await legacyClientOf('echo');
    const task = asTask(await client.sendMessage(send(userText('old client'))));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(texts(task)).toEqual(['echo: old client']);
    const got = await client.getTask({ tenant: '', id: task.id });
    expect(texts(got)).toEqual(['echo: old client']);
  });

  it('answers in 0.3 wire shapes: the task itself, kind, lowercase states and roles', async () => {
    const { body } = await rpc('echo', 'message/send', { message: { kind: 'message', messageId: 'm2', role: 'user', parts: [{ kind: 'text', text: 'legacy' }] } });
    expect(body.result).toMatchObject({
      kind: 'task',
      status: { state: 'completed' },
      artifacts: [{ parts: [{ kind: 'text', text: 'echo: legacy' }] }],
      history: [{ kind: 'message', role: 'user' }, { kind: 'message', role: 'agent' }],
    });
    const got = await rpc('echo', 'tasks/get', { id: body.result!.id });
    expect(got.body.result).toMatchObject({ kind: 'task', id: body.result!.id, status: { state: 'completed' } });
  });

  it('refuses an A2A-Version header that does not match the method with -32009', async () => {
    const { body } = await rpc('echo', 'message/send', { message: { messageId: 'm3', role: 'user', parts: [{ kind: 'text', text: 'x' }] } }, { 'A2A-Version': '1.0' });
    expect(body.error).toMatchObject({ code: -32009, data: { requested: '1.0', supportedVersions: ['1.0', '0.3'] } });
    const unknown = await rpc('echo', 'GetTask', { id: randomUUID() }, { 'A2A-Version': '2.0' });
    expect(unknown.body.error?.code).toBe(-32009);
  });
});
