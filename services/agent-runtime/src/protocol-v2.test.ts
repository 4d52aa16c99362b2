/**
 * Protocol v2 against real Postgres (and Redis): the SDK's own `client.threads.stream()` over SSE
 * and over WebSocket, raw commands and streams for what the SDK does not show (seq, replay from
 * another process, reconnect), custom auth on every command, and bad commands answered with
 * error envelopes.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import { createTestDatabase, sseFrames, testRedisUrl, until, type TestDatabase } from '@berth/testing';
import { WebSocket } from 'ws';
import { createEventBroker } from '@berth/broker';
import type { RunningAgentServer } from './server.js';
import { threadStreamKey } from './protocol/events.js';
import { redisKeyPrefix } from '@berth/agent-contract';
import { spawnAgentServer, startTestServer } from './__tests__/fixtures.js';

const project = fileURLToPath(new URL('../test-projects/protocol/langgraph.json', import.meta.url));
const authProject = fileURLToPath(new URL('../test-projects/auth/langgraph.json', import.meta.url));

/** A message's text, in either form (protocol events: content blocks; state.get: the state's own). */
const text = (m: any): string => (typeof m.content === 'string' ? m.content : m.content[0].text);

type Event = { type: 'event'; seq: number; event_id: string; method: string; params: { namespace: string[]; node?: string; data: any } };

let db: TestDatabase;
let server: RunningAgentServer;

beforeAll(async () => {
  db = await createTestDatabase('agent_protocol_v2');
  server = await startTestServer(db.url, { configPath: project });
}, 60_000);

afterAll(async () => {
  await server?.close();
  await db?.drop();
});

async function command(url: string, threadId: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}/threads/${threadId}/commands`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

/**
 * Reads a protocol SSE stream until `done(events)` (or the time limit, a safety net), then closes
 * it; `timedOut` says the time limit ended it. `opened` is called with the status once it answers.
 */
async function readEvents(
  url: string,
  threadId: string,
  filter: object,
  done: (events: Event[]) => boolean,
  headers: Record<string, string> = {},
  opened?: (status: number) => void,
): Promise<{ status: number; events: Event[]; timedOut: boolean }> {
  const abort = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => ((timedOut = true), abort.abort()), 15_000);
  const events: Event[] = [];
  const res = await fetch(`${url}/threads/${threadId}/stream/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(filter),
    signal: abort.signal,
  });
  opened?.(res.status);
  if (res.status !== 200) {
    clearTimeout(timer);
    return { status: res.status, events, timedOut };
  }
  try {
    for await (const frame of sseFrames(res.body!)) {
      events.push(JSON.parse(frame.data) as Event);
      if (done(events)) break;
    }
  } catch (error) {
    if (!abort.signal.aborted) throw error;
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  return { status: res.status, events, timedOut };
}

const rootEnds = (n: number) => (events: Event[]) =>
  events.filter((e) => e.method === 'lifecycle' && e.params.namespace.length === 0 && ['completed', 'interrupted', 'failed'].includes(e.params.data.event))
    .length >= n;

function expectOrdered(events: Event[]) {
  for (let i = 1; i < events.length; i++) expect(events[i]!.seq).toBeGreaterThan(events[i - 1]!.seq);
  expect(new Set(events.map((e) => e.event_id)).size).toBe(events.length);
}

