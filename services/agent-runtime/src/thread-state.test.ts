/**
 * Thread state beyond the root graph, through the official SDK against real Postgres and a
 * spawned agent server: subgraph schemas, a subgraph's state read and updated by its checkpoint
 * namespace, threads built from supersteps of updates, factory graphs rebuilt with the thread's
 * config for a state update, and history filtered by a run's metadata (also on a copy).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { Client } from '@langchain/langgraph-sdk';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { human, spawnAgentServer } from './__tests__/fixtures.js';

let db: TestDatabase;
let child: ChildProcess;
let client: Client;

beforeAll(async () => {
  db = await createTestDatabase('agentthreads');
  const spawned = await spawnAgentServer(db.url);
  child = spawned.child;
  client = new Client({ apiUrl: spawned.url });
}, 60_000);
afterAll(async () => {
  child?.kill();
  await db?.drop();
});

/** The SDK's error for a request, as a string ("HTTP 422: {...}"). */
async function failure(request: Promise<unknown>): Promise<string> {
  return request.then(
    () => 'succeeded',
    (error: unknown) => String(error),
  );
}

describe('GET /assistants/{id}/subgraphs', () => {
  it("lists the graph's subgraphs by namespace with their state schemas; recurse reaches nested ones", async () => {
    const direct = await client.assistants.getSubgraphs('trip');
    expect(Object.keys(direct)).toEqual(['booking']);
    const all = await client.assistants.getSubgraphs('trip', { recurse: true });
    expect(Object.keys(all)).toEqual(['booking', 'booking|book']);
    expect(all['booking']).toMatchObject({ state_schema: { type: 'object', properties: { log: {}, city: {} } } });
    // Under the LangGraph.js server's short names too (its clients read `state`).
    expect(all['booking|book']).toMatchObject({ state: { type: 'object', properties: { log: {}, city: {}, amount: {} } } });
    expect(Object.keys(all['booking']!.state_schema!.properties!)).not.toContain('amount');
  });

  it('takes a namespace, also through a custom assistant; a graph without subgraphs has none', async () => {
    expect(Object.keys(await client.assistants.getSubgraphs('trip', { namespace: 'booking|book', recurse: true }))).toEqual(['booking|book']);
    const assistant = await client.assistants.create({ graphId: 'subgraph' });
    expect(Object.keys(await client.assistants.getSubgraphs(assistant.assistant_id))).toEqual(['child']);
    expect(await client.assistants.getSubgraphs('echo')).toEqual({});
    expect(await failure(client.assistants.getSubgraphs('00000000-0000-4000-8000-000000000000'))).toContain('HTTP 404');
  });
});

describe('a subgraph stopped before a node', () => {
  it("has its own state updated through the task's checkpoint; the run continues with it", async () => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, 'trip', { input: {} });
    const state = await client.threads.getState(thread.thread_id);
    expect(state.next).toEqual(['booking']);
    const checkpoint = state.tasks[0]!.checkpoint!;
    expect(checkpoint.checkpoint_ns).toMatch(/^booking:/);

    // `city` is the subgraph's channel only.
    // The SDK types the answer as a config; the servers answer `{checkpoint}`.
    const updated = (await client.threads.updateState(thread.thread_id, { values: { city: 'Rome' }, checkpoint })) as unknown as {
      checkpoint: { checkpoint_ns: string };
    };
    expect(updated.checkpoint.checkpoint_ns).toBe(checkpoint.checkpoint_ns);
    const inner = await client.threads.getState<{ city: string; log: string[] }>(thread.thread_id, checkpoint);
    expect(inner.values.city).toBe('Rome');
    expect(inner.next).toEqual(['book']);
    expect(inner.checkpoint.checkpoint_ns).toBe(checkpoint.checkpoint_ns);

    const result = (await client.runs.wait(thread.thread_id, 'trip', { input: null })) as { log: string[] };
    expect(result.log).toEqual(['planned', 'booked Rome', 'charged for Rome', 'confirmed after 3 entries']);

    const innerHistory = await client.threads.getHistory(thread.thread_id, { checkpoint, limit: 50 });
    expect(innerHistory.length).toBeGreaterThan(2);
    expect(innerHistory.every((s) => s.checkpoint.checkpoint_ns === checkpoint.checkpoint_ns)).toBe(true);
    expect((innerHistory[0]!.values as { city: string }).city).toBe('Rome');
  });

  it('refuses keys the subgraph has no channel for, and namespaces the graph does not have (422)', async () => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, 'trip', { input: {} });
    const checkpoint = (await client.threads.getState(thread.thread_id)).tasks[0]!.checkpoint!;
    const unknownKey = await failure(client.threads.updateState(thread.thread_id, { values: { amount: 3 }, checkpoint }));
    expect(unknownKey).toContain('HTTP 422');
    expect(unknownKey).toContain('no channel \\"amount\\" (channels: log, city)');
    const nowhere = { ...checkpoint, checkpoint_ns: 'nowhere:1' };
    const unknownNs = await failure(client.threads.updateState(thread.thread_id, { values: { city: 'x' }, checkpoint: nowhere }));
    expect(unknownNs).toContain('HTTP 422');
    expect(unknownNs).toContain('no subgraph at \\"nowhere\\"');
    expect(await failure(client.threads.getState(thread.thread_id, nowhere))).toContain('HTTP 422');
  });
});

