/**
 * `http.disable_*` in langgraph.json turns route groups off, as the LangGraph server does (their
 * routes answer 404 and leave the OpenAPI document; `/info` flags say so), and keys Berth reads but
 * does not apply are named in a startup warning. Projects: test-projects/echo/langgraph.{no-store,store-only}.json.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import { createLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { startAgentServer, type RunningAgentServer } from './index.js';
import { human } from './__tests__/fixtures.js';

const project = (name: string) => fileURLToPath(new URL(`../test-projects/echo/langgraph.${name}.json`, import.meta.url));
const secret = `whsec_${randomBytes(32).toString('base64')}`;

let db: TestDatabase;
const servers: RunningAgentServer[] = [];
const lines: Record<string, unknown>[] = [];

async function start(name: string, schema: string): Promise<RunningAgentServer> {
  const destination = new PassThrough();
  destination.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n')) if (line.trim().startsWith('{')) lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  const server = await startAgentServer(
    { configPath: project(name), databaseUrl: db.url, schema, host: '127.0.0.1', port: 0, workers: 1, webhooks: { secret } },
    createLogger({ name: 'agent-server', level: 'warn', destination }),
  );
  servers.push(server);
  return server;
}

const status = async (url: string, init?: RequestInit) => (await fetch(url, init)).status;
const post = (body: unknown): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

beforeAll(async () => {
  db = await createTestDatabase('agentswitch');
}, 60_000);
afterAll(async () => {
  for (const server of servers) await server.close();
  await db?.drop();
});

describe('disable_store, disable_meta, disable_webhooks', () => {
  let server: RunningAgentServer;
  beforeAll(async () => {
    server = await start('no-store', 'agent_nostore');
  }, 60_000);

  it('answers 404 on the store and /info, keeps /ok and the rest of the API', async () => {
    expect(await status(`${server.url}/store/items?namespace=a&key=b`)).toBe(404);
    expect(await status(`${server.url}/store/items/search`, post({}))).toBe(404);
    expect(await status(`${server.url}/info`)).toBe(404);
    expect(await status(`${server.url}/ok`)).toBe(200);
    const client = new Client({ apiUrl: server.url });
    const result = await client.runs.wait(null, 'echo', { input: human('still here') });
    expect(JSON.stringify(result)).toContain('echo: still here');
    const paths = Object.keys(((await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: object }).paths);
    expect(paths.filter((p) => p.startsWith('/store') || p === '/info')).toEqual([]);
  });

  it('refuses a run that names a webhook, saying why, though the server has a signing secret', async () => {
    const res = await fetch(`${server.url}/runs/wait`, post({ assistant_id: 'echo', input: human('x'), webhook: 'https://hooks.example.com/run' }));
    expect(res.status).toBe(422);
    expect(JSON.stringify(await res.json())).toContain('http.disable_webhooks');
  });

  it('warns at startup about keys that have no effect', () => {
    expect(lines).toContainEqual(expect.objectContaining({ level: 40, msg: expect.stringContaining('"http.mount_prefix" has no effect on Berth') }));
  });
});

describe('disable_assistants, disable_threads, disable_runs, disable_mcp', () => {
  let server: RunningAgentServer;
  beforeAll(async () => {
    server = await start('store-only', 'agent_storeonly');
  }, 60_000);

  it('answers 404 on assistants, threads, runs, crons and MCP; serves the store; /info says what is off', async () => {
    expect(await status(`${server.url}/assistants/search`, post({}))).toBe(404);
    expect(await status(`${server.url}/threads`, post({}))).toBe(404);
    expect(await status(`${server.url}/runs/wait`, post({ assistant_id: 'echo', input: {} }))).toBe(404);
    expect(await status(`${server.url}/runs/crons/search`, post({}))).toBe(404);
    expect(await status(`${server.url}/mcp`, post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }))).toBe(404);
    const client = new Client({ apiUrl: server.url });
    await client.store.putItem(['notes'], 'n1', { text: 'kept' });
    expect((await client.store.getItem(['notes'], 'n1'))?.value).toEqual({ text: 'kept' });
    const info = (await (await fetch(`${server.url}/info`)).json()) as { flags: Record<string, boolean> };
    expect(info.flags).toMatchObject({ assistants: false, crons: false, store: true, mcp: false });
  });
});
