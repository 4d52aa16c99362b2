/**
 * A2A on the agent server, driven by the official JS client (`@a2a-js/sdk` 1.3: its 1.0 JSON-RPC
 * transport and its 0.3 one) and by hand where the wire shape itself is the point, against real
 * Postgres. The project is test-projects/a2a (graphs on a `messages` state, no model).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Role, TaskState, type AgentCard, type Message, type Task } from '@a2a-js/sdk';
import { Client, ClientFactory, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { TaskNotFoundError } from '@a2a-js/sdk/errors';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './index.js';
import { startTestServer } from './__tests__/fixtures.js';
import { asTask, userText } from './__tests__/a2a.js';

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

const send = (message: Message, configuration?: { returnImmediately?: boolean; historyLength?: number }) => ({
  tenant: '',
  message,
  configuration: configuration ? { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: false, ...configuration } : undefined,
  metadata: undefined,
});

const texts = (task: Task) => task.artifacts.flatMap((a) => a.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : undefined)));

/** One JSON-RPC call by hand; the parsed answer. */
async function rpc(assistant: string, method: string, params: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${server.url}/a2a/${assistant}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }),
  });
  return {
    status: res.status,
    body: (await res.json()) as { id: unknown; result?: Record<string, any>; error?: { code: number; message: string; data?: any } },
  };
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

  it('serves the extended card (GetExtendedAgentCard, agent/getAuthenticatedExtendedCard) it advertises', async () => {
    const client = await clientOf('echo');
    expect(await client.getAgentCard()).toMatchObject({ name: 'echo', capabilities: { extendedAgentCard: true } });
    const legacy = await rpc('echo', 'agent/getAuthenticatedExtendedCard', {});
    expect(legacy.body.result).toMatchObject({
      protocolVersion: '0.3.0',
      url: `${server.url}/a2a/echo`,
      preferredTransport: 'JSONRPC',
      supportsAuthenticatedExtendedCard: true,
    });
    expect(legacy.body.result!.supportedInterfaces).toBeUndefined();
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
    const { body } = await rpc(
      'echo',
      'SendMessage',
      { message: { messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'shapes' }] } },
      { 'A2A-Version': '1.0' },
    );
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

  it('hands files and data to the graph as content blocks of the human message', async () => {
    const { body } = await rpc('echo', 'SendMessage', {
      message: {
        messageId: 'm-files',
        role: 'ROLE_USER',
        parts: [
          { text: 'look' },
          { url: 'https://example.com/cat.png', mediaType: 'image/png', filename: 'cat.png' },
          { raw: 'aGk=', mediaType: 'text/plain' },
          { data: { n: 1 } },
        ],
      },
    });
    const task = body.result!.task;
    const state = (await (await fetch(`${server.url}/threads/${task.contextId}/state`)).json()) as { values: { messages: { content: unknown }[] } };
    expect(state.values.messages[0]!.content).toEqual([
      { type: 'text', text: 'look' },
      { type: 'file', url: 'https://example.com/cat.png', mime_type: 'image/png', metadata: { filename: 'cat.png' } },
      { type: 'file', data: 'aGk=', mime_type: 'text/plain' },
      { type: 'text', text: '{"n":1}' },
    ]);
    expect(task.artifacts[0].parts).toEqual([{ text: 'echo: look{"n":1}' }]);
  });

  it("puts the graph's structured_response in the artifact as a DataPart", async () => {
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
  it("works through the SDK's 0.3 transport", async () => {
    const client = await legacyClientOf('echo');
    const task = asTask(await client.sendMessage(send(userText('old client'))));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(texts(task)).toEqual(['echo: old client']);
    const got = await client.getTask({ tenant: '', id: task.id });
    expect(texts(got)).toEqual(['echo: old client']);
  });

  it('answers in 0.3 wire shapes: the task itself, kind, lowercase states and roles', async () => {
    const { body } = await rpc('echo', 'message/send', {
      message: { kind: 'message', messageId: 'm2', role: 'user', parts: [{ kind: 'text', text: 'legacy' }] },
    });
    expect(body.result).toMatchObject({
      kind: 'task',
      status: { state: 'completed' },
      artifacts: [{ parts: [{ kind: 'text', text: 'echo: legacy' }] }],
      history: [
        { kind: 'message', role: 'user' },
        { kind: 'message', role: 'agent' },
      ],
    });
    const got = await rpc('echo', 'tasks/get', { id: body.result!.id });
    expect(got.body.result).toMatchObject({ kind: 'task', id: body.result!.id, status: { state: 'completed' } });
  });

  it('refuses an A2A-Version header that does not match the method with -32009', async () => {
    const { body } = await rpc(
      'echo',
      'message/send',
      { message: { messageId: 'm3', role: 'user', parts: [{ kind: 'text', text: 'x' }] } },
      { 'A2A-Version': '1.0' },
    );
    expect(body.error).toMatchObject({ code: -32009, data: { requested: '1.0', supportedVersions: ['1.0', '0.3'] } });
    const unknown = await rpc('echo', 'GetTask', { id: randomUUID() }, { 'A2A-Version': '2.0' });
    expect(unknown.body.error?.code).toBe(-32009);
  });
});

