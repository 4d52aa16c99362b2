/**
 * What a client reads off a run's event stream, as the LangGraph API sends it (issue 14): every
 * SSE event carries its `id` (the event's sequence number in the run, "0" the metadata event),
 * which a client sends back as Last-Event-ID to resume; debug `checkpoint` events name their
 * checkpoint and parent as the thread's history does. Also the 404 texts clients match on, and
 * the state of an interrupted subgraph as thread state nests it.
 * Through the official SDK, against an agent server in its own process on real Postgres.
 */
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client } from '@langchain/langgraph-sdk';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { human, spawnAgentServer } from './__tests__/fixtures.js';

let db: TestDatabase;
let child: ChildProcess;
let client: Client;

beforeAll(async () => {
  db = await createTestDatabase('agent_stream_events');
  // A long lease: on a loaded machine a run whose lease lapses is re-executed, which would stream it twice.
  const server = await spawnAgentServer(db.url, { workers: 1, config: { leaseMs: 30_000 } });
  child = server.child;
  client = new Client({ apiUrl: server.url });
}, 60_000);
afterAll(async () => {
  child?.kill('SIGTERM');
  await db?.drop();
});

type Chunk = { event: string; data: unknown; id?: string };
type StreamOptions = NonNullable<Parameters<Client['runs']['stream']>[2]>;

async function gather(threadId: string, assistant: string, options: StreamOptions): Promise<Chunk[]> {
  const chunks: Chunk[] = [];
  for await (const chunk of client.runs.stream(threadId, assistant, options)) chunks.push(chunk as Chunk);
  return chunks;
}

describe('SSE event ids', () => {
  it('numbers every event of a run from "0", and Last-Event-ID resumes after any of them', async () => {
    const thread = await client.threads.create();
    // The `subgraph` graph stopped before its subgraph node: input, `prepare`, the pause.
    const chunks = await gather(thread.thread_id, 'subgraph', { input: { steps: ['start'] }, interruptBefore: ['child'] });
    expect(chunks.map(({ event, id, data }) => [event, id, data])).toEqual([
      ['metadata', '0', { run_id: expect.any(String), attempt: 1 }],
      ['values', '1', { steps: ['start'] }],
      ['values', '2', { steps: ['start', 'prepare'] }],
      ['values', '3', { __interrupt__: [] }],
    ]);

    // A client that lost the connection after event "1" gets the rest, ids included (no stream_resumable needed).
    const runId = (chunks[0]!.data as { run_id: string }).run_id;
    const rest: Chunk[] = [];
    for await (const chunk of client.runs.joinStream(thread.thread_id, runId, { lastEventId: '1' })) rest.push(chunk as Chunk);
    expect(rest).toEqual(chunks.slice(2));

    // The next run on the thread numbers its own events from "0" again.
    const next = await gather(thread.thread_id, 'subgraph', { input: null, streamMode: ['values', 'updates'], streamSubgraphs: true });
    expect(next.map((c) => c.id)).toEqual(next.map((_, i) => String(i)));
    expect(next.at(-1)).toMatchObject({ event: 'values', data: { steps: ['start', 'prepare', 'summary of 2 inner steps'] } });
  });
});

type CheckpointPayload = {
  metadata?: { step?: number };
  checkpoint: unknown;
  parent_checkpoint: unknown;
  config: { configurable: Record<string, unknown> };
  parent_config?: unknown;
};

/** The payloads of the debug `checkpoint` events of a stream. */
function checkpointPayloads(chunks: Chunk[]): CheckpointPayload[] {
  return chunks
    .filter((c) => c.event === 'debug' && (c.data as { type: string }).type === 'checkpoint')
    .map((c) => (c.data as { payload: CheckpointPayload }).payload);
}

const shape = (p: { metadata?: unknown; checkpoint: unknown; parent_checkpoint: unknown }) => ({
  step: (p.metadata as { step?: number } | null)?.step,
  checkpoint: p.checkpoint,
  parent_checkpoint: p.parent_checkpoint,
});

