/**
 * The deployment URL proxy (`/d/{deployment_id}/…`) against fake agent servers (node:http) and a
 * fake DeploymentService that says where each deployment's traffic goes: what is forwarded and
 * what is not, streaming without buffering, disconnects, every error answer, custom auth, the
 * routing cache, and the official LangGraph SDK through it.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ManualClock } from '@berth/clock';
import { randomUUID } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { Client } from '@langchain/langgraph-sdk';
import { silentLogger } from '@berth/log';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { FakeDeploymentService } from './__tests__/fake-deployments.js';
import { start, type RunningGateway } from './index.js';
import { testGatewayConfig } from './__tests__/test-config.js';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

interface Upstream {
  name: string;
  url: string;
  seen: Seen[];
  /** Resolves when a `/hang` request's connection closed. */
  hangClosed: Promise<void>;
  /** While set, `/runs/stream` waits for it before each update event (the test paces the stream). */
  pace?: () => Promise<void>;
  close(): Promise<void>;
}

/** Lets a stream write its next event only once the test allows it. */
function pacer() {
  const waiting: (() => void)[] = [];
  let allowed = 0;
  return {
    next: () => new Promise<void>((resolve) => (allowed > 0 ? (allowed--, resolve()) : waiting.push(resolve))),
    allow(): void {
      const writer = waiting.shift();
      if (writer) writer();
      else allowed++;
    },
  };
}

async function startUpstream(name: string): Promise<Upstream> {
  const seen: Seen[] = [];
  let onHangClosed: () => void = () => undefined;
  const hangClosed = new Promise<void>((resolve) => (onHangClosed = resolve));
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    answer(req, res).catch((error: unknown) => res.destroy(error as Error));
  });
  async function answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    if (!req.url!.startsWith('/hang')) for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString();
    seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
    const path = req.url!.split('?')[0];
    if (path === '/runs/stream') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const runId = randomUUID();
      res.write(`event: metadata\ndata: ${JSON.stringify({ run_id: runId })}\n\n`);
      for (const i of [1, 2]) {
        await upstream.pace?.();
        res.write(`event: updates\ndata: ${JSON.stringify({ echo: { messages: [{ type: 'ai', content: `echo ${i}: ${body.length}` }] } })}\n\n`);
      }
      res.end();
      return;
    }
    if (path === '/hang') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: metadata\ndata: {}\n\n');
      res.once('close', () => onHangClosed());
      return;
    }
    if (path === '/assistants/search') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify([{ assistant_id: randomUUID(), graph_id: 'echo', name: name }]));
      return;
    }
    if (path === '/reset') {
      // Dies before answering, as an agent server killed mid-request does.
      req.socket.destroy();
      return;
    }
    if (path === '/leak-credential') {
      res.writeHead(200, { 'content-type': 'application/json', 'x-berth-deployment-credential': String(req.headers['x-berth-deployment-credential']) });
      res.end('{}');
      return;
    }
    if (path === '/teapot') {
      res.writeHead(418, {
        'content-type': 'application/json',
        'x-upstream': name,
        'set-cookie': ['a=1', 'b=2'],
        'x-upstream-hop': '1',
        connection: 'keep-alive, x-upstream-hop',
      });
      res.end(JSON.stringify({ detail: 'short and stout' }));
      return;
    }
    if (path === '/plant-session') {
      res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': ['berth_session=planted; Path=/; HttpOnly', 'theirs=2; Path=/'] });
      res.end('{}');
      return;
    }
    if (path === '/auth-only') {
      if (req.headers.authorization !== 'Bearer user-token') {
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ detail: 'Invalid token' }));
        return;
      }
    }
    res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': name });
    res.end(JSON.stringify({ upstream: name, method: req.method, url: req.url, headers: req.headers, body }));
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const upstream: Upstream = {
    name,
    url: `http://127.0.0.1:${port}`,
    seen,
    hangClosed,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return upstream;
}

let testDb: TestDatabase;
let fake: FakeDeploymentService;
let gateway: RunningGateway;
let upstreamA: Upstream;
let upstreamB: Upstream;
let tenantA: string;
let tenantB: string;
let keyA: string;
let keyB: string;
let tokenA: string;