async function interruptAndRespond(transport: 'sse' | 'websocket') {
  const client = new Client({ apiUrl: server.url });
  const threadId = randomUUID();
  const thread = client.threads.stream(threadId, {
    assistantId: 'interrupt',
    transport,
    ...(transport === 'websocket' ? { webSocketFactory: (url: string) => new WebSocket(url) as never } : {}),
  });
  const sub = (await thread.subscribe({ channels: ['lifecycle', 'input', 'values'] })) as AsyncIterable<Event>;
  // The SDK ends an iteration of a subscription at the end of each run; the next run goes on in it.
  const untilRunEnds = async () => {
    const events: Event[] = [];
    for await (const event of sub) events.push(event);
    return events;
  };
  const firstRun = untilRunEnds();
  await thread.run.start({ input: { question: 'ship it?' } });
  const first = await firstRun;
  const request = first.find((e) => e.method === 'input.requested')!;
  expect(request.params.data.payload).toEqual({ question: 'ship it?' });
  expect(thread.interrupted).toBe(true);
  // The pending interrupt is the saved state's.
  expect((await client.threads.getState(threadId)).tasks[0]!.interrupts[0]!.id).toBe(request.params.data.interrupt_id);
  const secondRun = (async () => {
    await thread.input.respond({ namespace: [], interrupt_id: request.params.data.interrupt_id, response: 'yes' });
    return untilRunEnds();
  })();
  const second = await secondRun;
  await thread.close();

  const events = [...first, ...second];
  expectOrdered(events);
  expect(events.filter((e) => e.method === 'lifecycle' && !e.params.namespace.length).map((e) => e.params.data.event)).toEqual([
    'running',
    'interrupted',
    'running',
    'completed',
  ]);
  expect(events.filter((e) => e.method === 'values').at(-1)!.params.data).toEqual({ question: 'ship it?', answer: 'yes', result: 'done: yes' });
  const answered = await command(server.url, threadId, {
    id: 1,
    method: 'input.respond',
    params: { interrupt_id: request.params.data.interrupt_id, response: 'again' },
  });
  expect(answered.body).toMatchObject({ type: 'error', id: 1, error: 'no_such_run' });
}