describe('debug checkpoint events', () => {
  it('name the checkpoint and its parent exactly as the thread history does', async () => {
    const thread = await client.threads.create();
    const streamed = checkpointPayloads(await gather(thread.thread_id, 'echo', { input: human('hi'), streamMode: 'debug' }));
    expect(streamed.length).toBeGreaterThan(1);
    const history = (await client.threads.getHistory(thread.thread_id, { limit: 100 })).reverse();
    expect(streamed.map(shape)).toEqual(history.map(shape));

    expect(streamed[0]!.parent_checkpoint).toBeNull();
    expect(streamed[1]!.parent_checkpoint).toEqual(streamed[0]!.checkpoint);
    expect(streamed[0]!.checkpoint).toEqual({ thread_id: thread.thread_id, checkpoint_ns: '', checkpoint_id: expect.any(String), checkpoint_map: null });
    // The configs are shown without LangGraph's internals, the parent's as `parent_config`.
    expect(Object.keys(streamed[1]!.config.configurable).filter((k) => k.startsWith('__'))).toEqual([]);
    expect(streamed[1]!.parent_config).toMatchObject({ configurable: { checkpoint_id: (streamed[0]!.checkpoint as { checkpoint_id: string }).checkpoint_id } });
  });

  it('continuing a run from an interrupted checkpoint streams the checkpoints the history then holds', async () => {
    const thread = await client.threads.create();
    const first = checkpointPayloads(await gather(thread.thread_id, 'subgraph', { input: {}, streamMode: 'debug', interruptBefore: ['summarize'] }));
    const history = (await client.threads.getHistory(thread.thread_id)).reverse();
    const checkpoint = history.at(-1)!.checkpoint;
    expect(first.at(-1)!.checkpoint).toEqual(checkpoint);
    // A subgraph task names the subgraph's checkpoint namespace, as thread state does.
    const childTask = first.flatMap((p) => (p as unknown as { tasks: Record<string, unknown>[] }).tasks).find((t) => t.name === 'child');
    expect(childTask).toMatchObject({ checkpoint: { thread_id: thread.thread_id, checkpoint_ns: expect.stringMatching(/^child:/) } });
    expect(childTask).not.toHaveProperty('state');

    const resumed = checkpointPayloads(await gather(thread.thread_id, 'subgraph', { streamMode: 'debug', checkpoint }));
    // The continued run first shows the checkpoint it resumes from, then its new ones.
    expect(resumed[0]!.checkpoint).toEqual(checkpoint);
    const after = (await client.threads.getHistory(thread.thread_id)).reverse();
    expect([...first, ...resumed.slice(1)].map(shape)).toEqual(after.map(shape));
  });
});

describe('404 texts', () => {
  it('say "Assistant not found", "Thread with ID … not found" and "No assistant found for" as the LangGraph API does', async () => {
    const assistant = await client.assistants.create({ graphId: 'echo' });
    const thread = await client.threads.create();
    await client.assistants.delete(assistant.assistant_id);
    // The body stays JSON `{"detail": ...}` as the interface text and the platform's Python server have it;
    // the JS server sends the bare text, so its suite expects `HTTP 404: Assistant not found` (docs/compatibility.md).
    await expect(client.assistants.get(assistant.assistant_id)).rejects.toThrow('HTTP 404: {"detail":"Assistant not found"}');
    await client.threads.delete(thread.thread_id);
    await expect(client.threads.get(thread.thread_id)).rejects.toThrow(`HTTP 404: {"detail":"Thread with ID ${thread.thread_id} not found"}`);

    const live = await client.threads.create();
    await expect(client.runs.wait(live.thread_id, 'no-such-graph', { input: human('x') })).rejects.toThrow(/No assistant found for \\"no-such-graph\\"/);
    await expect(gather(live.thread_id, 'no-such-graph', { input: human('x') })).rejects.toThrow(/No assistant found for \\"no-such-graph\\"/);
    await expect(client.runs.wait(live.thread_id, assistant.assistant_id, { input: human('x') })).rejects.toThrow(
      `No assistant found for \\"${assistant.assistant_id}\\"`,
    );
  });
});

describe('thread state of a run interrupted inside a subgraph', () => {
  it("nests the subgraph's state without `interrupts` (its tasks hold them), as the LangGraph API does", async () => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, 'nested_interrupt', { input: { step: 'start' } });
    const state = await client.threads.getState(thread.thread_id, undefined, { subgraphs: true });
    expect((state as unknown as { interrupts: unknown }).interrupts).toEqual([{ id: expect.any(String), value: 'child asks' }]);
    const nested = state.tasks[0]!.state as unknown as Record<string, unknown>;
    expect(Object.keys(nested).sort()).toEqual(['checkpoint', 'created_at', 'metadata', 'next', 'parent_checkpoint', 'tasks', 'values']);
    expect(nested).toMatchObject({ next: ['ask'], tasks: [{ name: 'ask', interrupts: [{ id: expect.any(String), value: 'child asks' }] }] });
  });
});
