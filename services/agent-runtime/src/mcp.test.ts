/**
 * POST /mcp (Model Context Protocol, Streamable HTTP) driven by the official MCP client, plus the
 * transport's HTTP rules checked by hand, against real Postgres. The project is
 * test-projects/mcp: `add` (described, typed input) and `fail` (throws).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as LangGraphClient } from '@langchain/langgraph-sdk';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './index.js';
import pg from 'pg';
import { startTestServer, until } from './__tests__/fixtures.js';
import { toolInput } from './api/mcp.js';

const project = (name: string) => fileURLToPath(new URL(`../test-projects/mcp/${name}`, import.meta.url));

let db: TestDatabase;
let server: RunningAgentServer;
let mcp: McpClient;
let transport: StreamableHTTPClientTransport;
/** Only to see how a run ended that no client waits for. */
let pool: pg.Pool;

async function connect(url: string, headers: Record<string, string> = {}) {
  const t = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } });
  const client = new McpClient({ name: 'berth-test', version: '1.0.0' });
  await client.connect(t);
  return { client, transport: t };
}

const JSON_AND_SSE = 'application/json, text/event-stream';

/** One POST to /mcp with the body as given (a string is sent as it is). */
async function post(body: unknown, headers: Record<string, string> = {}, url = server.url, path = '/mcp') {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: JSON_AND_SSE, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, type: res.headers.get('content-type'), body: text ? (JSON.parse(text) as unknown) : undefined };
}

beforeAll(async () => {
  db = await createTestDatabase('agent');
  server = await startTestServer(db.url, { configPath: project('langgraph.json') });
  ({ client: mcp, transport } = await connect(server.url));
  pool = new pg.Pool({ connectionString: db.url, max: 1 });
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await mcp?.close();
  await server?.close();
  await db?.drop();
});

describe('the official MCP client', () => {
  it('initializes with the newest protocol version and a tools capability', () => {
    expect(transport.protocolVersion).toBe('2025-11-25');
    expect(mcp.getServerVersion()).toMatchObject({ name: 'berth-agent-server', version: expect.any(String) });
    expect(mcp.getServerCapabilities()).toEqual({ tools: { listChanged: false } });
  });

  it('lists one tool per graph, with its langgraph.json description and input schema', async () => {
    const { tools } = await mcp.listTools();
    expect(tools.map((t) => t.name)).toEqual(['add', 'fail', 'slow']);
    const [add, fail] = tools;
    expect(add!.description).toBe('Adds two numbers');
    expect(add!.inputSchema).toMatchObject({
      type: 'object',
      properties: { a: { type: 'number', description: 'first addend' }, b: { type: 'number' }, note: { type: 'string' } },
    });
    expect(fail!.description).toBeUndefined();
    expect(fail!.inputSchema).toMatchObject({ type: 'object', properties: { reason: { type: 'string' } } });
  });

  it("calls a tool: runs its graph and answers with the run's output (its final values, as /runs/wait)", async () => {
    const result = await mcp.callTool({ name: 'add', arguments: { a: 2, b: 40, note: 'sum' } });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toEqual({ a: 2, b: 40, note: 'sum', sum: 42 });
    expect(result.content).toEqual([{ type: 'text', text: JSON.stringify(result.structuredContent) }]);
  });

  it('reports a graph that throws as a tool error with its message', async () => {
    const result = await mcp.callTool({ name: 'fail', arguments: { reason: 'on purpose' } });
    expect(result.isError).toBe(true);
    expect(result.content).toEqual([{ type: 'text', text: 'the tool broke: on purpose' }]);
  });

  it('refuses an unknown tool with invalid params (-32602)', async () => {
    await expect(mcp.callTool({ name: 'nope', arguments: {} })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining('Unknown tool: nope') });
  });

  it('stops the run of a tools/call whose client went away', async () => {
    const gone = new AbortController();
    const call = fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: JSON_AND_SSE },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'slow', arguments: {} } }),
      signal: gone.signal,
    });
    const runStatus = async () =>
      (await pool.query<{ status: string }>("SELECT r.status FROM agent.runs r JOIN agent.assistants a USING (assistant_id) WHERE a.graph_id = 'slow'")).rows[0]
        ?.status;
    expect(await until(runStatus, (s) => s === 'running')).toBe('running');
    gone.abort();
    await expect(call).rejects.toThrow();
    // The graph waits a second unless stopped.
    expect(await until(runStatus, (s) => s !== 'running', 5000)).toBe('interrupted');
  });

  it('answers ping', async () => {
    await expect(mcp.ping()).resolves.toEqual({});
  });

  it('lists user-created assistants by name when the name is a valid tool name no other tool has', async () => {
    const lg = new LangGraphClient({ apiUrl: server.url });
    const adder = await lg.assistants.create({ graphId: 'add', name: 'adder', description: 'Adds, as an assistant' });
    await lg.assistants.create({ graphId: 'add', name: 'twin' });
    await lg.assistants.create({ graphId: 'fail', name: 'twin' });
    await lg.assistants.create({ graphId: 'add', name: 'not a tool name' });
    await lg.assistants.create({ graphId: 'add', name: 'fail' });
    const { tools } = await mcp.listTools();
    expect(tools.map((t) => t.name)).toEqual(['add', 'fail', 'slow', 'adder']);
    expect(tools[3]).toMatchObject({ description: 'Adds, as an assistant', inputSchema: { properties: { a: { type: 'number' } } } });
    // `fail` stays the graph's tool.
    expect((await mcp.callTool({ name: 'fail', arguments: {} })).isError).toBe(true);
    const result = await mcp.callTool({ name: 'adder', arguments: { a: 1, b: 1 } });
    expect(result.structuredContent).toEqual({ a: 1, b: 1, sum: 2 });
    await lg.assistants.delete(adder.assistant_id);
    expect((await mcp.listTools()).tools.map((t) => t.name)).toEqual(['add', 'fail', 'slow']);
  });
});