/** A deployment id routed as given (a fresh id per test: routing is cached for a second). */
function route(
  upstreamUrl: string,
  options: { tenantId?: string; customAuth?: boolean; upstreamCredential?: string; status?: string; statusMessage?: string } = {},
): string {
  const id = randomUUID();
  fake.routes.set(id, { ...options, tenantId: options.tenantId ?? tenantA, upstreamUrl, customAuth: options.customAuth ?? false });
  return id;
}

/** A raw request through node:http (fetch refuses Host and Connection headers). */
function rawRequest(
  path: string,
  headers: Record<string, string>,
  method = 'GET',
  body = '',
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${gateway.url}${path}`, { method, headers });
    req.on('response', (answer) => {
      let text = '';
      answer.on('data', (c: Buffer) => (text += c.toString()));
      answer.on('end', () => resolve({ status: answer.statusCode!, headers: answer.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function get(path: string, headers: Record<string, string> = { 'x-api-key': keyA }, init: RequestInit = {}) {
  const res = await fetch(`${gateway.url}${path}`, { headers, ...init });
  const text = await res.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.status, headers: res.headers, body };
}

beforeAll(async () => {
  testDb = await createTestDatabase('gw_proxy');
  fake = await new FakeDeploymentService().start();
  [upstreamA, upstreamB] = await Promise.all([startUpstream('a'), startUpstream('b')]);
  gateway = await start(testGatewayConfig(testDb.url, fake.address), silentLogger());
  tenantA = (await gateway.store.createTenant({ name: 'a' })).id;
  tenantB = (await gateway.store.createTenant({ name: 'b' })).id;
  const a = await gateway.store.createApiKey({ tenantId: tenantA, name: 'dev' });
  keyA = a.key;
  keyB = (await gateway.store.createApiKey({ tenantId: tenantB, name: 'dev' })).key;
  tokenA = (await gateway.store.issueAccessToken({ apiKeyId: a.record.id, tenantId: tenantA, ttlSeconds: 600 })).token;
});
afterAll(async () => {
  await gateway.close();
  await Promise.all([upstreamA.close(), upstreamB.close()]);
  await fake.close();
  await testDb.drop();
});

describe('forwarding', () => {
  it('forwards method, path, query and body; drops platform credentials and hop-by-hop headers; returns the answer as is', async () => {
    const id = route(`${upstreamA.url}/`);
    const res = await rawRequest(
      `/d/${id}/threads/t%2F1/runs?limit=5&x=%C3%A9`,
      {
        'x-api-key': keyA,
        'x-tenant-id': tenantA,
        'content-type': 'application/json',
        'x-custom': 'kept',
        'x-hop': 'dropped',
        connection: 'keep-alive, x-hop',
        // Not where the platform is: agent servers must not build URLs from it.
        host: 'evil.example',
        'x-forwarded-proto': 'gopher',
      },
      'POST',
      JSON.stringify({ input: { messages: [] } }),
    );
    expect(res.status).toBe(200);
    expect(res.headers['x-upstream']).toBe('a');
    const echoed = JSON.parse(res.body) as { method: string; url: string; headers: Record<string, string>; body: string };
    expect(echoed).toMatchObject({ method: 'POST', url: '/threads/t%2F1/runs?limit=5&x=%C3%A9', body: '{"input":{"messages":[]}}' });
    expect(echoed.headers).toMatchObject({
      'x-custom': 'kept',
      'content-type': 'application/json',
      'x-forwarded-prefix': `/d/${id}`,
      'x-forwarded-proto': 'http',
      'x-forwarded-host': new URL(gateway.url).host,
      host: new URL(upstreamA.url).host,
    });
    expect(echoed.headers['x-request-id']).toBe(res.headers['x-request-id']);
    for (const name of ['x-api-key', 'x-tenant-id', 'authorization', 'x-hop']) expect(echoed.headers[name]).toBeUndefined();

    // The deployment root, a HEAD and an upstream error status with its headers.
    expect((await get(`/d/${id}`)).body).toMatchObject({ url: '/' });
    expect((await get(`/d/${id}?q=1`)).body).toMatchObject({ url: '/?q=1' });
    expect((await fetch(`${gateway.url}/d/${id}/ok`, { method: 'HEAD', headers: { 'x-api-key': keyA } })).status).toBe(200);
    const teapot = await get(`/d/${id}/teapot`);
    expect(teapot.status).toBe(418);
    expect(teapot.body).toEqual({ detail: 'short and stout' });
    expect(teapot.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
    expect(teapot.headers.get('x-upstream-hop')).toBeNull();
  });

  it('streams large request bodies through without a Content-Length', async () => {
    const id = route(upstreamA.url);
    const big = 'x'.repeat(3 * 1024 * 1024);
    const stream = new ReadableStream({
      start(controller) {
        const bytes = new TextEncoder().encode(big);
        for (let at = 0; at < bytes.length; at += 65536) controller.enqueue(bytes.subarray(at, at + 65536));
        controller.close();
      },
    });
    const res = await fetch(`${gateway.url}/d/${id}/store/items`, {
      method: 'PUT',
      headers: { 'x-api-key': keyA, 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { body: string }).body.length).toBe(big.length);
  });

  it('sends the deployment’s credential upstream; a client can neither supply nor read it', async () => {
    const id = route(upstreamA.url, { upstreamCredential: 'cred-of-a' });
    const res = await get(`/d/${id}/ok`, { 'x-api-key': keyA, 'x-berth-deployment-credential': 'forged' });
    expect(res.status).toBe(200);
    expect(res.body.headers['x-berth-deployment-credential']).toBe('cred-of-a');
    const leaked = await get(`/d/${id}/leak-credential`);
    expect(leaked.status).toBe(200);
    expect(leaked.headers.get('x-berth-deployment-credential')).toBeNull();

    // With the project's own auth every other header passes, but not this one.
    const custom = route(upstreamA.url, { customAuth: true, upstreamCredential: 'cred-of-custom' });
    const passed = await get(`/d/${custom}/ok`, { 'x-berth-deployment-credential': 'forged', authorization: 'Bearer user-token' });
    expect(passed.body.headers).toMatchObject({ 'x-berth-deployment-credential': 'cred-of-custom', authorization: 'Bearer user-token' });

    // Without a credential in the routing, a client-sent one is still dropped.
    const bare = route(upstreamA.url, { customAuth: true });
    expect((await get(`/d/${bare}/ok`, { 'x-berth-deployment-credential': 'forged' })).body.headers['x-berth-deployment-credential']).toBeUndefined();
  });

  it('accepts a bearer token of the deployment’s tenant', async () => {
    const id = route(upstreamA.url);
    const res = await get(`/d/${id}/ok`, { authorization: `Bearer ${tokenA}` });
    expect(res.status).toBe(200);
    expect(res.body.headers.authorization).toBeUndefined();
  });
});

describe('answers of its own', () => {
  it('401 without or with a bad credential, 404 for another tenant’s key, unknown, deleted or malformed ids', async () => {
    const id = route(upstreamA.url);
    expect(await get(`/d/${id}/ok`, {})).toMatchObject({ status: 401, body: { detail: expect.stringContaining('Missing credentials') } });
    expect(await get(`/d/${id}/ok`, { 'x-api-key': 'brt_key_notarealkeynotarealkeynotarealk' })).toMatchObject({
      status: 401,
      body: { detail: 'Invalid API key' },
    });
    expect(await get(`/d/${id}/ok`, { 'x-api-key': keyB })).toMatchObject({ status: 404, body: { detail: `Deployment ID ${id} not found.` } });
    const unknown = randomUUID();
    expect(await get(`/d/${unknown}/ok`)).toMatchObject({ status: 404, body: { detail: `Deployment ID ${unknown} not found.` } });
    expect(await get('/d/not-a-uuid/ok')).toMatchObject({ status: 404, body: { detail: 'Deployment ID not-a-uuid not found.' } });
    expect((await get('/d/')).status).toBe(404);
    // Nothing reached an agent server.
    expect(upstreamA.seen.filter((s) => s.headers['x-forwarded-prefix'] === `/d/${id}`)).toEqual([]);
  });

  it('the same 401 without valid credentials whether the deployment exists, is unknown or the id is malformed', async () => {
    const existing = route(upstreamA.url);
    const ids = [existing, randomUUID(), 'not-a-uuid', ''];
    const credentialSets: Record<string, string>[] = [{}, { 'x-api-key': 'brt_key_notarealkeynotarealkeynotarealk' }, { authorization: 'Bearer nope' }];
    for (const credentials of credentialSets) {
      const answers = await Promise.all(
        ids.map(async (id) => {
          // One request id for all, so that every header may be compared.
          const res = await rawRequest(`/d/${id}/ok`, { ...credentials, 'x-request-id': 'same' });
          const { date: _date, ...headers } = res.headers;
          return { status: res.status, headers, body: res.body };
        }),
      );
      expect(answers[0]!.status).toBe(401);
      for (const answer of answers.slice(1)) expect(answer).toEqual(answers[0]);
    }
    expect(upstreamA.seen.filter((s) => s.headers['x-forwarded-prefix'] === `/d/${existing}`)).toEqual([]);
  });

  it('503 with Retry-After while the agent server restarts, without trying to reach it', async () => {
    const id = route(upstreamA.url, { status: 'UNHEALTHY', statusMessage: 'the agent server exited (code 1); restarting' });
    const res = await get(`/d/${id}/ok`);
    expect(res).toMatchObject({ status: 503, body: { detail: expect.stringContaining('restarting') } });
    expect(res.headers.get('retry-after')).toBe('5');
    expect(res.body.detail).toContain('exited (code 1)');
    expect(upstreamA.seen.filter((s) => s.headers['x-forwarded-prefix'] === `/d/${id}`)).toEqual([]);
    expect((await get(`/d/${id}/ok`, {})).status).toBe(401);
    // A custom-auth project's callers may be anyone: they learn that it restarts, not why.
    const custom = route(upstreamA.url, { customAuth: true, status: 'UNHEALTHY', statusMessage: 'the agent server exited (code 1)' });
    const open = await get(`/d/${custom}/ok`, {});
    expect(open).toMatchObject({ status: 503, body: { detail: expect.stringContaining('restarting') } });
    expect(open.body.detail).not.toContain('exited');
    expect(open.headers.get('retry-after')).toBe('5');
  });

  it('503 with Retry-After when the agent server refuses or drops the connection; 502 for a malformed answer', async () => {
    const gone = await startUpstream('gone');
    await gone.close();
    for (const [upstream, path] of [
      [gone.url, '/ok'],
      [upstreamA.url, '/reset'],
    ] as const) {
      const res = await get(`/d/${route(upstream)}${path}`, { 'x-api-key': keyA, 'content-type': 'application/json' }, { method: 'POST', body: '{}' });
      expect(res).toMatchObject({ status: 503, body: { detail: expect.stringContaining('restarting') } });
      expect(res.headers.get('retry-after')).toBe('5');
      expect(res.body.detail).not.toContain(upstream);
    }
    const garbage = net.createServer((socket) => socket.end('this is not HTTP\r\n\r\n'));
    await new Promise<void>((resolve) => garbage.listen(0, '127.0.0.1', resolve));
    try {
      const res = await get(`/d/${route(`http://127.0.0.1:${(garbage.address() as AddressInfo).port}`)}/ok`);
      expect(res).toMatchObject({ status: 502, body: { detail: expect.stringContaining('malformed') } });
    } finally {
      garbage.close();
    }
  });

  it('503 while no revision serves', async () => {
    const waiting = route('');
    const res = await get(`/d/${waiting}/ok`);
    expect(res).toMatchObject({ status: 503, body: { detail: expect.stringContaining('no revision serving yet') } });
    expect(res.headers.get('retry-after')).toBe('5');
    // Without a key, a 401 comes first: the state of a deployment is not for outsiders.
    expect((await get(`/d/${waiting}/ok`, {})).status).toBe(401);
  });

  it('503 without Retry-After, saying why, when the latest revision failed and none serves (waiting will not help)', async () => {
    const why = 'the latest revision 6f1c failed to build (BUILD_FAILED: graph.ts: Unexpected token) and no revision serves';
    const failed = route('', { status: 'FAILED', statusMessage: why });
    const res = await get(`/d/${failed}/ok`);
    expect(res).toMatchObject({ status: 503, body: { detail: `Deployment ${failed} cannot answer: ${why}. Deploy a fixed revision to bring it up.` } });
    expect(res.headers.get('retry-after')).toBeNull();
    expect((await get(`/d/${failed}/ok`, {})).status).toBe(401);
    // A custom-auth project's callers learn that it failed, not the build's output.
    const custom = route('', { customAuth: true, status: 'FAILED', statusMessage: why });
    const open = await get(`/d/${custom}/ok`, {});
    expect(open).toMatchObject({
      status: 503,
      body: { detail: `Deployment ${custom} cannot answer: its latest revision failed and no revision serves. Deploy a fixed revision to bring it up.` },
    });
    expect(open.headers.get('retry-after')).toBeNull();
    // An older revision that still serves is served (LATEST_FAILED).
    const older = route(upstreamA.url, { status: 'LATEST_FAILED', statusMessage: 'the latest revision 6f1c failed to build; revision 1a2b still serves' });
    expect((await get(`/d/${older}/ok`)).status).toBe(200);
  });
});

describe('streaming', () => {
  it('delivers SSE events as the agent server writes them, not at the end', async () => {
    const id = route(upstreamA.url);
    // The upstream writes each update only when the test allows it: an event read before that
    // was delivered while the stream was still open, not buffered to its end.
    const paced = pacer();
    upstreamA.pace = paced.next;
    try {
      const res = await fetch(`${gateway.url}/d/${id}/runs/stream`, {
        method: 'POST',
        headers: { 'x-api-key': keyA, 'content-type': 'application/json' },
        body: '{"assistant_id":"echo"}',
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/event-stream');
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      /** Reads until `event` has arrived; the stream must not have ended before. */
      const readUntil = async (event: string) => {
        while (!text.includes(event)) {
          const { done, value } = await reader.read();
          if (done) throw new Error(`the stream ended before ${event}: ${text}`);
          text += decoder.decode(value, { stream: true });
        }
      };
      await readUntil('event: metadata');
      expect(text).not.toContain('echo');
      paced.allow();
      await readUntil('echo 1');
      expect(text).not.toContain('echo 2');
      paced.allow();
      await readUntil('echo 2');
      expect((await reader.read()).done).toBe(true);
      expect(text.match(/^event: /gm)).toHaveLength(3);
    } finally {
      delete upstreamA.pace;
    }
  });

  it('aborts the upstream request when the client disconnects', async () => {
    const id = route(upstreamB.url);
    const controller = new AbortController();
    const res = await fetch(`${gateway.url}/d/${id}/hang`, { headers: { 'x-api-key': keyA }, signal: controller.signal });
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('event: metadata');
    controller.abort();
    // The upstream never ends this response: only the gateway's abort closes it (or the test times out).
    await upstreamB.hangClosed;
  });
});

describe('custom auth', () => {
  it('passes every header to the project’s own auth handler, and its refusal back', async () => {
    const id = route(upstreamA.url, { customAuth: true });
    const noKey = await get(`/d/${id}/auth-only`, {});
    expect(noKey).toMatchObject({ status: 401, body: { detail: 'Invalid token' } });
    const ok = await get(`/d/${id}/auth-only`, { authorization: 'Bearer user-token', 'x-api-key': 'the-projects-own-key' });
    expect(ok.status).toBe(200);
    expect(ok.body.headers).toMatchObject({ authorization: 'Bearer user-token', 'x-api-key': 'the-projects-own-key' });
  });
});

describe('console sessions', () => {
  /** Signs `key` in as the console does; the session token (as the browser keeps it) and the CSRF token. */
  async function consoleSession(key: string): Promise<{ session: string; csrf: string }> {
    const signIn = await fetch(`${gateway.url}/v1/auth/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: key }),
    });
    const session = /^berth_session=([^;]+)/.exec(signIn.headers.getSetCookie()[0] ?? '')?.[1] ?? '';
    expect(session).toMatch(/^brt_ses_/);
    return { session, csrf: ((await signIn.json()) as { csrf_token: string }).csrf_token };
  }

  it('act as their key at the tenant’s deployment URLs (Studio), the CSRF token needed on unsafe methods; neither reaches the agent server', async () => {
    const { session, csrf } = await consoleSession(keyA);
    const cookie = `berth_session=${session}; theirs=1`;
    const id = route(upstreamA.url);
    const read = await get(`/d/${id}/echo`, { cookie, origin: gateway.url, 'sec-fetch-site': 'same-origin' });
    expect(read.status).toBe(200);
    expect(read.body.headers.cookie).toBe('theirs=1');
    // Unsafe methods: without the CSRF token, or with another, refused before the agent server sees them.
    const before = upstreamA.seen.length;
    for (const headers of [{}, { 'x-csrf-token': 'not-it' }] as Record<string, string>[]) {
      const refused = await get(
        `/d/${id}/echo`,
        { cookie, origin: gateway.url, 'content-type': 'application/json', ...headers },
        { method: 'POST', body: '{}' },
      );
      expect(refused).toMatchObject({ status: 403, body: { detail: expect.stringMatching(/x-csrf-token/) } });
    }
    expect(upstreamA.seen.length).toBe(before);
    const write = await get(
      `/d/${id}/echo`,
      { cookie, origin: gateway.url, 'x-csrf-token': csrf, 'content-type': 'application/json' },
      { method: 'POST', body: '{}' },
    );
    expect(write.status).toBe(200);
    expect(write.body.headers).not.toHaveProperty('x-csrf-token');
    expect(JSON.stringify(upstreamA.seen)).not.toContain(session);
    expect(JSON.stringify(upstreamA.seen)).not.toContain(csrf);
    // Another tenant's session learns nothing of the deployment.
    const other = await consoleSession(keyB);
    expect(await get(`/d/${id}/echo`, { cookie: `berth_session=${other.session}` })).toMatchObject({ status: 404 });
  });

  it('are refused from any page but the gateway’s own: another origin, another site, a deployment’s sandboxed page (origin "null")', async () => {
    const { session, csrf } = await consoleSession(keyA);
    const cookie = `berth_session=${session}`;
    const id = route(upstreamA.url);
    const before = upstreamA.seen.length;
    const attackers: Record<string, string>[] = [
      { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' },
      { origin: gateway.url.replace('127.0.0.1', 'localhost'), 'sec-fetch-site': 'same-site' },
      { origin: 'null', 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'cross-site' },
    ];
    for (const from of attackers) {
      for (const method of ['GET', 'POST']) {
        const answer = await get(`/d/${id}/echo`, { cookie, 'x-csrf-token': csrf, ...from }, method === 'POST' ? { method, body: '{}' } : {});
        expect({ from, method, status: answer.status, detail: answer.body.detail }).toEqual({
          from,
          method,
          status: 403,
          detail: 'A console session is accepted only from the gateway’s own pages',
        });
      }
    }
    expect(upstreamA.seen.length).toBe(before);
  });

  it('count for nothing at a project with its own auth handler, which gets every other header; agent servers never set one', async () => {
    const { session } = await consoleSession(keyA);
    const custom = route(upstreamA.url, { customAuth: true });
    // The project's handler decides: the session is no credential of its, and it never sees it.
    expect(await get(`/d/${custom}/auth-only`, { cookie: `berth_session=${session}` })).toMatchObject({ status: 401, body: { detail: 'Invalid token' } });
    const passed = await get(`/d/${custom}/echo`, { cookie: `berth_session=${session}; theirs=1`, 'x-csrf-token': 'theirs' });
    expect(passed.body.headers).toMatchObject({ cookie: 'theirs=1', 'x-csrf-token': 'theirs' });
    const alone = await get(`/d/${custom}/echo`, { cookie: `berth_session=${session}` });
    expect(alone.body.headers).not.toHaveProperty('cookie');
    expect(JSON.stringify(upstreamA.seen)).not.toContain(session);
    const planted = await get(`/d/${custom}/plant-session`, {});
    expect(planted.headers.getSetCookie()).toEqual(['theirs=2; Path=/']);
    // Its pages run in an origin of their own, not the console's (see console-session-browser.test.ts).
    expect(planted.headers.get('content-security-policy')).toBe('sandbox allow-downloads allow-forms allow-modals allow-popups allow-scripts');
  });
});

