/**
 * What a run that stops at an interrupt streams, event by event, compared with the LangGraph dev
 * server (`@langchain/langgraph-cli dev` 1.5.1 on the same graphs, bench/agent-server): the
 * `{"__interrupt__": [...]}` chunk comes once per stream mode (`updates`, then `values`), with no
 * `values` event after it; with the `events` mode only callback events, never LangGraph's own
 * plumbing. Through the official SDK, against real Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client, type StreamMode } from '@langchain/langgraph-sdk';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './index.js';
import { human, startTestServer } from './__tests__/fixtures.js';

let db: TestDatabase;
let server: RunningAgentServer;
let client: Client;

beforeAll(async () => {
  db = await createTestDatabase('agentint');
  // A long lease: on a loaded machine a run whose lease lapses is re-executed, which would stream it twice.
  server = await startTestServer(db.url, { leaseMs: 30_000 });
  client = new Client({ apiUrl: server.url });
}, 60_000);
afterAll(async () => {
  await server?.close();
  await db?.drop();
});

type Event = [name: string, data: unknown];
type StreamOptions = NonNullable<Parameters<Client['runs']['stream']>[2]>;

/** The events of one run. */
async function stream(threadId: string | null, assistant: string, options: StreamOptions): Promise<Event[]> {
  const events: Event[] = [];
  const chunks = threadId === null ? client.runs.stream(null, assistant, options) : client.runs.stream(threadId, assistant, options);
  for await (const { event, data } of chunks) events.push([event, data]);
  return events;
}

const metadata: Event = ['metadata', { run_id: expect.any(String), attempt: 1 }];
const question = { question: 'q?' };
/** The interrupt of the `interrupt` graph's `ask` node. */
const asked = { __interrupt__: [{ id: expect.any(String), value: question }] };
/** What interrupt_before / interrupt_after stream: an interrupt without a value. */
const paused = { __interrupt__: [] };

describe('a run stopping at interrupt()', () => {
  it.each<[string, StreamMode[], Event[]]>([
    ['values', ['values'], [metadata, ['values', question], ['values', asked]]],
    ['updates', ['updates'], [metadata, ['updates', asked]]],
    ['values and updates', ['values', 'updates'], [metadata, ['values', question], ['updates', asked], ['values', asked]]],
    // Legacy messages read values internally: none leak, and no values event is added for the interrupt.
    ['messages', ['messages'], [metadata]],
    ['values and messages', ['values', 'messages'], [metadata, ['values', question], ['values', asked]]],
    ['messages-tuple and custom', ['messages-tuple', 'custom'], [metadata]],
  ])('streams the __interrupt__ chunk once per mode: %s', async (_name, streamMode, expected) => {
    const thread = await client.threads.create();
    expect(await stream(thread.thread_id, 'interrupt', { input: question, streamMode })).toEqual(expected);
    expect((await client.threads.get(thread.thread_id)).status).toBe('interrupted');
  });

  it('answers /wait and /join with the __interrupt__ chunk, as the LangGraph API does', async () => {
    const thread = await client.threads.create();
    expect(await client.runs.wait(thread.thread_id, 'interrupt', { input: question })).toEqual(asked);
    const resumed = await client.runs.create(thread.thread_id, 'interrupt', { command: { resume: 'yes' }, interruptBefore: ['finish'] });
    expect(await client.runs.join(thread.thread_id, resumed.run_id)).toEqual(paused);
  });

  it('then streams the resumed run, an interrupt_before pause, and the rest', async () => {
    const thread = await client.threads.create();
    const streamMode: StreamMode[] = ['values', 'updates'];
    await stream(thread.thread_id, 'interrupt', { input: question, streamMode });
    expect(await stream(thread.thread_id, 'interrupt', { command: { resume: 'yes' }, interruptBefore: ['finish'], streamMode })).toEqual([
      metadata,
      ['values', question],
      ['updates', { ask: { answer: 'yes' } }],
      ['values', { ...question, answer: 'yes' }],
      ['updates', paused],
      ['values', paused],
    ]);
    expect(await stream(thread.thread_id, 'interrupt', { input: null, streamMode })).toEqual([
      metadata,
      ['values', { ...question, answer: 'yes' }],
      ['updates', { finish: { result: 'done: yes' } }],
      ['values', { ...question, answer: 'yes', result: 'done: yes' }],
    ]);
  });

  it('inside a subgraph: the root streams the interrupt once; with stream_subgraphs the subgraph does too', async () => {
    const childAsks = { __interrupt__: [{ id: expect.any(String), value: 'child asks' }] };
    expect(await stream(null, 'nested_interrupt', { input: { step: 'start' }, streamMode: ['values'] })).toEqual([
      metadata,
      ['values', { step: 'start' }],
      ['values', { step: 'before' }],
      ['values', childAsks],
    ]);
    const events = await stream(null, 'nested_interrupt', { input: { step: 'start' }, streamMode: ['values', 'updates'], streamSubgraphs: true });
    const child = events.find(([name]) => name.startsWith('values|'))?.[0].slice('values|'.length);
    expect(child).toMatch(/^child:[0-9a-f-]{36}$/);
    expect(events).toEqual([
      metadata,
      ['values', { step: 'start' }],
      ['updates', { before: { step: 'before' } }],
      ['values', { step: 'before' }],
      [`values|${child}`, { step: 'before' }],
      [`updates|${child}`, childAsks],
      [`values|${child}`, childAsks],
      ['updates', childAsks],
      ['values', childAsks],
    ]);
  });
});

describe('a run stopping at interrupt_before / interrupt_after', () => {
  it('streams values up to the pause, then the empty __interrupt__ chunk once', async () => {
    const thread = await client.threads.create();
    expect(
      await stream(thread.thread_id, 'builder', { input: human('hi'), interruptBefore: ['reply'], streamMode: ['values', 'messages-tuple', 'updates'] }),
    ).toEqual([
      metadata,
      ['values', { messages: [expect.objectContaining({ type: 'human', content: 'hi' })], turns: 0 }],
      ['updates', paused],
      ['values', paused],
    ]);
    const after = await client.threads.create();
    const events = await stream(after.thread_id, 'builder', { input: human('hi'), interruptAfter: ['reply'], streamMode: ['values'] });
    expect(events).toEqual([
      metadata,
      ['values', { messages: [expect.objectContaining({ type: 'human' })], turns: 0 }],
      ['values', { messages: [expect.objectContaining({ type: 'human' }), expect.objectContaining({ type: 'ai', content: 'turn 1' })], turns: 1 }],
      ['values', paused],
    ]);
  });
});

describe('the events mode on an interrupt', () => {
  it("passes callback events only: not the root run's stream chunks nor LangGraph's hidden runs", async () => {
    const thread = await client.threads.create();
    const events = await stream(thread.thread_id, 'interrupt', { input: question, streamMode: ['values', 'events'] });
    expect(events.filter(([name]) => name !== 'events')).toEqual([metadata, ['values', question], ['values', asked]]);
    const records = events.filter(([name]) => name === 'events').map(([, data]) => data as { event: string; name: string; tags: string[] });
    // The graph's start and end, and the `ask` node's start (it ends in the interrupt).
    expect(records.map((r) => `${r.event} ${r.name}`)).toEqual(['on_chain_start LangGraph', 'on_chain_start ask', 'on_chain_end LangGraph']);
    expect(records.some((r) => r.tags.includes('langsmith:hidden'))).toBe(false);
  });
});