describe('tool input schemas', () => {
  it('keep an object schema, take any object without one, and put any other input under `input`', () => {
    const object = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { a: { type: 'number' } } };
    expect(toolInput(object)).toEqual({ inputSchema: object, wrapped: false });
    expect(toolInput(null)).toEqual({ inputSchema: { type: 'object' }, wrapped: false });
    const union = { $schema: 'https://json-schema.org/draft/2020-12/schema', anyOf: [{ type: 'string' }, { type: 'object' }] };
    expect(toolInput(union)).toEqual({
      inputSchema: { $schema: union.$schema, type: 'object', properties: { input: { anyOf: union.anyOf } }, required: ['input'] },
      wrapped: true,
    });
  });
});

describe('the transport over HTTP', () => {
  it('answers GET with 405 (no server-initiated stream) and DELETE with nothing to do', async () => {
    const get = await fetch(`${server.url}/mcp`, { headers: { accept: 'text/event-stream' } });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST, DELETE');
    expect((await fetch(`${server.url}/mcp`, { method: 'DELETE' })).status).toBe(204);
  });

  it('serves /mcp/ too, and answers a notification or a client response with 202 and no body', async () => {
    const init = await post(
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'curl', version: '1' } } },
      {},
      server.url,
      '/mcp/',
    );
    expect(init).toMatchObject({
      status: 200,
      type: expect.stringMatching(/^application\/json/),
      body: { jsonrpc: '2.0', id: 1, result: { protocolVersion: '2024-11-05' } },
    });
    // A version this server does not know gets the newest one.
    const newer = await post({
      jsonrpc: '2.0',
      id: 2,
      method: 'initialize',
      params: { protocolVersion: '2099-01-01', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    });
    expect(newer.body).toMatchObject({ result: { protocolVersion: '2025-11-25' } });
    expect(await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).toEqual({ status: 202, type: null, body: undefined });
    expect((await post({ jsonrpc: '2.0', id: 'x', result: {} })).status).toBe(202);
  });

  it('answers a body that is not JSON with a JSON-RPC parse error, not a 500', async () => {
    const res = await post('{"jsonrpc": "2.0", "id": 1, "method": ');
    expect(res).toMatchObject({ status: 400, body: { jsonrpc: '2.0', id: null, error: { code: -32700 } } });
  });

  it('answers JSON that is not a JSON-RPC request with invalid request (-32600) and an unknown method with -32601', async () => {
    expect(await post({ id: 1, method: 'ping' })).toMatchObject({ status: 400, body: { id: null, error: { code: -32600 } } });
    expect(await post({ jsonrpc: '2.0', id: 7, method: 'ping', params: [1] })).toMatchObject({ status: 400, body: { id: 7, error: { code: -32600 } } });
    expect(await post({ jsonrpc: '2.0', id: 3, method: 'resources/list' })).toMatchObject({ status: 200, body: { id: 3, error: { code: -32601 } } });
    expect(await post({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'add', arguments: [1, 2] } })).toMatchObject({
      status: 200,
      body: { id: 4, error: { code: -32602 } },
    });
  });

  it('requires Accept to name both application/json and text/event-stream (406) and a JSON body (415)', async () => {
    const ping = { jsonrpc: '2.0', id: 1, method: 'ping' };
    expect(await post(ping, { accept: 'application/json' })).toMatchObject({ status: 406, body: { error: { code: -32000 } } });
    expect((await post(ping, { accept: '*/*' })).status).toBe(406);
    expect((await post(JSON.stringify(ping), { 'content-type': 'text/plain' })).status).toBe(415);
  });

  it('refuses an MCP-Protocol-Version it does not speak', async () => {
    const res = await post({ jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-protocol-version': '1999-01-01' });
    expect(res).toMatchObject({ status: 400, body: { error: { code: -32000, message: expect.stringContaining('1999-01-01') } } });
  });

  it('answers a batch under 2025-03-26 (the default version) and refuses one under 2025-06-18', async () => {
    const batch = [
      { jsonrpc: '2.0', id: 1, method: 'ping' },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'add', arguments: { a: 1, b: 2 } } },
      { nonsense: true },
    ];
    const res = await post(batch);
    expect(res).toMatchObject({
      status: 200,
      body: [
        { id: 1, result: {} },
        { id: 2, result: { structuredContent: { sum: 3 } } },
        { id: null, error: { code: -32600 } },
      ],
    });
    expect(await post(batch, { 'mcp-protocol-version': '2025-06-18' })).toMatchObject({ status: 400, body: { error: { code: -32600 } } });
    expect(await post([])).toMatchObject({ status: 400, body: { error: { code: -32600 } } });
  });
});

