/**
 * The agent server driven by the official @langchain/langgraph-sdk client, against real Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client } from '@langchain/langgraph-sdk';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './index.js';
import { human, lastText, startTestServer, until, type Msg } from './__tests__/fixtures.js';

let db: TestDatabase;
let server: RunningAgentServer;
let client: Client;

beforeAll(async () => {
  db = await createTestDatabase('agent');
  server = await startTestServer(db.url);
  client = new Client({ apiUrl: server.url });
}, 60_000);
afterAll(async () => {
  await server?.close();
  await db?.drop();
});

describe('assistants', () => {
  it('serves each graph through its system assistant, by graph name or id', async () => {
    const byName = await client.assistants.get('echo');
    expect(byName).toMatchObject({ graph_id: 'echo', metadata: { created_by: 'system' }, version: 1 });
    expect((await client.assistants.get(byName.assistant_id)).assistant_id).toBe(byName.assistant_id);
    const found = await client.assistants.search({ graphId: 'echo' });
    expect(found.map((a) => a.assistant_id)).toContain(byName.assistant_id);
  });

  it('versions every update, runs the active version, and rolls back with /latest', async () => {
    const a = await client.assistants.create({ graphId: 'echo', name: 'support', context: { system_prompt: 'v1', model_name: 'm' } });
    expect(a).toMatchObject({ version: 1, name: 'support', metadata: {} });
    const b = await client.assistants.update(a.assistant_id, { context: { system_prompt: 'v2' } });
    expect(b.version).toBe(2);
    // The PATCHed context is complete: model_name from version 1 is not merged in.
    expect(b.context).toEqual({ system_prompt: 'v2' });

    const thread = await client.threads.create();
    const v2 = await client.runs.wait(thread.thread_id, a.assistant_id, { input: human('hi') });
    expect(lastText(v2)).toBe('echo: hi [v2]');

    const back = await client.assistants.setLatest(a.assistant_id, 1);
    expect(back).toMatchObject({ version: 1, context: { system_prompt: 'v1', model_name: 'm' } });
    const v1 = await client.runs.wait(thread.thread_id, a.assistant_id, { input: human('again') });
    expect(lastText(v1)).toBe('echo: again [v1]');

    const versions = await client.assistants.getVersions(a.assistant_id);
    expect(versions.map((v) => v.version)).toEqual([2, 1]);
    await expect(client.assistants.setLatest(a.assistant_id, 7)).rejects.toThrow(/404/);
    await client.assistants.delete(a.assistant_id);
    await expect(client.assistants.get(a.assistant_id)).rejects.toThrow(/404/);
  });

  it('refuses context keys the graph does not define, and unknown fields', async () => {
    const res = await fetch(`${server.url}/assistants`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ graph_id: 'echo', context: { modle_name: 'x' }, colour: 'red' }),
    });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { detail: { loc: unknown[] }[] };
    expect(body.detail.map((d) => d.loc)).toEqual(expect.arrayContaining([['body', 'colour']]));
    const ctx = await fetch(`${server.url}/assistants`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ graph_id: 'echo', context: { modle_name: 'x' } }),
    });
    expect(ctx.status).toBe(422);
    expect(JSON.stringify(await ctx.json())).toContain('modle_name');
  });

  it('describes the graph: schemas and drawing', async () => {
    const schemas = await client.assistants.getSchemas('echo');
    expect(JSON.stringify(schemas.context_schema)).toContain('system_prompt');
    const drawing = await client.assistants.getGraph('echo');
    expect(drawing.nodes.map((n) => n.id)).toEqual(expect.arrayContaining(['__start__', 'respond', '__end__']));
  });
});

describe('threads', () => {
  it('creates, reads, patches, searches, copies and deletes threads', async () => {
    const t = await client.threads.create({ metadata: { owner: 'ann' } });
    expect(t.status).toBe('idle');
    await client.runs.wait(t.thread_id, 'echo', { input: human('hello') });
    const state = await client.threads.getState(t.thread_id);
    expect(lastText(state.values)).toBe('echo: hello');
    expect(state.next).toEqual([]);
    const patched = await client.threads.update(t.thread_id, { metadata: { tier: 'gold' } });
    expect(patched.metadata).toMatchObject({ owner: 'ann', tier: 'gold', graph_id: 'echo' });
    const found = await client.threads.search({ metadata: { owner: 'ann' } });
    expect(found.map((x) => x.thread_id)).toContain(t.thread_id);
    expect(await client.threads.count({ metadata: { owner: 'ann' } })).toBeGreaterThanOrEqual(1);
    const copy = await client.threads.copy(t.thread_id);
    expect(lastText((await client.threads.getState(copy.thread_id)).values)).toBe('echo: hello');
    const history = await client.threads.getHistory(t.thread_id);
    expect(history.length).toBeGreaterThanOrEqual(2);
    await client.threads.delete(t.thread_id);
    await expect(client.threads.get(t.thread_id)).rejects.toThrow(/404/);
    expect(lastText((await client.threads.getState(copy.thread_id)).values)).toBe('echo: hello');
  });
});

describe('runs', () => {
  it('creates a run that returns at once, then joins it', async () => {
    const t = await client.threads.create();
    const run = await client.runs.create(t.thread_id, 'echo', { input: human('bg') });
    expect(['pending', 'running', 'success']).toContain(run.status);
    const joined = await client.runs.join(t.thread_id, run.run_id);
    expect(lastText(joined)).toBe('echo: bg');
    expect((await client.runs.get(t.thread_id, run.run_id)).status).toBe('success');
    expect((await client.runs.list(t.thread_id)).map((r) => r.run_id)).toEqual([run.run_id]);
    expect((await client.threads.get(t.thread_id)).status).toBe('idle');
  });

  // No multitask_strategy given: `enqueue` is the default, as the interface text (B5) says. The
  // LangGraph JS server defaults to `reject` and would refuse the second and third runs.
  it('runs three enqueued runs of a busy thread one at a time, in order', async () => {
    const t = await client.threads.create();
    const runs = [];
    for (const text of ['one', 'two', 'three']) runs.push(await client.runs.create(t.thread_id, 'echo', { input: human(text) }));
    await client.runs.join(t.thread_id, runs[2]!.run_id);
    const state = await client.threads.getState(t.thread_id);
    expect((state.values as { messages: Msg[] }).messages.map((m) => m.content)).toEqual(['one', 'echo: one', 'two', 'echo: two', 'three', 'echo: three']);
  });

  // 409 Conflict, as the Python server answers; the LangGraph JS server answers 422.
  it('refuses a run on a busy thread with multitask_strategy reject (409)', async () => {
    const t = await client.threads.create();
    const first = await client.runs.create(t.thread_id, 'slow', { input: {}, context: { delay_ms: 1500 } });
    await expect(client.runs.create(t.thread_id, 'slow', { input: {}, multitaskStrategy: 'reject' })).rejects.toThrow(/409/);
    await client.runs.cancel(t.thread_id, first.run_id, true);
  });

  it('streams updates, values, custom and messages-tuple events after the metadata event', async () => {
    const t = await client.threads.create();
    const events: { event: string; data: unknown }[] = [];
    for await (const chunk of client.runs.stream(t.thread_id, 'echo', {
      input: human('stream me'),
      streamMode: ['updates', 'values', 'messages-tuple'],
    })) {
      events.push(chunk);
    }
    expect(events[0]).toMatchObject({ event: 'metadata', data: { run_id: expect.any(String), attempt: 1 } });
    const update = events.find((e) => e.event === 'updates');
    expect(update?.data).toEqual({ respond: { messages: [expect.objectContaining({ type: 'ai', content: 'echo: stream me' })] } });
    expect(lastText(events.filter((e) => e.event === 'values').at(-1)?.data)).toBe('echo: stream me');
    const custom: unknown[] = [];
    for await (const chunk of client.runs.stream(null, 'slow', { input: {}, context: { delay_ms: 10 }, streamMode: 'custom' })) {
      if (chunk.event === 'custom') custom.push(chunk.data);
    }
    expect(custom).toEqual([{ phase: 'start', delay_ms: 10 }, { phase: 'done' }]);
  });

  it('runs threadless runs with wait and stream', async () => {
    expect(lastText(await client.runs.wait(null, 'echo', { input: human('no thread') }))).toBe('echo: no thread');
  });

  it('cancels a running run at once and leaves the thread usable', async () => {
    const t = await client.threads.create();
    // An hour-long wait: a cancel that did not reach the graph would end with the test's timeout.
    const run = await client.runs.create(t.thread_id, 'slow', { input: {}, context: { delay_ms: 3_600_000 } });
    await until(
      () => client.runs.get(t.thread_id, run.run_id),
      (r) => r.status === 'running',
    );
    await client.runs.cancel(t.thread_id, run.run_id, true);
    expect((await client.runs.get(t.thread_id, run.run_id)).status).toBe('interrupted');
    expect((await client.threads.get(t.thread_id)).status).toBe('idle');
  });

  it('stops at interrupt() and continues with command.resume', async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, 'interrupt', { input: { question: 'ok?' } });
    const waiting = await client.threads.get(t.thread_id);
    expect(waiting.status).toBe('interrupted');
    const resumed = await client.runs.wait(t.thread_id, 'interrupt', { command: { resume: 'yes' } });
    expect(resumed).toMatchObject({ answer: 'yes', result: 'done: yes' });
    expect((await client.threads.get(t.thread_id)).status).toBe('idle');
  });
});

describe('more of the API', () => {
  it('counts assistants, starts batches of threadless runs, creates missing threads on demand', async () => {
    expect(await client.assistants.count({ graphId: 'echo' })).toBeGreaterThanOrEqual(1);
    const batch = await client.runs.createBatch([
      { assistantId: 'echo', input: human('b1') },
      { assistantId: 'echo', input: human('b2') },
    ]);
    expect(batch).toHaveLength(2);
    const threadId = '7d9f6a2e-4b1c-4f3e-9a57-0c2b8e1d4f60';
    const run = await client.runs.create(threadId, 'echo', { input: human('new'), ifNotExists: 'create' });
    expect(lastText(await client.runs.join(threadId, run.run_id))).toBe('echo: new');
    await expect(client.runs.create('0e0e0e0e-0000-4000-8000-000000000000', 'echo', { input: human('x') })).rejects.toThrow(/404/);
  });

  it('reads the state at a checkpoint and starts a run from it', async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, 'echo', { input: human('first') });
    const afterFirst = await client.threads.getState(t.thread_id);
    await client.runs.wait(t.thread_id, 'echo', { input: human('second') });
    const checkpointId = afterFirst.checkpoint.checkpoint_id!;
    const past = await client.threads.getState(t.thread_id, checkpointId);
    expect(lastText(past.values)).toBe('echo: first');
    await client.runs.wait(t.thread_id, 'echo', { input: human('fork'), checkpointId });
    // The run started from that checkpoint: its first checkpoint branches off it (beside the second run's).
    const history = await client.threads.getHistory(t.thread_id, { limit: 50 });
    expect(history.filter((h) => h.parent_checkpoint?.checkpoint_id === checkpointId)).toHaveLength(2);
    await expect(client.threads.getState(t.thread_id, '1f000000-0000-6000-8000-000000000000')).rejects.toThrow(/404/);
  });
});