/** The events of a streaming call made by hand: each SSE `data:` line, parsed. */
async function rpcStream(assistant: string, method: string, params: unknown) {
  const res = await fetch(`${server.url}/a2a/${assistant}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'stream-1', method, params }),
  });
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const text = await res.text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice('data: '.length)) as { id: unknown; result: Record<string, any> });
}

type StreamItem = Awaited<ReturnType<Client['sendMessageStream']> extends AsyncGenerator<infer T> ? T : never>;
async function collect(stream: AsyncGenerator<StreamItem>): Promise<StreamItem[]> {
  const items: StreamItem[] = [];
  for await (const item of stream) items.push(item);
  return items;
}

describe('SendStreamingMessage and SubscribeToTask', () => {
  it('streams the task, its working state, its artifact and its final state', async () => {
    const client = await clientOf('echo');
    const events = await collect(client.sendMessageStream(send(userText('stream me'))));
    const cases = events.map((e) => e.payload?.$case);
    expect(cases[0]).toBe('task');
    expect(cases).toContain('artifactUpdate');
    const artifacts = events
      .filter((e) => e.payload?.$case === 'artifactUpdate')
      .map((e) => e.payload!.value as { artifact: { artifactId: string; parts: { content: unknown }[] }; append: boolean; lastChunk: boolean });
    // The AI message as the graph streamed it, then the whole artifact replacing the chunks.
    expect(artifacts.map((a) => [a.artifact.parts[0]!.content, a.append, a.lastChunk])).toEqual([
      [{ $case: 'text', value: 'echo: stream me' }, false, false],
      [{ $case: 'text', value: 'echo: stream me' }, false, true],
    ]);
    expect(new Set(artifacts.map((a) => a.artifact.artifactId)).size).toBe(1);
    const last = events.at(-1)!.payload!;
    expect(last.$case).toBe('statusUpdate');
    expect((last.value as { status: { state: TaskState } }).status.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it('streams 0.3 events flat, with kind and final', async () => {
    const events = await rpcStream('echo', 'message/stream', {
      message: { kind: 'message', messageId: 'm4', role: 'user', parts: [{ kind: 'text', text: 'flat' }] },
    });
    expect(events.every((e) => e.id === 'stream-1')).toBe(true);
    const kinds = events.map((e) => e.result.kind);
    expect(kinds[0]).toBe('task');
    expect(kinds).toContain('artifact-update');
    expect(events.at(-1)!.result).toMatchObject({ kind: 'status-update', final: true, status: { state: 'completed' } });
  });

  it('subscribes to a running task until it ends; an ended task has nothing to subscribe to (-32004)', async () => {
    const client = await clientOf('slow');
    const started = asTask(await client.sendMessage(send(userText('wait 60000'), { returnImmediately: true })));
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]).toContain(started.status?.state);
    const subscription = client.resubscribeTask({ tenant: '', id: started.id });
    const first = await subscription.next();
    expect((first.value as StreamItem).payload?.$case).toBe('task');
    // The task ends while subscribed (cancelled here, so that nothing waits on a clock).
    await client.cancelTask({ tenant: '', id: started.id, metadata: undefined });
    const rest = await collect(subscription);
    const last = rest.at(-1)!.payload!.value as { status: { state: TaskState }; taskId: string };
    expect(last).toMatchObject({ taskId: started.id, status: { state: TaskState.TASK_STATE_CANCELED } });
    const { body } = await rpc('slow', 'SubscribeToTask', { id: started.id });
    expect(body.error).toMatchObject({ code: -32004, data: { taskId: started.id, state: 'canceled' } });
    expect((await rpc('slow', 'tasks/resubscribe', { id: started.id })).body.error?.code).toBe(-32004);
  });
});

describe('input-required and resume', () => {
  it('turns an interrupt into input-required, and the next message in the context resumes it', async () => {
    const client = await clientOf('approve');
    const asked = asTask(await client.sendMessage(send(userText('deploy'))));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(asked.status?.message?.parts.map((p) => p.content)).toEqual([{ $case: 'text', value: 'Approve "deploy"?' }]);
    expect((await client.getTask({ tenant: '', id: asked.id })).status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);

    const answered = asTask(await client.sendMessage(send(userText('yes', { contextId: asked.contextId, taskId: asked.id }))));
    expect(answered.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(answered.contextId).toBe(asked.contextId);
    expect(texts(answered)).toEqual(['approved: yes']);
    // Answered, the question's task is over.
    expect((await client.getTask({ tenant: '', id: asked.id })).status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    // More input for a finished task is refused: the context goes on with new messages.
    const { body } = await rpc('approve', 'SendMessage', { message: { messageId: 'm5', role: 'ROLE_USER', taskId: asked.id, parts: [{ text: 'again' }] } });
    expect(body.error).toMatchObject({ code: -32004, data: { taskId: asked.id, state: 'completed' } });
  });

  it('resumes with the data of a DataPart, given the context alone', async () => {
    const client = await clientOf('approve');
    const asked = asTask(await client.sendMessage(send(userText('ship'))));
    const reply = userText('', { contextId: asked.contextId });
    reply.parts = [{ content: { $case: 'data', value: { approved_by: 'ops' } }, metadata: undefined, filename: '', mediaType: '' }];
    const answered = asTask(await client.sendMessage(send(reply)));
    expect(texts(answered)).toEqual(['approved: {"approved_by":"ops"}']);
  });
});

describe('CancelTask and ListTasks', () => {
  it('cancels a running task; a task that has ended is not cancelable (-32002)', async () => {
    const client = await clientOf('slow');
    const started = asTask(await client.sendMessage(send(userText('wait 60000'), { returnImmediately: true })));
    const canceled = await client.cancelTask({ tenant: '', id: started.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const { body } = await rpc('slow', 'CancelTask', { id: started.id });
    expect(body.error).toMatchObject({ code: -32002, data: { taskId: started.id, state: 'canceled' } });
    const legacy = await rpc('slow', 'tasks/cancel', { id: started.id });
    expect(legacy.body.error?.code).toBe(-32002);
  });

  it('lists the tasks of a context, newest first, page by page, filtered by state', async () => {
    const client = await clientOf('echo');
    const first = asTask(await client.sendMessage(send(userText('one'))));
    const second = asTask(await client.sendMessage(send(userText('two', { contextId: first.contextId }))));
    const query = { tenant: '', contextId: first.contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', statusTimestampAfter: undefined };
    const all = await client.listTasks({ ...query });
    expect(all.tasks.map((t) => t.id)).toEqual([second.id, first.id]);
    expect(all.totalSize).toBe(2);
    // Artifacts only when asked for.
    expect(all.tasks[0]!.artifacts).toEqual([]);
    expect(texts((await client.listTasks({ ...query, includeArtifacts: true })).tasks[0]!)).toEqual(['echo: two']);

    const page1 = await client.listTasks({ ...query, pageSize: 1 });
    expect(page1.tasks.map((t) => t.id)).toEqual([second.id]);
    const page2 = await client.listTasks({ ...query, pageSize: 1, pageToken: page1.nextPageToken });
    expect(page2.tasks.map((t) => t.id)).toEqual([first.id]);
    expect(page2.nextPageToken).toBe('');

    const canceled = await client.listTasks({ ...query, status: TaskState.TASK_STATE_CANCELED });
    expect(canceled.tasks).toEqual([]);
  });

  it("lists an agent's tasks across contexts, and no other agent's", async () => {
    const failing = await clientOf('fail');
    const failed = asTask(await failing.sendMessage(send(userText('list me'))));
    const listed = await failing.listTasks({
      tenant: '',
      contextId: '',
      status: TaskState.TASK_STATE_FAILED,
      pageToken: '',
      statusTimestampAfter: undefined,
      historyLength: 0,
    });
    expect(listed.tasks.map((t) => t.id)).toContain(failed.id);
    expect(listed.tasks.every((t) => t.status?.state === TaskState.TASK_STATE_FAILED && t.history.length === 0)).toBe(true);
    const echoes = await (
      await clientOf('echo')
    ).listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', statusTimestampAfter: undefined, pageSize: 100 });
    expect(echoes.tasks.map((t) => t.id)).not.toContain(failed.id);
  });
});

describe('bad input is a JSON-RPC error, never a 500', () => {
  const raw = async (body: string, contentType = 'application/json') => {
    const res = await fetch(`${server.url}/a2a/echo`, { method: 'POST', headers: { 'content-type': contentType }, body });
    return { status: res.status, body: (await res.json()) as { id: unknown; error?: { code: number; message: string; data?: any } } };
  };

  it.each([
    ['not JSON', '{"jsonrpc": "2.0",', 400, -32700],
    ['not an object', '"hello"', 400, -32600],
    ['a batch', '[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}]', 200, -32600],
    ['no id', '{"jsonrpc":"2.0","method":"GetTask","params":{}}', 200, -32600],
    ['not 2.0', '{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{}}', 200, -32600],
    ['params an array', '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[]}', 200, -32600],
    ['an unknown method', '{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{}}', 200, -32601],
    ['no message', '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}', 200, -32602],
    ['an empty message', '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}}', 200, -32602],
    [
      'a part of two kinds',
      '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a","url":"b"}]}}}',
      200,
      -32602,
    ],
    [
      'a context that is not a UUID',
      '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","contextId":"ctx-1","parts":[{"text":"a"}]}}}',
      200,
      -32602,
    ],
    ['an unknown param', '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x","extra":1}}', 200, -32602],
    ['a bad page token', '{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageToken":"!!"}}', 200, -32602],
    ['an unknown state', '{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"status":"TASK_STATE_SLEEPING"}}', 200, -32602],
  ])('%s', async (_what, body, status, code) => {
    const answer = await raw(body);
    expect(answer.status).toBe(status);
    expect(answer.body.error?.code).toBe(code);
  });

  it('names each invalid param in data', async () => {
    const { body } = await rpc('echo', 'SendMessage', { message: { messageId: 'm', role: 'robot', parts: [{ text: 'a' }] } });
    expect(body.error).toMatchObject({ code: -32602, data: { problems: [{ loc: ['params', 'message', 'role'] }] } });
  });

  it('answers a body that is not JSON-typed with 415', async () => {
    const answer = await raw('{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}', 'text/plain');
    expect(answer.status).toBe(415);
    expect(answer.body.error?.code).toBe(-32600);
  });

  it('answers push notification methods with -32003 on a server that sends no webhooks', async () => {
    const { body } = await rpc('echo', 'SendMessage', {
      message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'a' }] },
      configuration: { taskPushNotificationConfig: { url: 'https://example.com/hook' } },
    });
    expect(body.error?.code).toBe(-32003);
    expect((await rpc('echo', 'ListTaskPushNotificationConfigs', { taskId: randomUUID() })).body.error?.code).toBe(-32003);
  });

  it('keeps a context to the agent whose context it is', async () => {
    const task = asTask(await (await clientOf('echo')).sendMessage(send(userText('mine'))));
    const { body } = await rpc('approve', 'SendMessage', {
      message: { messageId: 'm', role: 'ROLE_USER', contextId: task.contextId, parts: [{ text: 'yours?' }] },
    });
    expect(body.error).toMatchObject({ code: -32602, data: { contextId: task.contextId } });
  });

  it('answers an unknown assistant with an error naming it', async () => {
    const { body } = await rpc('nope', 'GetTask', { id: randomUUID() });
    expect(body.error).toMatchObject({ code: -32000, data: { status: 404 } });
  });
});

describe('http.disable_a2a and custom auth', () => {
  it('serves no A2A route when langgraph.json sets http.disable_a2a', async () => {
    const off = await startTestServer(db.url, { configPath: project('langgraph.no-a2a.json'), schema: 'agent_noa2a', workers: 0 });
    try {
      expect((await fetch(`${off.url}/a2a/echo/.well-known/agent-card.json`)).status).toBe(404);
      expect((await fetch(`${off.url}/.well-known/agent-card.json?assistant_id=echo`)).status).toBe(404);
      const res = await fetch(`${off.url}/a2a/echo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}',
      });
      expect(res.status).toBe(404);
    } finally {
      await off.close();
    }
  });

  it('runs messages as the authenticated user: another user cannot see or continue the task', async () => {
    const guarded = await startTestServer(db.url, { configPath: project('langgraph.auth.json'), schema: 'agent_a2a_auth' });
    // The SDK's client with a bearer token on every request, as an app would set one up.
    const as = (token: string, card: AgentCard) =>
      new ClientFactory({
        transports: [
          new JsonRpcTransportFactory({
            fetchImpl: (url, init) => fetch(url, { ...init, headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${token}` } }),
          }),
        ],
      }).createFromAgentCard(card);
    try {
      expect((await fetch(`${guarded.url}/a2a/echo/.well-known/agent-card.json`)).status).toBe(401);
      const card = (await (
        await fetch(`${guarded.url}/a2a/echo/.well-known/agent-card.json`, { headers: { authorization: 'Bearer user-a' } })
      ).json()) as AgentCard;
      const alice = await as('user-a', card);
      const bob = await as('user-b', card);
      const task = asTask(await alice.sendMessage(send(userText('mine'))));
      expect(texts(task)).toEqual(['echo: mine']);
      expect((await alice.getTask({ tenant: '', id: task.id })).id).toBe(task.id);
      await expect(bob.getTask({ tenant: '', id: task.id })).rejects.toBeInstanceOf(TaskNotFoundError);
      await expect(bob.sendMessage(send(userText('theirs', { contextId: task.contextId })))).rejects.toThrow(/not found/i);
      expect(
        (
          await bob.listTasks({
            tenant: '',
            contextId: task.contextId,
            status: TaskState.TASK_STATE_UNSPECIFIED,
            pageToken: '',
            statusTimestampAfter: undefined,
          })
        ).tasks,
      ).toEqual([]);
    } finally {
      await guarded.close();
    }
  });
});
