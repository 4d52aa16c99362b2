/**
 * Graph outputs Postgres or JSON finds hard. Strings with U+0000, lone surrogates or the storage's
 * own escape character are stored faithfully: the run ends `success` at once and its output, the
 * thread's state and history, the thread row and the stream give back exactly what the graph
 * returned. Values that cannot be stored (50 MB events, nesting too deep to serialize, BigInt,
 * circular objects) end their run `error` at once, saying what and where: no write of theirs is
 * retried as if the database were away (which would hold the run for a minute). No run is wedged,
 * each is traced once, and no request answers 5xx. (Issue 24, defect 4.)
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client } from '@langchain/langgraph-sdk';
import { captureLogger, createTestDatabase, until, type TestDatabase } from '@berth/testing';
import pg from 'pg';
import { startAgentServer, type RunningAgentServer } from './server.js';
import { durabilityProject as project } from './__tests__/fixtures.js';
import { TraceReceiver } from './__tests__/trace-receiver.js';
import { OUTPUTS } from '../test-projects/durability/src/emit.js';

let db: TestDatabase;
let server: RunningAgentServer;
let receiver: TraceReceiver;
let client: Client;
let sql: pg.Pool;
/** Every status the API answered, by request. */
const answered: { what: string; status: number }[] = [];
const logs = captureLogger();
/** The log lines of writes retried because the database seemed away (it never is here). */
const retriedWrites = () => logs.lines().filter((l) => /the database is unreachable/.test(String(l.msg)));

beforeAll(async () => {
  db = await createTestDatabase('agent_outputs');
  receiver = new TraceReceiver();
  const endpoint = await receiver.start();
  server = await startAgentServer(
    {
      configPath: project,
      databaseUrl: db.url,
      host: '127.0.0.1',
      port: 0,
      workers: 4,
      tracing: { endpoint, apiKey: 'brt_trace_test', project: 'outputs' },
    },
    logs.logger,
  );
  const logged: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    answered.push({ what: `${init?.method ?? 'GET'} ${String(input).replace(server.url, '')}`, status: response.status });
    return response;
  };
  client = new Client({ apiUrl: server.url, callerOptions: { fetch: logged, maxRetries: 0 } });
  sql = new pg.Pool({ connectionString: db.url });
}, 60_000);
afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await sql?.end();
  await db?.drop();
});

type Values = { kind: string; value: unknown };
const runRow = async (runId: string) =>
  (await sql.query<{ status: string; attempt: number }>('SELECT status, attempt FROM agent.runs WHERE run_id = $1', [runId])).rows[0]!;

/** Starts an `emit` run of `kind` on a new thread; resolves once it has ended (or after 10 s). */
async function emit(kind: string): Promise<{ threadId: string; runId: string; status: string }> {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, 'emit', { input: { kind }, streamResumable: true });
  const { status } = await until(
    `run ${kind} to end`,
    async () => {
      const row = await runRow(run.run_id);
      return row.status === 'pending' || row.status === 'running' ? undefined : row;
    },
    20_000,
  );
  return { threadId: thread.thread_id, runId: run.run_id, status };
}

describe('values Postgres cannot store as they are', () => {
  for (const kind of ['nul', 'surrogates', 'escape', 'nested']) {
    it(`${kind}: the run succeeds at once and every read gives back exactly what the graph returned`, async () => {
      const expected = OUTPUTS[kind]!();
      const { threadId, runId, status } = await emit(kind);
      expect(status).toBe('success');
      expect(retriedWrites()).toEqual([]);

      expect(((await client.runs.join(threadId, runId)) as Values).value).toEqual(expected);
      expect(((await client.threads.getState(threadId)).values as Values).value).toEqual(expected);
      expect(((await client.threads.get(threadId)).values as Values).value).toEqual(expected);
      const [latest] = await client.threads.getHistory(threadId, { limit: 1 });
      expect((latest!.values as Values).value).toEqual(expected);
      // A stream replayed from its start ends with the same values.
      let streamed: unknown;
      for await (const chunk of client.runs.joinStream(threadId, runId)) if (chunk.event === 'values') streamed = (chunk.data as Values).value;
      expect(streamed).toEqual(expected);
      // wait answers the same, and the thread takes its next run.
      const next = (await client.runs.wait(threadId, 'emit', { input: { kind } })) as Values;
      expect(next.value).toEqual(expected);

      // One execution each, so one root trace each, which the trace store could keep whole.
      await until('the root traces', () => (receiver.roots(runId).some((r) => r.end_time) ? true : undefined), 15_000);
      expect(receiver.roots(runId)).toHaveLength(1);
      expect(receiver.refused).toEqual([]);
      expect(receiver.posts.filter((id) => receiver.runs.get(id)?.extra?.metadata?.run_id === runId && !receiver.runs.get(id)?.parent_run_id)).toHaveLength(1);
      expect((await runRow(runId)).attempt).toBe(1);
    }, 30_000);
  }
});

describe('values that cannot be stored', () => {
  const cases: [string, RegExp][] = [
    ['big', /event 'values' .* is \d+ bytes, more than the limit/],
    ['deep', /(state channel "value"|the graph's output) cannot be stored: it is nested deeper than 1000 levels/],
    ['bigint', /state channel "value" .*BigInt/],
    ['circular', /state channel "value" .*circular/i],
  ];
  for (const [kind, message] of cases) {
    it(`${kind}: the run ends \`error\` at once saying what, and the thread's next run runs`, async () => {
      const { threadId, runId, status } = await emit(kind);
      expect(status).toBe('error');
      expect(retriedWrites()).toEqual([]);
      const thread = await client.threads.get(threadId);
      expect(thread.status).toBe('error');
      expect((thread.error as { message: string }).message).toMatch(message);
      const waited = (await client.runs.wait(threadId, 'emit', { input: { kind: 'nul' } })) as Values;
      expect(waited.value).toEqual(OUTPUTS.nul!());
      // Executed once: one root trace (the tracer may not manage to record such a value's end).
      await until('the root trace', () => (receiver.roots(runId).length ? true : undefined), 15_000);
      expect(receiver.roots(runId)).toHaveLength(1);
      expect((await runRow(runId)).attempt).toBe(1);
    }, 60_000);
  }

  it('an error message with U+0000 is kept as thrown', async () => {
    const { threadId, status } = await emit('throw_nul');
    expect(status).toBe('error');
    expect((await client.threads.get(threadId)).error).toMatchObject({ message: 'bad\u0000message' });
  });
});

it('answered no request with a 5xx', () => {
  expect(answered.length).toBeGreaterThan(40);
  expect(answered.filter((a) => a.status >= 500)).toEqual([]);
});
