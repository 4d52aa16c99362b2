/**
 * Every run of an agent server with a tracing endpoint is traced through the `langsmith` tracer:
 * a real HTTP receiver takes the Client's requests (multipart ingest, as the trace API does) and
 * the test reads the runs back from them. With the endpoint unreachable, runs take no longer and
 * one warning counts the dropped runs.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import { ManualClock } from '@berth/clock';
import { listen } from '@berth/http';
import { captureLogger, createTestDatabase, until, type CapturedLogs, type TestDatabase } from '@berth/testing';
import express from 'express';
import { startAgentServer, type RunningAgentServer } from '../server.js';
import { TraceReceiver, type TracedRun } from '../__tests__/trace-receiver.js';

const tracedProject = fileURLToPath(new URL('../../test-projects/traced/langgraph.json', import.meta.url));

/** Runs LangGraph hides from traces (its own plumbing, e.g. `__start__`). */
const visible = (runs: TracedRun[]) => runs.filter((r) => !(r.tags ?? []).includes('langsmith:hidden'));

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('agent_tracing');
});
afterAll(async () => {
  await db?.drop();
});

describe('a traced agent server', () => {
  let receiver: TraceReceiver;
  let server: RunningAgentServer;
  let client: Client;

  beforeAll(async () => {
    receiver = new TraceReceiver();
    const endpoint = await receiver.start();
    server = await startAgentServer(
      {
        configPath: tracedProject,
        databaseUrl: db.url,
        schema: 'traced',
        host: '127.0.0.1',
        port: 0,
        workers: 2,
        tracing: { endpoint, apiKey: 'brt_trace_test-credential', project: 'my-deployment' },
      },
      captureLogger().logger,
    );
    client = new Client({ apiUrl: server.url });
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it('records the root run, a child run per node and the llm run with its token usage', async () => {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'traced', { input: { messages: [{ role: 'user', content: 'hi' }] } });
    await client.runs.join(thread.thread_id, run.run_id);

    const runs = visible(await receiver.trace(run.run_id));
    const root = runs.find((r) => !r.parent_run_id)!;
    expect(root).toMatchObject({ name: 'LangGraph', run_type: 'chain', session_name: 'my-deployment' });
    expect(root.extra.metadata).toMatchObject({ run_id: run.run_id, thread_id: thread.thread_id, graph_id: 'traced', assistant_id: run.assistant_id });
    expect(root.error ?? null).toBeNull();

    const nodes = runs.filter((r) => r.parent_run_id === root.id);
    expect(nodes.map((r) => r.name).sort()).toEqual(['answer', 'plan']);
    const answer = nodes.find((r) => r.name === 'answer')!;
    const llm = runs.find((r) => r.run_type === 'llm')!;
    expect(llm.parent_run_ids ?? [llm.parent_run_id]).toContain(answer.id);
    expect(llm.extra.metadata.usage_metadata).toMatchObject({ input_tokens: 11, output_tokens: 7, total_tokens: 18 });
    expect(JSON.stringify(llm.outputs)).toContain('model: planned: hi');
    expect(receiver.apiKeys).toEqual(new Set(['brt_trace_test-credential']));
  });

  it('records a failing run with its error, on the root run and on the node that threw', async () => {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'traced', { input: { messages: [{ role: 'user', content: 'fail' }] } });
    await client.runs.join(thread.thread_id, run.run_id);
    expect((await client.runs.get(thread.thread_id, run.run_id)).status).toBe('error');

    const runs = visible(await receiver.trace(run.run_id));
    const root = runs.find((r) => !r.parent_run_id)!;
    expect(root.error).toContain('the answer node failed on purpose');
    expect(runs.find((r) => r.name === 'answer')?.error).toContain('the answer node failed on purpose');
    expect(runs.find((r) => r.name === 'plan')?.error ?? null).toBeNull();
  });
});

describe('tracing to an unreachable trace store', () => {
  let server: RunningAgentServer;
  let logs: CapturedLogs;
  let client: Client;
  // Retries and the warning window run on it: time passes only when the test moves it.
  const clock = new ManualClock();

  beforeAll(async () => {
    // A port nothing listens on any more.
    const closed = await listen(express(), '127.0.0.1', 0);
    await closed.close();
    logs = captureLogger('agent-server');
    server = await startAgentServer(
      {
        configPath: tracedProject,
        databaseUrl: db.url,
        schema: 'traced_down',
        host: '127.0.0.1',
        port: 0,
        workers: 4,
        tracing: {
          endpoint: closed.url,
          apiKey: 'brt_trace_test-credential',
          project: 'down',
          delivery: { attempts: 2, retryDelayMs: 50, warnIntervalMs: 1500, clock },
        },
      },
      logs.logger,
    );
    client = new Client({ apiUrl: server.url });
  }, 60_000);
  afterAll(async () => {
    // Closing waits for the traces still queued, on the test's clock: let that time pass.
    if (!server) return;
    let closed = false;
    const closing = server.close().finally(() => (closed = true));
    while (!closed) await clock.advance(1_000);
    await closing;
  });

  it('completes runs at normal speed and logs one warning with the number of dropped runs', async () => {
    // The clock stands still while they run: a run that waited for a retry of its traces would never end.
    for (let i = 0; i < 5; i += 1) {
      const values = (await client.runs.wait(null, 'traced', { input: { messages: [{ role: 'user', content: `run ${i}` }] } })) as {
        messages: { content: string }[];
      };
      expect(values.messages.at(-1)?.content).toBe(`model: planned: run ${i}`);
    }
    // One warning per window of drops (exact windows: trace-delivery.test.ts); each refused call ends
    // on its own, so the drops may fall into more than one window as the test moves the clock.
    const warnings = () => logs.lines().filter((l) => typeof l.droppedRuns === 'number');
    const reported = () => warnings().reduce((sum, l) => sum + (l.droppedRuns as number), 0);
    // Each run is a root, its nodes and the llm call (created and updated): at least 5 × 4.
    await until(
      'the warnings to report the dropped runs',
      async () => {
        await clock.advance(1_500);
        return reported() >= 20;
      },
      15_000,
    );
    const [warning] = warnings();
    expect(warning).toMatchObject({ level: 40, msg: expect.stringMatching(/^dropped the traces of \d+ runs/) });
    expect(String(warning!.reason)).toMatch(/ECONNREFUSED/);
  }, 30_000);
});
