/**
 * Custom authentication and authorization (`auth.path` in langgraph.json), driven by the official
 * SDK against real Postgres. The fixture (test-projects/auth) accepts `Bearer user-a|user-b`,
 * stamps `metadata.owner` on threads and filters threads by owner.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client } from '@langchain/langgraph-sdk';
import { silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { AuthLoadError } from './auth/index.js';
import { startAgentServer, type RunningAgentServer } from './index.js';

const fixture = (name: string) => fileURLToPath(new URL(`../test-projects/auth/${name}`, import.meta.url));
let db: TestDatabase;
let server: RunningAgentServer;
let noStudio: RunningAgentServer;
const as = (token: string, url = server.url) => new Client({ apiUrl: url, defaultHeaders: { Authorization: `Bearer ${token}` } });
let a: Client;
let b: Client;

type Who = { user_id: string | null; permissions: string[]; org: string | null; kind: string | null; same_user: boolean };

async function call(path: string, init: { method?: string; token?: string; headers?: Record<string, string>; body?: unknown; url?: string } = {}) {
  const res = await fetch(`${init.url ?? server.url}${path}`, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: {
      ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
      ...init.headers,
    },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

beforeAll(async () => {
  db = await createTestDatabase('agent');
  const common = { databaseUrl: db.url, host: '127.0.0.1', port: 0, leaseMs: 1000 };
  // As behind the gateway, which has already checked the caller's API key.
  server = await startAgentServer({ ...common, configPath: fixture('langgraph.json'), workers: 2, trustStudioHeader: true }, silentLogger());
  noStudio = await startAgentServer(
    { ...common, configPath: fixture('langgraph.no-studio.json'), schema: 'agent_nostudio', workers: 1, trustStudioHeader: true },
    silentLogger(),
  );
  a = as('user-a');
  b = as('user-b');
}, 60_000);
afterAll(async () => {
  await server?.close();
  await noStudio?.close();
  await db?.drop();
});

describe('authentication', () => {
  it('leaves /ok, /info and the docs open', async () => {
    expect((await call('/ok')).status).toBe(200);
    expect((await call('/info')).body).toMatchObject({ metadata: { server: 'berth' } });
    expect((await call('/openapi.json')).status).toBe(200);
  });

  it("refuses a missing or unknown token with the handler's status, detail and headers", async () => {
    const missing = await call('/threads/search', { body: {} });
    expect(missing).toMatchObject({ status: 401, body: { detail: 'Missing bearer token' } });
    expect(missing.headers.get('www-authenticate')).toBe('Bearer');
    expect(await call('/threads/search', { body: {}, token: 'user-z' })).toMatchObject({ status: 401, body: { detail: 'Invalid token' } });
    expect((await call('/assistants/echo', { token: 'user-z' })).status).toBe(401);
    await expect(as('user-z').threads.create()).rejects.toThrow(/401/);
  });

  it('answers 500 when authenticate throws something else or returns no identity, without leaking the error', async () => {
    const crash = await call('/threads/search', { body: {}, token: 'crash' });
    expect(crash.status).toBe(500);
    // Only the request id, to find the reason in the server log.
    expect(crash.body).toEqual({ detail: 'Internal Server Error', request_id: crash.headers.get('x-request-id') });
    expect(JSON.stringify(crash.body)).not.toContain('token store unreachable');
    const nameless = await call('/threads/search', { body: {}, token: 'nameless' });
    expect(nameless.status).toBe(500);
    expect(nameless.body).toEqual({ detail: 'Internal Server Error', request_id: expect.any(String) });
  });
});

describe('threads belong to their creator', () => {
  it('stamps the owner and hides the thread from everyone else (404, not in searches)', async () => {
    const suite = randomUUID();
    const thread = await a.threads.create({ metadata: { suite, owner: 'someone-else' } });
    expect(thread.metadata).toMatchObject({ suite, owner: 'user-a' });

    expect((await a.threads.get(thread.thread_id)).thread_id).toBe(thread.thread_id);
    await expect(b.threads.get(thread.thread_id)).rejects.toThrow(/404/);
    await expect(b.threads.update(thread.thread_id, { metadata: { x: 1 } })).rejects.toThrow(/404/);
    await expect(b.threads.getState(thread.thread_id)).rejects.toThrow(/404/);
    await expect(b.threads.getHistory(thread.thread_id)).rejects.toThrow(/404/);
    await expect(b.threads.copy(thread.thread_id)).rejects.toThrow(/404/);
    await expect(b.threads.delete(thread.thread_id)).rejects.toThrow(/404/);

    expect((await a.threads.search({ metadata: { suite } })).map((t) => t.thread_id)).toEqual([thread.thread_id]);
    expect(await b.threads.search({ metadata: { suite } })).toEqual([]);
    expect((await call('/threads/count', { body: { metadata: { suite } }, token: 'user-b' })).body).toBe(0);
    expect((await call('/threads/count', { body: { metadata: { suite } }, token: 'user-a' })).body).toBe(1);

    // Creating with the id of a thread the user may not see is a conflict, even with do_nothing.
    await expect(b.threads.create({ threadId: thread.thread_id, ifExists: 'do_nothing' })).rejects.toThrow(/409/);
    expect((await a.threads.create({ threadId: thread.thread_id, ifExists: 'do_nothing' })).thread_id).toBe(thread.thread_id);
    const patched = await a.threads.update(thread.thread_id, { metadata: { topic: 'mine' } });
    expect(patched.metadata).toMatchObject({ owner: 'user-a', topic: 'mine' });
  });

  it('runs the graph for its owner, who the graph sees; others cannot run it or see its runs', async () => {
    const thread = await a.threads.create();
    const who = (await a.runs.wait(thread.thread_id, 'whoami', { input: {} })) as Who;
    expect(who).toEqual({ user_id: 'user-a', permissions: ['threads:write', 'threads:read'], org: 'acme', kind: null, same_user: true });

    const [run] = await a.runs.list(thread.thread_id);
    expect(run!.metadata).toMatchObject({ owner: 'user-a' });
    const configurable = ((run as unknown as { kwargs: unknown }).kwargs as { config: { configurable: Record<string, unknown> } }).config.configurable;
    // The graph saw the whole user (above); run responses carry only its id, never what the handler returned.
    expect(configurable).toMatchObject({ langgraph_auth_user_id: 'user-a' });
    expect(configurable).not.toHaveProperty('langgraph_auth_user');
    expect(configurable).not.toHaveProperty('graph_auth_user');

    await expect(b.runs.wait(thread.thread_id, 'whoami', { input: {} })).rejects.toThrow(/404/);
    await expect(b.runs.create(thread.thread_id, 'whoami', { input: {}, ifNotExists: 'create' })).rejects.toThrow(/404/);
    await expect(b.runs.list(thread.thread_id)).rejects.toThrow(/404/);
    await expect(b.runs.get(thread.thread_id, run!.run_id)).rejects.toThrow(/404/);
    await expect(b.runs.join(thread.thread_id, run!.run_id)).rejects.toThrow(/404/);
    await expect(b.runs.cancel(thread.thread_id, run!.run_id)).rejects.toThrow(/404/);
    await expect(b.runs.delete(thread.thread_id, run!.run_id)).rejects.toThrow(/404/);
    expect((await a.runs.get(thread.thread_id, run!.run_id)).run_id).toBe(run!.run_id);
  });

  it('gives threads that runs create (threadless, if_not_exists) to the user who ran them', async () => {
    expect(((await b.runs.wait(null, 'whoami', { input: {} })) as Who).user_id).toBe('user-b');
    const threadId = randomUUID();
    await b.runs.wait(threadId, 'whoami', { input: {}, ifNotExists: 'create' });
    expect((await b.threads.get(threadId)).metadata).toMatchObject({ owner: 'user-b', graph_id: 'whoami' });
    await expect(a.threads.get(threadId)).rejects.toThrow(/404/);
  });
});

describe('crons belong to their creator', () => {
  it('stamps the owner and user_id, hides the cron from others (404, not searched or counted), and refuses crons on their threads', async () => {
    const cron = await a.crons.create('whoami', { schedule: '0 9 * * *', enabled: false });
    expect(cron).toMatchObject({ metadata: { owner: 'user-a' }, user_id: 'user-a' });
    expect((await call(`/runs/crons/${cron.cron_id}`, { token: 'user-a' })).status).toBe(200);
    expect((await call(`/runs/crons/${cron.cron_id}`, { token: 'user-b' })).status).toBe(404);
    expect((await call(`/runs/crons/${cron.cron_id}`, { token: 'user-b', method: 'PATCH', body: { enabled: true } })).status).toBe(404);
    await expect(b.crons.delete(cron.cron_id)).rejects.toThrow(/404/);
    expect((await a.crons.search()).map((c) => c.cron_id)).toContain(cron.cron_id);
    expect((await b.crons.search()).map((c) => c.cron_id)).not.toContain(cron.cron_id);
    expect(await b.crons.count()).toBe(0);
    const thread = await a.threads.create();
    await expect(b.crons.createForThread(thread.thread_id, 'whoami', { schedule: '0 9 * * *' })).rejects.toThrow(/404/);
    expect((await a.crons.createForThread(thread.thread_id, 'whoami', { schedule: '0 9 * * *' })).thread_id).toBe(thread.thread_id);
    await a.crons.delete(cron.cron_id);
  });
});

describe('authorization results', () => {
  it('answers 403 Forbidden when a handler returns false', async () => {
    const assistant = await a.assistants.create({ graphId: 'echo' });
    const res = await call(`/assistants/${assistant.assistant_id}`, { method: 'DELETE', token: 'user-a' });
    expect(res).toMatchObject({ status: 403, body: { detail: 'Forbidden' } });
    expect((await a.assistants.get(assistant.assistant_id)).assistant_id).toBe(assistant.assistant_id);
  });

  it("answers a handler's HTTPException with its status, message and headers", async () => {
    const res = await call('/assistants/echo', { method: 'PATCH', token: 'user-a', body: { name: 'x' } });
    expect(res).toMatchObject({ status: 418, body: { detail: 'No updates today' } });
    expect(res.headers.get('x-teapot')).toBe('yes');
  });

  it('applies $contains (one value, all of several) and $eq filters to searches', async () => {
    const suite = randomUUID();
    const make = async (name: string, metadata: Record<string, unknown>) =>
      (await a.assistants.create({ graphId: 'echo', name, metadata: { suite, ...metadata } })).name;
    await make('for-a', { audience: ['user-a', 'staff'] });
    await make('scalar-a', { audience: 'user-a' });
    await make('b-staff-gold', { audience: ['staff', 'user-b', 'x'], tier: 'gold' });
    await make('b-only-gold', { audience: ['user-b'], tier: 'gold' });
    await make('b-staff-silver', { audience: ['user-b', 'staff'], tier: 'silver' });
    const names = async (c: Client) => (await c.assistants.search({ metadata: { suite } })).map((x) => x.name).sort();
    expect(await names(a)).toEqual(['for-a']);
    expect(await names(b)).toEqual(['b-staff-gold']);
    expect((await call('/assistants/count', { body: { metadata: { suite } }, token: 'user-b' })).body).toBe(1);
  });
});

describe('LangGraph Studio', () => {
  const studio = () => new Client({ apiUrl: server.url, defaultHeaders: { 'x-auth-scheme': 'langsmith' } });

  it('acts as the Studio user without authenticate; authorization handlers still apply', async () => {
    const thread = await studio().threads.create();
    expect(thread.metadata).toMatchObject({ owner: 'langgraph-studio-user' });
    const who = (await studio().runs.wait(thread.thread_id, 'whoami', { input: {} })) as Who;
    expect(who).toMatchObject({ user_id: 'langgraph-studio-user', kind: 'StudioUser', permissions: [], same_user: true });
    const mine = await a.threads.create();
    await expect(studio().threads.get(mine.thread_id)).rejects.toThrow(/404/);
  });

  it('goes through authenticate when disable_studio_auth is set', async () => {
    const res = await call('/threads', { url: noStudio.url, body: {}, headers: { 'x-auth-scheme': 'langsmith' } });
    expect(res).toMatchObject({ status: 401, body: { detail: 'Missing bearer token' } });
    const thread = await as('user-b', noStudio.url).threads.create();
    expect(thread.metadata).toMatchObject({ owner: 'user-b' });
  });
});

describe('studio header without a gateway in front', () => {
  it('is not trusted by default: the request goes through authenticate', async () => {
    const direct = await startAgentServer(
      { configPath: fixture('langgraph.json'), databaseUrl: db.url, schema: 'agent_direct', host: '127.0.0.1', port: 0, workers: 0 },
      silentLogger(),
    );
    try {
      const res = await call('/threads', { url: direct.url, body: {}, headers: { 'x-auth-scheme': 'langsmith' } });
      expect(res).toMatchObject({ status: 401, body: { detail: 'Missing bearer token' } });
    } finally {
      await direct.close();
    }
  });
});

describe('loading auth.path', () => {
  it('stops the server with AuthLoadError when the export is missing or not an Auth', async () => {
    const start = (name: string) =>
      startAgentServer({ configPath: fixture(name), databaseUrl: db.url, host: '127.0.0.1', port: 0, workers: 0 }, silentLogger());
    await expect(start('langgraph.missing-export.json')).rejects.toThrow(AuthLoadError);
    await expect(start('langgraph.missing-export.json')).rejects.toThrow(/no export "nope".*auth/);
    await expect(start('langgraph.bad-export.json')).rejects.toThrow(/not an Auth instance/);
  });
});
