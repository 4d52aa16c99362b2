/**
 * Stream modes, resumable streams, multitask strategies, interrupts, delayed runs, cancellation
 * latency and a worker killed mid-run — through the official SDK against real Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { Client } from '@langchain/langgraph-sdk';
import { ManualClock } from '@berth/clock';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './index.js';
import { human, spawnAgentServer, startTestServer, until, type Msg } from './__tests__/fixtures.js';

/** The lease of the test servers (startTestServer) and the spawned workers. */
const LEASE_MS = 1000;

let db: TestDatabase;
let server: RunningAgentServer;
let client: Client;

beforeAll(async () => {
  db = await createTestDatabase('agentx');
  server = await startTestServer(db.url);
  client = new Client({ apiUrl: server.url });
}, 60_000);
afterAll(async () => {
  await server?.close();
  await db?.drop();
});

describe('stream modes', () => {
  it('emits every stream mode, named as the LangGraph API names them', async () => {
    const t = await client.threads.create();
    const names = new Set<string>();
    const byName = new Map<string, unknown>();
    for await (const chunk of client.runs.stream(t.thread_id, 'echo', {
      input: human('all modes'),
      streamMode: ['values', 'updates', 'messages', 'messages-tuple', 'custom', 'debug', 'tasks', 'checkpoints'],
    })) {
      names.add(chunk.event);
      if (!byName.has(chunk.event)) byName.set(chunk.event, chunk.data);
    }
    for (const name of [
      'metadata',
      'values',
      'updates',
      'messages',
      'messages/metadata',
      'messages/partial',
      'messages/complete',
      'debug',
      'tasks',
      'checkpoints',
    ]) {
      expect(names).toContain(name);
    }
    const [message, metadata] = byName.get('messages') as [Msg, Record<string, unknown>];
    expect(message).toMatchObject({ type: 'ai', content: 'echo: all modes' });
    expect(metadata).toMatchObject({ langgraph_node: 'respond' });
    expect(byName.get('debug')).toMatchObject({ type: expect.stringMatching(/checkpoint|task/) });
  });

  it('passes raw callback events with the events mode, alongside other modes', async () => {
    const kinds = new Set<string>();
    const names = new Set<string>();
    for await (const chunk of client.runs.stream(null, 'echo', { input: human('events'), streamMode: ['events', 'values'] })) {
      names.add(chunk.event);
      if (chunk.event === 'events') kinds.add((chunk.data as { event: string }).event);
    }
    expect(names).toEqual(new Set(['metadata', 'events', 'values']));
    expect([...kinds]).toEqual(expect.arrayContaining(['on_chain_start', 'on_chain_end']));
  });

  it('names subgraph events mode|namespace when stream_subgraphs is on', async () => {
    const names: string[] = [];
    for await (const chunk of client.runs.stream(null, 'subgraph', { input: {}, streamMode: ['updates'], streamSubgraphs: true })) names.push(chunk.event);
    expect(names.some((n) => /^updates\|[^|]+:/.test(n))).toBe(true);
    const plain: string[] = [];
    for await (const chunk of client.runs.stream(null, 'subgraph', { input: {}, streamMode: ['updates'] })) plain.push(chunk.event);
    expect(plain.some((n) => n.includes('|'))).toBe(false);
  });

  it('replays what a client missed when it reconnects with Last-Event-ID', async () => {
    const t = await client.threads.create();
    const first: { event: string; id?: string }[] = [];
    for await (const chunk of client.runs.stream(t.thread_id, 'echo', {
      input: human('resume me'),
      streamMode: ['values', 'updates'],
      streamResumable: true,
    })) {
      first.push(chunk as { event: string; id?: string });
    }
    expect(first.every((e) => e.id !== undefined)).toBe(true);
    const runId = (first[0] as unknown as { data: { run_id: string } }).data.run_id;
    const rest: { event: string; id?: string }[] = [];
    for await (const chunk of client.runs.joinStream(t.thread_id, runId, { lastEventId: first[1]!.id! })) rest.push(chunk as { event: string; id?: string });
    expect(rest.map((e) => e.id)).toEqual(first.slice(2).map((e) => e.id));
    expect(rest.map((e) => e.event)).toEqual(first.slice(2).map((e) => e.event));
  });
});