describe('routing cache', () => {
  // Exact expiry instants are proxy/resolver.test.ts's (on a ManualClock); this proves the proxy's
  // cache expires on the system clock at all.
  it('switches to the new upstream after a redeploy, and 404s a deleted deployment, once the cached route expires', async () => {
    const id = route(upstreamA.url);
    expect((await get(`/d/${id}/ok`)).body.upstream).toBe('a');
    fake.routes.set(id, { tenantId: tenantA, upstreamUrl: upstreamB.url, customAuth: false });
    await until('traffic to reach the new upstream', async () => ((await get(`/d/${id}/ok`)).body.upstream === 'b' ? true : undefined), 10_000, 50);
    fake.routes.delete(id);
    await until('the deleted deployment to answer 404', async () => ((await get(`/d/${id}/ok`)).status === 404 ? true : undefined), 10_000, 50);
  });

  // The exact rule (lookups that start while one is on its way share it) is proxy/resolver.test.ts's,
  // with the answer held by the test; this is the smoke test over HTTP. Its gateway's clock stands
  // still, so a request arriving after the answer reuses it however long the machine takes.
  it('asks the control plane once for many concurrent requests to one deployment', async () => {
    const still = await start({ ...testGatewayConfig(testDb.url, fake.address), clock: new ManualClock() }, silentLogger());
    const id = route(upstreamA.url);
    fake.resolveDelayMs = 200;
    try {
      const before = fake.resolveCalls;
      const answers = await Promise.all(
        Array.from({ length: 25 }, async () => {
          const res = await fetch(`${still.url}/d/${id}/ok`, { headers: { 'x-api-key': keyA } });
          await res.text();
          return res;
        }),
      );
      expect(answers.map((a) => a.status)).toEqual(Array.from({ length: 25 }, () => 200));
      expect(fake.resolveCalls - before).toBe(1);
    } finally {
      fake.resolveDelayMs = 0;
      await still.close();
    }
  });
});

