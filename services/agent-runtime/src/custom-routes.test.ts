/**
 * `http.app` of langgraph.json: the project's own Hono (or fetch-style) app served beside the
 * LangGraph API, as under the LangGraph JS server. Agent servers in child processes on the
 * `http` fixture (test-projects/http), real Postgres, called with fetch and the official SDK.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client } from '@langchain/langgraph-sdk';
import { silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { HttpAppLoadError } from './api/custom-routes.js';
import { startAgentServer, type AgentServerConfig } from './index.js';
import { spawnAgentServer, until } from './__tests__/fixtures.js';

const fixture = (name: string) => fileURLToPath(new URL(`../test-projects/http/${name}`, import.meta.url));
let db: TestDatabase;
const children: ChildProcess[] = [];
let url: string;
let authUrl: string;
let plainUrl: string;

async function serve(config: string, schema: string, more: Partial<AgentServerConfig> = {}): Promise<string> {
  const { child, url } = await spawnAgentServer(db.url, { workers: 1, config: { configPath: fixture(config), schema, ...more } });
  children.push(child);
  return url;
}

async function call(path: string, init: RequestInit & { base?: string } = {}) {
  const res = await fetch(`${init.base ?? url}${path}`, init);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Plain text stays text.
  }
  return { status: res.status, headers: res.headers, body };
}

beforeAll(async () => {
  db = await createTestDatabase('agent');
  [url, authUrl, plainUrl] = await Promise.all([
    serve('langgraph.json', 'agent', { webhooks: { secret: `whsec_${randomBytes(32).toString('base64')}` } }),
    serve('langgraph.auth.json', 'agent_auth'),
    serve('langgraph.plain.json', 'agent_plain'),
  ]);
}, 90_000);
afterAll(async () => {
  for (const child of children) child.kill();
  await db?.drop();
});

describe('a Hono http.app', () => {
  it('answers its own routes with their status, headers and body', async () => {
    const item = await call('/shop/items/42', { headers: { 'x-tag': 'red' } });
    expect(item).toMatchObject({ status: 200, body: { item: '42', tag: 'red' } });
    expect(item.headers.get('x-tag-out')).toBe('red');
    expect(item.headers.get('x-shop-mw')).toBe('on');

    const order = await call('/shop/orders', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sku: 'b-1', qty: 2 }) });
    expect(order).toMatchObject({ status: 201, body: { received: { sku: 'b-1', qty: 2 } } });

    const cookies = await fetch(`${url}/shop/cookies`);
    expect(cookies.headers.getSetCookie()).toEqual(['a=1; Path=/', 'b=2; Path=/']);
  });

  it('serves a route on a path under the built-in API, and keeps the built-in routes working', async () => {
    expect(await call('/threads/special')).toMatchObject({ status: 200, body: { special: true } });
    const client = new Client({ apiUrl: url });
    const thread = await client.threads.create();
    expect((await client.threads.get(thread.thread_id)).thread_id).toBe(thread.thread_id);
  });

  it("runs the app's middleware around built-in routes: its headers, its answer in their place", async () => {
    const info = await call('/info');
    expect(info.status).toBe(200);
    expect(info.headers.get('x-shop-mw')).toBe('on');

    expect(await call('/info?closed')).toMatchObject({ status: 503, body: { status: 'closed' } });

    // A run with a JSON body goes through the middleware to the built-in route intact.
    const client = new Client({ apiUrl: url });
    const thread = await client.threads.create();
    const result = (await client.runs.wait(thread.thread_id, 'echo', { input: { messages: [{ role: 'user', content: 'hi' }] } })) as {
      messages: { content: string }[];
    };
    expect(result.messages.at(-1)?.content).toBe('echo: hi');
  });

  it("answers a path nobody serves with the server's 404, not the app's notFound", async () => {
    expect(await call('/no/such/path')).toMatchObject({ status: 404, body: { detail: 'Not Found' } });
  });

  it("keeps an HTTPException's status and turns a crash into a 500", async () => {
    expect(await call('/shop/teapot')).toMatchObject({ status: 418, body: 'short and stout' });
    expect((await call('/shop/crash')).status).toBe(500);
    // The server is still fine afterwards.
    expect((await call('/ok')).status).toBe(200);
  });

  it('streams a response as it is written', async () => {
    const res = await fetch(`${url}/shop/ticks`);
    const chunks: string[] = [];
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) chunks.push(decoder.decode(chunk));
    expect(chunks.join('')).toBe('tick 0\ntick 1\ntick 2\ntick 3\ntick 4\n');
    expect(chunks.length).toBeGreaterThanOrEqual(3);
  });

  it("delivers a run's relative webhook to the app's route", async () => {
    const client = new Client({ apiUrl: url });
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'echo', { input: { messages: [{ role: 'user', content: 'hook me' }] }, webhook: '/shop/hooks' });
    const last = await until(
      async () => (await call('/shop/hooks/last')).body as { id: string | null; body: { run_id: string; status: string } } | null,
      (hook) => hook?.body.run_id === run.run_id,
    );
    expect(last).toMatchObject({ id: expect.any(String), body: { run_id: run.run_id, status: 'success' } });
  }, 20_000);

  it('lets a route call this server with `new Client()` and no apiUrl', async () => {
    expect(await call('/shop/loopback')).toMatchObject({ status: 200, body: { reply: 'echo: via loopback' } });
  }, 20_000);
});

describe('http.app with custom auth', () => {
  it("authenticates custom routes with the project's auth handler", async () => {
    const missing = await call('/shop/items/1', { base: authUrl });
    expect(missing).toMatchObject({ status: 401, body: { detail: 'Missing bearer token' } });
    expect(missing.headers.get('www-authenticate')).toBe('Bearer');
    expect(await call('/shop/items/1', { base: authUrl, headers: { authorization: 'Bearer user-z' } })).toMatchObject({
      status: 401,
      body: { detail: 'Invalid token' },
    });
    expect(await call('/shop/items/1', { base: authUrl, headers: { authorization: 'Bearer user-a' } })).toMatchObject({ status: 200, body: { item: '1' } });
  });

  it("hands a Hono route the authenticated user as c.get('auth'): {user, scopes}", async () => {
    expect(await call('/shop/whoami', { base: authUrl, headers: { authorization: 'Bearer user-a' } })).toMatchObject({
      status: 200,
      body: { user: { identity: 'user-a', org: 'acme' }, scopes: ['threads:write', 'threads:read'] },
    });
    expect(await call('/shop/whoami')).toMatchObject({ status: 200, body: null });
  });

  it('keeps /ok and /info public, and built-in routes authenticated', async () => {
    expect((await call('/ok', { base: authUrl })).status).toBe(200);
    const info = await call('/info', { base: authUrl });
    expect(info.status).toBe(200);
    expect(info.headers.get('x-shop-mw')).toBe('on');
    expect((await call('/threads/search', { base: authUrl, method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(401);
    const a = new Client({ apiUrl: authUrl, defaultHeaders: { authorization: 'Bearer user-a' } });
    const thread = await a.threads.create();
    expect(thread.metadata).toMatchObject({ owner: 'user-a' });
  });
});

describe('a fetch-style http.app that is not Hono', () => {
  it('answers its routes first; its 404s go on to the built-in API', async () => {
    expect(await call('/plain', { base: plainUrl, method: 'POST', body: 'x' })).toMatchObject({ status: 200, body: { plain: true, method: 'POST' } });
    expect((await call('/info', { base: plainUrl })).status).toBe(200);
    expect(await call('/nothing', { base: plainUrl })).toMatchObject({ status: 404, body: { detail: 'Not Found' } });
  });
});

it('refuses to start when http.app names an export that is not an app', async () => {
  await expect(
    startAgentServer({ configPath: fixture('langgraph.bad-app.json'), databaseUrl: db.url, host: '127.0.0.1', port: 0, workers: 0 }, silentLogger()),
  ).rejects.toThrow(HttpAppLoadError);
  await expect(
    startAgentServer({ configPath: fixture('langgraph.bad-app.json'), databaseUrl: db.url, host: '127.0.0.1', port: 0, workers: 0 }, silentLogger()),
  ).rejects.toThrow(/http\.app "\.\/src\/plain\.ts:server": export "server" is not an app/);
});