describe('the SDK thread stream over SSE', () => {
  it('stops at an interrupt, answers it with input.respond, and one subscription sees both runs', () => interruptAndRespond('sse'), 30_000);

  it('starts a run on a new thread and streams its tokens, values and lifecycle', async () => {
    const client = new Client({ apiUrl: server.url });
    const thread = client.threads.stream(randomUUID(), { assistantId: 'chat' });
    const events: Event[] = [];
    const sub = await thread.subscribe({ channels: ['messages', 'lifecycle', 'values', 'updates'] });
    const collected = (async () => {
      for await (const event of sub as AsyncIterable<Event>) {
        events.push(event);
        if (rootEnds(1)(events)) break;
      }
    })();
    const { run_id } = (await thread.run.start({ input: { messages: [{ role: 'user', content: 'hello there' }] } })) as { run_id: string };
    expect(run_id).toMatch(/^[0-9a-f-]{36}$/);
    await collected;
    await thread.close();

    expectOrdered(events);
    const deltas = events.filter((e) => e.method === 'messages' && e.params.data.event === 'content-block-delta').map((e) => e.params.data.delta.text);
    expect(deltas.length).toBeGreaterThan(3); // token by token
    expect(deltas.join('')).toBe('reply: hello there');
    expect(events.map((e) => e.params.data.event).filter((x) => typeof x === 'string' && x.startsWith('message-'))).toEqual([
      'message-start',
      'message-finish',
    ]);
    expect(events.find((e) => e.params.data.event === 'message-finish')!.params.data.usage).toMatchObject({ input_tokens: 5, output_tokens: 4 });
    expect(events.find((e) => e.method === 'updates')!.params.node).toBe('agent');
    const lifecycle = events.filter((e) => e.method === 'lifecycle' && e.params.namespace.length === 0).map((e) => e.params.data);
    expect(lifecycle).toEqual([
      { event: 'running', graph_name: 'chat' },
      { event: 'completed', graph_name: 'chat' },
    ]);
    // The values as sent (the SDK turns the messages of events it hands out into message objects).
    const sent = await readEvents(server.url, thread.threadId, { channels: ['values'], since: 0 }, (e) => e.length === 2);
    const last = sent.events.at(-1)!.params.data;
    expect(last.messages.map((m: any) => [m.type, m.content])).toEqual([
      ['human', 'hello there'],
      ['ai', [{ type: 'text', text: 'reply: hello there' }]],
    ]);
    // The run's end was recorded before its completed event: the thread is idle by then.
    expect((await client.threads.get(thread.threadId)).status).toBe('idle');
  }, 30_000);

  it('answers interrupts with the batch form of input.respond, its update applied in the same step', async () => {
    const threadId = randomUUID();
    await command(server.url, threadId, { id: 1, method: 'run.start', params: { assistant_id: 'interrupt', input: { question: 'q' } } });
    const first = await readEvents(server.url, threadId, { channels: ['lifecycle', 'input'] }, rootEnds(1));
    const interruptId = first.events.find((e) => e.method === 'input.requested')!.params.data.interrupt_id;
    const responded = await command(server.url, threadId, {
      id: 2,
      method: 'input.respond',
      params: { responses: [{ namespace: [], interrupt_id: interruptId, response: 'a' }], update: { question: 'changed' } },
    });
    expect(responded.body).toMatchObject({ type: 'success', id: 2, result: {}, meta: { thread_id: threadId } });
    const second = await readEvents(server.url, threadId, { channels: ['lifecycle', 'values', 'input'] }, rootEnds(2));
    expect(second.events.find((e) => e.method === 'input.answered')!.params.data).toEqual({ interrupt_ids: [interruptId] });
    expect(second.events.filter((e) => e.method === 'values').at(-1)!.params.data).toEqual({ question: 'changed', answer: 'a', result: 'done: a' });
    const state = await command(server.url, threadId, { id: 3, method: 'state.get', params: { namespace: [], keys: ['result'] } });
    expect(state.body.result).toMatchObject({ values: { result: 'done: a' }, checkpoint: { id: expect.any(String) } });
    const listed = await command(server.url, threadId, { id: 4, method: 'state.listCheckpoints', params: { limit: 2 } });
    expect(listed.body.result.checkpoints).toHaveLength(2);
    expect(listed.body.result.checkpoints[0]).toMatchObject({ id: state.body.result.checkpoint.id, step: expect.any(Number) });
    const tree = await command(server.url, threadId, { id: 5, method: 'agent.getTree', params: {} });
    expect(tree.body.result.tree).toEqual({ namespace: [], status: 'completed', graph_name: 'interrupt' });
  }, 30_000);

  it('forks from a checkpoint with state.fork, injects a message, and refuses another assistant on a bound thread', async () => {
    const threadId = randomUUID();
    await command(server.url, threadId, {
      id: 1,
      method: 'run.start',
      params: { assistant_id: 'chat', input: { messages: [{ role: 'user', content: 'one' }] } },
    });
    await readEvents(server.url, threadId, { channels: ['lifecycle'] }, rootEnds(1));
    const [, first] = (await command(server.url, threadId, { id: 2, method: 'state.listCheckpoints', params: {} })).body.result.checkpoints.reverse();
    const forked = await command(server.url, threadId, {
      id: 3,
      method: 'state.fork',
      params: { checkpoint_id: first.id, input: { messages: [{ role: 'user', content: 'two' }] } },
    });
    expect(forked.body.result).toEqual({ run_id: expect.any(String), thread_id: threadId });
    await readEvents(server.url, threadId, { channels: ['lifecycle'] }, rootEnds(2));
    const state = (await command(server.url, threadId, { id: 4, method: 'state.get', params: {} })).body.result.values;
    // Forked from the checkpoint with the first human message only.
    expect(state.messages.map(text)).toEqual(['one', 'two', 'reply: two']);
    // input.inject adds a message to the thread's state, which the next run sees.
    const injected = await command(server.url, threadId, {
      id: 6,
      method: 'input.inject',
      params: { namespace: [], message: { role: 'user', content: 'injected' } },
    });
    expect(injected.body).toMatchObject({ type: 'success', id: 6, result: {} });
    const after = (await command(server.url, threadId, { id: 7, method: 'state.get', params: { keys: ['messages'] } })).body.result.values;
    expect(after.messages.map(text)).toEqual(['one', 'two', 'reply: two', 'injected']);
    const other = await command(server.url, threadId, { id: 5, method: 'run.start', params: { assistant_id: 'interrupt', input: {} } });
    expect(other.body).toMatchObject({ type: 'error', id: 5, error: 'invalid_argument', message: expect.stringContaining('bound to assistant') });
  }, 30_000);

  it('streams a tool call on the tools channel, correlated by its tool_call_id', async () => {
    const threadId = randomUUID();
    await command(server.url, threadId, {
      id: 1,
      method: 'run.start',
      params: { assistant_id: 'chat', input: { messages: [{ role: 'user', content: 'tool' }] } },
    });
    const { events } = await readEvents(server.url, threadId, { channels: ['tools', 'lifecycle'] }, rootEnds(1));
    const tools = events.filter((e) => e.method === 'tools').map((e) => e.params.data);
    expect(tools.map((t) => t.event)).toEqual(['tool-started', 'tool-finished']);
    expect(tools[0]).toMatchObject({ tool_call_id: 'call_1', tool_name: 'lookup', input: '{"q":"tool"}' }); // as LangGraph's v3 stream (and the JS server) send it
    expect(tools[1]).toMatchObject({ tool_call_id: 'call_1' });
    expect(JSON.stringify(tools[1].output)).toContain('looked up tool');
    const values = await readEvents(server.url, threadId, { channels: ['values'] }, (e) => e.length === 4);
    expect(values.events.at(-1)!.params.data.messages.map((m: any) => m.type)).toEqual(['human', 'ai', 'tool', 'ai']);
  });

  it('publishes nothing to the thread stream for classic runs', async () => {
    const client = new Client({ apiUrl: server.url });
    const { thread_id: threadId } = await client.threads.create();
    await client.runs.wait(threadId, 'chat', { input: { messages: [{ role: 'user', content: 'classic' }] } });
    await command(server.url, threadId, {
      id: 1,
      method: 'run.start',
      params: { assistant_id: 'chat', input: { messages: [{ role: 'user', content: 'v2' }] } },
    });
    const { events } = await readEvents(server.url, threadId, { channels: ['lifecycle'] }, rootEnds(1));
    expect(events[0]).toMatchObject({ seq: 1, params: { data: { event: 'running' } } });
  });

  it('forgets the events of a deleted thread: a thread created again under its id replays nothing of it', async () => {
    const client = new Client({ apiUrl: server.url });
    const threadId = randomUUID();
    await command(server.url, threadId, {
      id: 1,
      method: 'run.start',
      params: { assistant_id: 'chat', input: { messages: [{ role: 'user', content: 'old secret' }] } },
    });
    await readEvents(server.url, threadId, { channels: ['lifecycle'] }, rootEnds(1));
    await client.threads.delete(threadId);
    await command(server.url, threadId, {
      id: 2,
      method: 'run.start',
      params: { assistant_id: 'chat', input: { messages: [{ role: 'user', content: 'new' }] } },
    });
    const { events } = await readEvents(server.url, threadId, { channels: ['lifecycle', 'values'] }, rootEnds(1));
    expect(JSON.stringify(events)).not.toContain('old secret');
    expect(events[0]!.seq).toBe(1);
  });

  it('streams a subgraph: its lifecycle under its namespace, its interrupt, and the agent tree', async () => {
    const threadId = randomUUID();
    await command(server.url, threadId, { id: 1, method: 'run.start', params: { assistant_id: 'nested_interrupt', input: { step: 'start' } } });
    const { events } = await readEvents(server.url, threadId, { channels: ['lifecycle', 'input', 'updates'] }, rootEnds(1));
    const child = events.find((e) => e.method === 'lifecycle' && e.params.namespace.length === 1 && e.params.data.event === 'started')!;
    expect(child.params.namespace[0]).toMatch(/^child:/);
    expect(child.params.data.graph_name).toBe('child');
    expect(events.filter((e) => e.method === 'input.requested').map((e) => e.params.data.payload)).toEqual(['child asks']);
    expect(events.at(-1)!.params.data).toEqual({ event: 'interrupted', graph_name: 'nested_interrupt' });
    // Only the subgraph's events, by namespace and depth.
    const nested = await readEvents(server.url, threadId, { channels: ['lifecycle', 'updates'], namespaces: [['child']], depth: 1 }, (e) => e.length >= 2);
    expect(nested.events.length).toBeGreaterThan(0);
    expect(nested.events.every((e) => e.params.namespace[0]!.startsWith('child:'))).toBe(true);
    const tree = await command(server.url, threadId, { id: 2, method: 'agent.getTree', params: {} });
    expect(tree.body.result.tree).toMatchObject({
      namespace: [],
      status: 'interrupted',
      graph_name: 'nested_interrupt',
      children: [{ status: 'interrupted', graph_name: 'child' }],
    });
  });

  it('answers bad commands with error envelopes, never a server error', async () => {
    const threadId = randomUUID();
    const cases: [unknown, string][] = [
      [{ method: 'run.start' }, 'invalid_argument'],
      [{ id: 1 }, 'invalid_argument'],
      [{ id: 2, method: 'run.explode' }, 'unknown_command'],
      [{ id: 3, method: 'run.start', params: {} }, 'invalid_argument'],
      [{ id: 4, method: 'run.start', params: { assistant_id: 'nope' } }, 'invalid_argument'],
      [{ id: 5, method: 'run.start', params: { assistant_id: 'chat', multitaskStrategy: 'sideways' } }, 'invalid_argument'],
      [{ id: 6, method: 'input.respond', params: { interrupt_id: 'x', response: 1 } }, 'no_such_run'],
      [{ id: 7, method: 'state.get', params: {} }, 'no_such_run'],
      [{ id: 8, method: 'state.fork', params: {} }, 'invalid_argument'],
      [{ id: 9, method: 'subscription.subscribe', params: { channels: ['values'] } }, 'not_supported'],
      [{ id: 10, method: 'input.inject', params: { message: { role: 'robot', content: 'x' } } }, 'invalid_argument'],
    ];
    for (const [body, code] of cases) {
      const res = await command(server.url, threadId, body);
      expect({ body, status: res.status, type: res.body.type, error: res.body.error }).toEqual({ body, status: 200, type: 'error', error: code });
    }
    const stream = await fetch(`${server.url}/threads/${threadId}/stream/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ channels: ['bogus'] }),
    });
    expect(stream.status).toBe(422);
  });
});

describe('the SDK thread stream over WebSocket', () => {
  it('stops at an interrupt and answers it on one socket, one subscription seeing both runs', () => interruptAndRespond('websocket'), 30_000);

  it('restores subscriptions with subscription.reconnect on a new socket, with the events missed', async () => {
    const threadId = randomUUID();
    const open = async () => {
      const ws = new WebSocket(`${server.url.replace('http', 'ws')}/threads/${threadId}/stream/events`);
      const messages: any[] = [];
      ws.on('message', (data) => messages.push(JSON.parse(String(data))));
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
      return { ws, messages };
    };
    const received = (messages: any[], ok: (m: any[]) => boolean) => until("the socket's messages", () => ok(messages) && messages, 10_000, 20);
    const first = await open();
    first.ws.send(JSON.stringify({ id: 1, method: 'subscription.subscribe', params: { channels: ['lifecycle'], namespaces: [[]], depth: 0 } }));
    const [subscribed] = await received(first.messages, (m) => m.length > 0);
    const subscriptionId = subscribed.result.subscription_id as string;
    first.ws.send(JSON.stringify({ id: 2, method: 'run.start', params: { assistant_id: 'chat', input: { messages: [{ role: 'user', content: 'a' }] } } }));
    await received(first.messages, (m) => m.filter((x) => x.type === 'event').length >= 2);
    const seen = first.messages.filter((x) => x.type === 'event');
    first.ws.close();
    // Meanwhile, a second run.
    await command(server.url, threadId, {
      id: 3,
      method: 'run.start',
      params: { assistant_id: 'chat', input: { messages: [{ role: 'user', content: 'b' }] } },
    });
    await readEvents(server.url, threadId, { channels: ['lifecycle'] }, rootEnds(2));

    const second = await open();
    second.ws.send(
      JSON.stringify({ id: 4, method: 'subscription.reconnect', params: { last_event_id: seen.at(-1).event_id, subscriptions: [subscriptionId] } }),
    );
    const messages = await received(second.messages, (m) => m.filter((x) => x.type === 'event').length >= 2);
    second.ws.close();
    expect(messages[0]).toMatchObject({ type: 'success', id: 4, result: { restored: true } });
    const missed = messages.filter((x) => x.type === 'event');
    expect(missed.map((e) => e.params.data.event)).toEqual(['running', 'completed']);
    expect(missed[0].seq).toBeGreaterThan(seen.at(-1).seq);
  }, 30_000);

  it('refuses a 65th subscription on one socket', async () => {
    const ws = new WebSocket(`${server.url.replace('http', 'ws')}/threads/${randomUUID()}/stream/events`);
    const answers: any[] = [];
    ws.on('message', (data) => answers.push(JSON.parse(String(data))));
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    for (let id = 1; id <= 65; id++) ws.send(JSON.stringify({ id, method: 'subscription.subscribe', params: { channels: ['values'] } }));
    await until('the 65 answers', () => (answers.length >= 65 ? true : undefined), 10_000);
    ws.close();
    expect(answers.filter((a) => a.type === 'success')).toHaveLength(64);
    expect(answers.at(-1)).toMatchObject({ type: 'error', id: 65, error: 'invalid_argument' });
  });
});

describe('replay after since from another process', () => {
  for (const backend of ['postgres', 'redis'] as const) {
    it(`serves the same events with the same seq and event_id (${backend})`, async () => {
      const local = backend === 'redis' ? await createTestDatabase('agent_protocol_v2_redis') : db;
      const config = { configPath: project, ...(backend === 'redis' ? { redisUrl: testRedisUrl() } : {}) };
      const mine = backend === 'redis' ? await startTestServer(local.url, config) : server;
      const other = await spawnAgentServer(local.url, { workers: 0, configPath: project, config: backend === 'redis' ? { redisUrl: testRedisUrl() } : {} });
      try {
        const threadId = randomUUID();
        await command(mine.url, threadId, {
          id: 1,
          method: 'run.start',
          params: { assistant_id: 'chat', input: { messages: [{ role: 'user', content: 'replay me' }] } },
        });
        const all = await readEvents(mine.url, threadId, { channels: ['lifecycle', 'messages', 'values'] }, rootEnds(1));
        const cut = all.events[3]!.seq;
        const replayed = await readEvents(other.url, threadId, { channels: ['lifecycle', 'messages', 'values'], since: cut }, rootEnds(1));
        expect(replayed.events.map((e) => [e.seq, e.event_id])).toEqual(all.events.filter((e) => e.seq > cut).map((e) => [e.seq, e.event_id]));
        // A run started through the other process (API only) is streamed here.
        await command(other.url, threadId, {
          id: 2,
          method: 'run.start',
          params: { assistant_id: 'chat', input: { messages: [{ role: 'user', content: 'again' }] } },
        });
        const both = await readEvents(mine.url, threadId, { channels: ['lifecycle'], since: all.events.at(-1)!.seq }, rootEnds(1));
        expect(both.events.filter((e) => !e.params.namespace.length).map((e) => e.params.data.event)).toEqual(['running', 'completed']);

        // An hour after its last event the broker forgets the thread's stream (as deleting it does
        // here): the numbering goes on from the last seq, for a client waiting with `since` and for
        // one replaying everything the broker still has.
        const last = both.events.at(-1)!.seq;
        const broker = createEventBroker(
          backend === 'redis'
            ? { kind: 'redis', url: testRedisUrl(), prefix: redisKeyPrefix('agent') }
            : { kind: 'postgres', connectionString: local.url, schema: 'agent_events' },
        );
        await broker.delete(threadStreamKey(threadId));
        await broker.close();
        const waiting = readEvents(mine.url, threadId, { channels: ['lifecycle'], since: last }, rootEnds(1));
        await command(other.url, threadId, {
          id: 3,
          method: 'run.start',
          params: { assistant_id: 'chat', input: { messages: [{ role: 'user', content: 'an hour later' }] } },
        });
        const later = await waiting;
        expect(later.events[0]).toMatchObject({ seq: last + 1, params: { data: { event: 'running' } } });
        const retained = await readEvents(other.url, threadId, { channels: ['lifecycle'], since: 0 }, rootEnds(1));
        expect(retained.events.map((e) => [e.seq, e.event_id])).toEqual(later.events.map((e) => [e.seq, e.event_id]));
      } finally {
        await other.stop();
        if (backend === 'redis') {
          await mine.close();
          await local.drop();
        }
      }
    }, 60_000);
  }
});

describe('custom auth on every command', () => {
  let authServer: RunningAgentServer;
  beforeAll(async () => {
    authServer = await startTestServer(db.url, { configPath: authProject, schema: 'agent_protocol_auth' });
  }, 60_000);
  afterAll(async () => {
    await authServer?.close();
  });

  it("keeps another user out of a thread's commands, stream and socket", async () => {
    const a = { authorization: 'Bearer user-a' };
    const b = { authorization: 'Bearer user-b' };
    const threadId = randomUUID();
    const started = await command(
      authServer.url,
      threadId,
      { id: 1, method: 'run.start', params: { assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'secret' }] } } },
      a,
    );
    expect(started.body.type).toBe('success');
    const mine = await readEvents(authServer.url, threadId, { channels: ['lifecycle', 'values'] }, rootEnds(1), a);
    expect(mine.events.at(-1)!.params.data.event).toBe('completed');

    expect((await command(authServer.url, threadId, { id: 1, method: 'state.get', params: {} })).status).toBe(401);
    for (const [method, params] of [
      ['state.get', {}],
      ['state.listCheckpoints', {}],
      ['agent.getTree', {}],
      ['run.start', { assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'mine now' }] } }],
      ['input.respond', { interrupt_id: 'x', response: 1 }],
      ['state.fork', { checkpoint_id: 'x' }],
      ['input.inject', { message: { role: 'user', content: 'x' } }],
    ] as const) {
      const res = await command(authServer.url, threadId, { id: 7, method, params }, b);
      expect({ method, status: res.status, type: res.body.type, error: res.body.error }).toEqual({ method, status: 200, type: 'error', error: 'no_such_run' });
    }
    expect((await readEvents(authServer.url, threadId, { channels: ['values'] }, () => true, b)).status).toBe(404);
    const ws = new WebSocket(`${authServer.url.replace('http', 'ws')}/threads/${threadId}/stream/events`, { headers: b });
    const code = await new Promise<number>((resolve) => ws.once('close', (c) => resolve(c)));
    expect(code).toBe(4404);
    const anonymous = new WebSocket(`${authServer.url.replace('http', 'ws')}/threads/${threadId}/stream/events`);
    expect(await new Promise<number>((resolve) => anonymous.once('close', (c) => resolve(c)))).toBe(4401);
    // Nothing of user-b's reached the thread.
    const state = (await command(authServer.url, threadId, { id: 8, method: 'state.get', params: {} }, a)).body.result.values;
    expect(state.messages.map(text)).toEqual(['secret', 'echo: secret']);
  }, 60_000);

  it('gives a stream opened before the thread exists nothing of a thread another user creates', async () => {
    const threadId = randomUUID();
    // The stream is open (its thread does not exist yet) before user-a creates the thread; it
    // replays the thread's events from the start, so it sees the run's however late it subscribes.
    let open!: (status: number) => void;
    const answered = new Promise<number>((resolve) => (open = resolve));
    const watching = readEvents(authServer.url, threadId, { channels: ['values', 'lifecycle'] }, () => false, { authorization: 'Bearer user-b' }, open);
    expect(await answered).toBe(200);
    await command(
      authServer.url,
      threadId,
      { id: 1, method: 'run.start', params: { assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'private' }] } } },
      { authorization: 'Bearer user-a' },
    );
    // Closed by the server at the thread's first event, which user-b may not read.
    expect(await watching).toEqual({ status: 200, events: [], timedOut: false });
  }, 30_000);
});