describe('multitask strategies and delays', () => {
  it('interrupt stops the running run and starts the new one; rollback deletes the old one', async () => {
    for (const strategy of ['interrupt', 'rollback'] as const) {
      const t = await client.threads.create();
      const old = await client.runs.create(t.thread_id, 'slow', { input: {}, context: { delay_ms: 20_000 } });
      await until(
        () => client.runs.get(t.thread_id, old.run_id),
        (r) => r.status === 'running',
      );
      const next = await client.runs.create(t.thread_id, 'slow', { input: {}, context: { delay_ms: 10 }, multitaskStrategy: strategy });
      await client.runs.join(t.thread_id, next.run_id);
      expect((await client.runs.get(t.thread_id, next.run_id)).status).toBe('success');
      const history = await client.threads.getHistory(t.thread_id, { limit: 100 });
      if (strategy === 'interrupt') {
        expect((await client.runs.get(t.thread_id, old.run_id)).status).toBe('interrupted');
        // The interrupted run's checkpoints stay in the thread's history.
        expect(history.length).toBeGreaterThan(3);
      } else {
        await expect(client.runs.get(t.thread_id, old.run_id)).rejects.toThrow(/404/);
        // Only the new run's checkpoints remain: input, before the node, after it.
        expect(history.length).toBe(3);
      }
    }
  });

  it('starts a run with after_seconds no earlier than asked', async () => {
    const t = await client.threads.create();
    const created = Date.now();
    const run = await client.runs.create(t.thread_id, 'echo', { input: human('later'), afterSeconds: 1 });
    expect((await client.runs.get(t.thread_id, run.run_id)).status).toBe('pending');
    await client.runs.join(t.thread_id, run.run_id);
    expect(Date.now() - created).toBeGreaterThanOrEqual(1000);
    expect((await client.runs.get(t.thread_id, run.run_id)).status).toBe('success');
  });

  it('stops before a node with interrupt_before and continues with a new run', async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, 'echo', { input: human('pause'), interruptBefore: ['respond'] });
    const paused = await client.threads.getState(t.thread_id);
    expect(paused.next).toEqual(['respond']);
    expect((await client.threads.get(t.thread_id)).status).toBe('interrupted');
    const done = (await client.runs.wait(t.thread_id, 'echo', { input: null })) as { messages: Msg[] };
    expect(done.messages.at(-1)?.content).toBe('echo: pause');
  });
});