describe('deployment URLs', () => {
  it('point at the platform’s address, whatever Host and X-Forwarded-* the client sends', async () => {
    const res = await rawRequest(
      '/v2/deployments',
      { 'x-api-key': keyA, 'content-type': 'application/json', host: 'evil.example', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' },
      'POST',
      JSON.stringify({ name: 'hosted-here', source: 'internal_source' }),
    );
    expect(res.status).toBe(201);
    const deployment = JSON.parse(res.body) as { id: string; deployment_url: string };
    expect(deployment.deployment_url).toBe(`${gateway.url}/d/${deployment.id}`);
  });
});

describe('LangGraph SDK', () => {
  it('works with Client({ apiUrl: deployment_url, apiKey })', async () => {
    const created = await fetch(`${gateway.url}/v2/deployments`, {
      method: 'POST',
      headers: { 'x-api-key': keyA, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'sdk-agent', source: 'internal_source' }),
    });
    const deployment = (await created.json()) as { id: string; deployment_url: string };
    fake.routes.set(deployment.id, { tenantId: tenantA, upstreamUrl: upstreamB.url, customAuth: false });

    const client = new Client({ apiUrl: deployment.deployment_url, apiKey: keyA });
    const assistants = await client.assistants.search({ graphId: 'echo' });
    expect(assistants).toEqual([expect.objectContaining({ graph_id: 'echo', name: 'b' })]);
    const events: { event: string; data: unknown }[] = [];
    for await (const part of client.runs.stream(null, 'echo', { input: { messages: [{ role: 'user', content: 'hi' }] }, streamMode: 'updates' })) {
      events.push(part as { event: string; data: unknown });
    }
    expect(events.map((e) => e.event)).toEqual(['metadata', 'updates', 'updates']);
    const stream = upstreamB.seen.filter((s) => s.url === '/runs/stream').at(-1)!;
    expect(JSON.parse(stream.body)).toMatchObject({ assistant_id: 'echo', stream_mode: 'updates' });
    expect(stream.headers['x-api-key']).toBeUndefined();

    const refused = new Client({ apiUrl: deployment.deployment_url, apiKey: keyB, callerOptions: { maxRetries: 0 } });
    await expect(refused.assistants.search()).rejects.toThrow(/404/);
  });
});
