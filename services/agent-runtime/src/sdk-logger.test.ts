/**
 * Graph code that logs with `getLogger()` of `@langchain/langgraph-sdk/logging` loads on Berth and
 * its lines land in the server's structured log, tagged with where in which run they came from.
 * The project is test-projects/logging.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import { createLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { startAgentServer, type RunningAgentServer } from './index.js';

const configPath = fileURLToPath(new URL('../test-projects/logging/langgraph.json', import.meta.url));

let db: TestDatabase;
let server: RunningAgentServer;
const lines: Record<string, unknown>[] = [];

beforeAll(async () => {
  db = await createTestDatabase('agent');
  const destination = new PassThrough();
  let buffered = '';
  destination.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const complete = buffered.split('\n');
    buffered = complete.pop()!;
    for (const line of complete) if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  const logger = createLogger({ name: 'agent-server', level: 'debug', destination });
  server = await startAgentServer({ configPath, databaseUrl: db.url, host: '127.0.0.1', port: 0, workers: 1 }, logger);
}, 60_000);

afterAll(async () => {
  await server?.close();
  await db?.drop();
});

it('loads a module that calls getLogger() at import and logs its line', () => {
  expect(lines).toContainEqual(expect.objectContaining({ component: 'graph', msg: 'logging graph module loaded', level: 30 }));
});

it("writes a node's log lines with the run, thread, graph and node they came from", async () => {
  const client = new Client({ apiUrl: server.url });
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, 'logging', { input: { question: 'why?' } });
  await client.runs.join(thread.thread_id, run.run_id);

  const scope = { run_id: run.run_id, thread_id: thread.thread_id, graph_id: 'logging', node: 'respond' };
  expect(lines).toContainEqual(expect.objectContaining({ ...scope, level: 40, msg: 'answering', question: 'why?' }));
  // An Error is logged with its message and stack, not as `{}`.
  const error = lines.find((line) => line.msg === 'not really an error');
  expect(error).toMatchObject({ ...scope, level: 50, err: { message: 'not really an error', type: 'Error' } });
  expect((error!.err as { stack: string }).stack).toContain('graph.ts');
});