describe('POST /threads with supersteps', () => {
  it("rebuilds a thread from another's history: same values and next at every checkpoint", async () => {
    const original = await client.threads.create();
    const chunks = [];
    for await (const chunk of client.runs.stream(original.thread_id, 'named_node_factory', { input: { visited: ['start'] }, streamMode: ['updates'] })) {
      chunks.push(chunk);
    }
    const history = await client.threads.getHistory(original.thread_id);
    const input = history.at(-2)!.values;
    const clone = await client.threads.create({
      graphId: 'named_node_factory',
      supersteps: [
        { updates: [{ asNode: '__input__', values: input }] },
        { updates: [{ asNode: '__start__', values: input }] },
        ...chunks
          .filter((c) => c.event === 'updates')
          .map(({ data }) => ({ updates: Object.entries(data as Record<string, unknown>).map(([asNode, values]) => ({ asNode, values })) })),
      ],
    });
    expect(clone.values).toEqual({ visited: ['start', 'default'] });
    const rebuilt = await client.threads.getHistory(clone.thread_id);
    expect(rebuilt.map(({ next, values }) => ({ next, values }))).toEqual(history.map(({ next, values }) => ({ next, values })));
  });

  it('refuses supersteps without a graph, or that do not fit it, and makes no thread then', async () => {
    const threadId = '6a1f0c52-4a7e-4d7e-9d53-0b7f6c7f0d11';
    const noGraph = await failure(client.threads.create({ threadId, supersteps: [{ updates: [{ asNode: '__input__', values: {} }] }] }));
    expect(noGraph).toContain('HTTP 422');
    expect(noGraph).toContain('metadata.graph_id');
    const badNode = await failure(
      client.threads.create({ threadId, graphId: 'named_node_factory', supersteps: [{ updates: [{ asNode: 'nope', values: { visited: ['x'] } }] }] }),
    );
    expect(badNode).toContain('HTTP 422');
    expect(badNode).toContain('"loc":["body","supersteps",0,"updates",0,"as_node"]');
    expect(await failure(client.threads.get(threadId))).toContain('HTTP 404');
  });
});

describe('a factory graph', () => {
  it("is rebuilt with the thread's config (its assistant's and its run's) for a state update", async () => {
    const assistant = await client.assistants.create({ graphId: 'named_node_factory', config: { configurable: { node_name: 'custom' } } });
    const thread = await client.threads.create();
    const values = await client.runs.wait(thread.thread_id, assistant.assistant_id, { input: { visited: ['in'] } });
    expect(values).toEqual({ visited: ['in', 'custom'] });
    await client.threads.updateState(thread.thread_id, { values: { visited: ['update'] }, asNode: 'custom' });
    const state = await client.threads.getState(thread.thread_id);
    expect(state.values).toEqual({ visited: ['in', 'custom', 'update'] });
    expect(state.next).toEqual([]);

    // A run's own configurable wins over its assistant's, and the latest run's counts.
    await client.runs.wait(thread.thread_id, assistant.assistant_id, { input: { visited: [] }, config: { configurable: { node_name: 'other' } } });
    await client.threads.updateState(thread.thread_id, { values: { visited: ['again'] }, asNode: 'other' });
    expect((await client.threads.getState(thread.thread_id)).values).toEqual({ visited: ['in', 'custom', 'update', 'other', 'again'] });
  });
});

describe('history filtered by metadata', () => {
  it('finds the checkpoints of the run with that metadata, on the thread and on a copy', async () => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, 'echo', { input: human('one') });
    const first = (await client.threads.getHistory(thread.thread_id, { limit: 100 })).length;
    const run = await client.runs.create(thread.thread_id, 'echo', { input: human('two'), metadata: { batch: 'second' } });
    await client.runs.join(thread.thread_id, run.run_id);
    const all = await client.threads.getHistory(thread.thread_id, { limit: 100 });
    const second = await client.threads.getHistory(thread.thread_id, { limit: 100, metadata: { batch: 'second' } });
    expect(second.length).toBe(all.length - first);
    expect(second.length).toBeGreaterThan(0);
    expect(second.every((s) => s.metadata?.['batch'] === 'second' && s.metadata?.['run_id'] === run.run_id)).toBe(true);

    const copy = await client.threads.copy(thread.thread_id);
    const onCopy = await client.threads.getHistory(copy.thread_id, { limit: 100, metadata: { batch: 'second' } });
    expect(onCopy.map((s) => s.values)).toEqual(second.map((s) => s.values));
  });
});