describe('http.disable_mcp', () => {
  it('turns the route off, and /info says so', async () => {
    const flags = async (url: string) => ((await (await fetch(`${url}/info`)).json()) as { flags: Record<string, boolean> }).flags;
    expect(await flags(server.url)).toMatchObject({ mcp: true, crons: true });
    const off = await startTestServer(db.url, { configPath: project('langgraph.no-mcp.json'), schema: 'mcp_off', workers: 0 });
    try {
      expect((await post({ jsonrpc: '2.0', id: 1, method: 'ping' }, {}, off.url)).status).toBe(404);
      expect((await fetch(`${off.url}/mcp`)).status).toBe(404);
      expect(await flags(off.url)).toMatchObject({ mcp: false });
    } finally {
      await off.close();
    }
  }, 60_000);
});

describe('a graph without an input schema', () => {
  it('is a tool taking any object, and calling it reports why its graph could not be made', async () => {
    const factory = await startTestServer(db.url, { configPath: project('langgraph.factory.json'), schema: 'mcp_factory' });
    const { client } = await connect(factory.url);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => [t.name, t.inputSchema])).toEqual([
        ['add', expect.objectContaining({ type: 'object' })],
        ['exploding', { type: 'object' }],
      ]);
      const result = await client.callTool({ name: 'exploding', arguments: {} });
      expect(result).toMatchObject({ isError: true, content: [{ type: 'text', text: expect.stringContaining('factory exploded') }] });
    } finally {
      await client.close();
      await factory.close();
    }
  }, 60_000);
});

describe('custom auth', () => {
  let authed: RunningAgentServer;
  beforeAll(async () => {
    authed = await startTestServer(db.url, { configPath: project('langgraph.auth.json'), schema: 'mcp_auth' });
  }, 60_000);
  afterAll(async () => {
    await authed?.close();
  });

  it("authenticates /mcp like every route and runs tools as the request's user", async () => {
    const anonymous = await post({ jsonrpc: '2.0', id: 1, method: 'ping' }, {}, authed.url);
    expect(anonymous).toMatchObject({ status: 401, body: { detail: 'Missing bearer token' } });
    await expect(connect(authed.url)).rejects.toMatchObject({ code: 401 });

    const { client } = await connect(authed.url, { Authorization: 'Bearer user-a' });
    try {
      const result = await client.callTool({ name: 'whoami', arguments: {} });
      expect(result.structuredContent).toMatchObject({ user_id: 'user-a', org: 'acme' });
    } finally {
      await client.close();
    }
  });

  it('lists only the assistants the assistants:search handler lets the user see', async () => {
    const lg = new LangGraphClient({ apiUrl: authed.url, defaultHeaders: { Authorization: 'Bearer user-a' } });
    await lg.assistants.create({ graphId: 'add', name: 'for_a', metadata: { audience: ['user-a'] } });
    await lg.assistants.create({ graphId: 'add', name: 'for_b', metadata: { audience: ['user-b', 'staff'], tier: 'gold' } });
    const names = async (token: string) => {
      const { client } = await connect(authed.url, { Authorization: `Bearer ${token}` });
      try {
        return (await client.listTools()).tools.map((t) => t.name);
      } finally {
        await client.close();
      }
    };
    expect(await names('user-a')).toEqual(['add', 'whoami', 'for_a']);
    expect(await names('user-b')).toEqual(['add', 'whoami', 'for_b']);
  });
});