describe('cancellation and failures', () => {
  it('reaches the running graph when a run is cancelled (its hour-long wait ends at once)', async () => {
    const t = await client.threads.create();
    const run = await client.runs.create(t.thread_id, 'slow', { input: {}, context: { delay_ms: 3_600_000 } });
    // Its graph executes (it saved its first checkpoint): the cancel has to reach the graph's wait.
    await until(
      () => client.threads.getHistory(t.thread_id),
      (history) => history.length > 0,
    );
    await client.runs.cancel(t.thread_id, run.run_id);
    // The run ends only when the graph's AbortSignal stops its wait: otherwise in an hour.
    const ended = await until(
      () => client.runs.get(t.thread_id, run.run_id),
      (r) => r.status !== 'running',
      30_000,
    );
    expect(ended.status).toBe('interrupted');
  });

  it('cancels the run when a streaming client with on_disconnect=cancel goes away', async () => {
    const t = await client.threads.create();
    const abort = new AbortController();
    let runId = '';
    try {
      for await (const chunk of client.runs.stream(t.thread_id, 'slow', {
        input: {},
        context: { delay_ms: 20_000 },
        onDisconnect: 'cancel',
        signal: abort.signal,
        streamMode: 'custom',
      })) {
        if (chunk.event === 'metadata') runId = (chunk.data as { run_id: string }).run_id;
        if (chunk.event === 'custom') abort.abort();
      }
    } catch {
      // The SDK may surface the abort as an error; either way the client is gone.
    }
    expect(runId).not.toBe('');
    const run = await until(
      () => client.runs.get(t.thread_id, runId),
      (r) => r.status !== 'running' && r.status !== 'pending',
    );
    expect(run.status).toBe('interrupted');
  });

  it('stops a run that exceeds the time limit with status timeout', async () => {
    // The limit runs on a clock the test moves: the run's hour-long wait ends exactly when it passes.
    const clock = new ManualClock(Date.now());
    const limited = await startTestServer(db.url, { schema: 'agent_timeout', workers: 1, runTimeoutMs: 300, clock });
    try {
      const c = new Client({ apiUrl: limited.url });
      const t = await c.threads.create();
      const run = await c.runs.create(t.thread_id, 'slow', { input: {}, context: { delay_ms: 3_600_000 } });
      // Its graph executes (its first checkpoint is saved): the limit is set.
      await until(
        () => c.threads.getHistory(t.thread_id),
        (history) => history.length > 0,
      );
      await clock.advance(299);
      expect((await c.runs.get(t.thread_id, run.run_id)).status).toBe('running');
      await clock.advance(1);
      const ended = await until(
        () => c.runs.get(t.thread_id, run.run_id),
        (r) => r.status !== 'pending' && r.status !== 'running',
      );
      expect(ended.status).toBe('timeout');
      expect((await c.threads.get(t.thread_id)).status).toBe('error');
    } finally {
      await limited.close();
    }
  });

  it('lets another worker take over a run whose worker was killed (kill -9) a lease and a half later, not after the hold period', async () => {
    const api = await startTestServer(db.url, { workers: 0 });
    const apiClient = new Client({ apiUrl: api.url });
    // The in-process server keeps working too; stop it from taking this run by using a fresh worker pair.
    await server.close();
    try {
      const { child: first } = await spawnWorker();
      const t = await apiClient.threads.create();
      const run = await apiClient.runs.create(t.thread_id, 'slow', { input: {}, context: { delay_ms: 2000 } });
      await until(
        () => apiClient.runs.get(t.thread_id, run.run_id),
        (r) => r.status === 'running',
      );
      const exited = new Promise((resolve) => first.once('exit', resolve));
      first.kill('SIGKILL');
      await exited;
      // The taker's lease clock starts now and moves only as the test moves it. The dead worker's
      // lease (renewed at the latest before it died) ends within a lease from now; the taker takes
      // runs over once it has been connected for its takeover grace (a lease too), at a sweep
      // (every half lease). A dead worker's run waits for no hold period (60 s by default).
      const clock = new ManualClock(Date.now());
      const taker = await startTestServer(db.url, { clock });
      try {
        await clock.advance(LEASE_MS * 1.5);
        const done = await until(
          () => apiClient.runs.get(t.thread_id, run.run_id),
          (r) => r.status === 'success',
          20_000,
        );
        expect(done.status).toBe('success');
        const state = await apiClient.threads.getState(t.thread_id);
        expect(state.values).toMatchObject({ waited_ms: expect.any(Number) });
      } finally {
        await taker.close();
      }
    } finally {
      await api.close();
      server = await startTestServer(db.url);
    }
  }, 60_000);

  it("hands the runs waiting in a killed process's local backlog to another worker", async () => {
    // An API-only view of the database, to watch the runs once their process is gone.
    const api = await startTestServer(db.url, { workers: 0 });
    const apiClient = new Client({ apiUrl: api.url });
    await server.close();
    try {
      // One run slot: the second run waits in the process's memory, pending in the database.
      const a = await spawnWorker('1');
      const aClient = new Client({ apiUrl: a.url });
      const [t1, t2] = [await aClient.threads.create(), await aClient.threads.create()];
      const x = await aClient.runs.create(t1.thread_id, 'slow', { input: {}, context: { delay_ms: 2000 } });
      const y = await aClient.runs.create(t2.thread_id, 'slow', { input: {}, context: { delay_ms: 10 } });
      await until(
        () => apiClient.runs.get(t1.thread_id, x.run_id),
        (r) => r.status === 'running',
      );
      expect((await apiClient.runs.get(t2.thread_id, y.run_id)).status).toBe('pending');
      a.child.kill('SIGKILL');
      const b = await spawnWorker('2');
      try {
        expect(
          (
            await until(
              () => apiClient.runs.get(t2.thread_id, y.run_id),
              (r) => r.status === 'success',
              20_000,
            )
          ).status,
        ).toBe('success');
        expect(
          (
            await until(
              () => apiClient.runs.get(t1.thread_id, x.run_id),
              (r) => r.status === 'success',
              20_000,
            )
          ).status,
        ).toBe('success');
      } finally {
        b.child.kill('SIGKILL');
      }
    } finally {
      await api.close();
      server = await startTestServer(db.url);
    }
  }, 60_000);
});

/** An agent server in a child process (API + `workers` run slots); resolves once it serves. */
function spawnWorker(workers = '2'): Promise<{ child: ChildProcess; url: string }> {
  return spawnAgentServer(db.url, { workers: Number(workers) });
}
