/**
 * WebSockets on deployment URLs (issue 25), with the `ws` client: tunnelled to the deployment's
 * agent server after the checks of HTTP requests — a real one's protocol v2 event stream (commands
 * and events through the tunnel), and a WebSocket echo server that answers only with its deployment
 * credential (as agent servers do) to see exactly what reaches the upstream; the API key as a
 * header or, for browsers, as the subprotocol `berth.api-key.<key>`; a browser's Origin checked
 * against the deployment's CORS policy. From the attacker's side: no key, a key in the query,
 * another tenant's key (on the socket and on the SSE stream of the same thread), a forged
 * deployment credential, a disallowed origin.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { startAgentStack, type AgentStack } from './__tests__/agent-stack.js';

let testDb: TestDatabase;
let stack: AgentStack;
let upstream: http.Server;
const upgrades: { url: string; headers: IncomingHttpHeaders }[] = [];
const echoId = randomUUID();
const CREDENTIAL = 'echo-credential';

beforeAll(async () => {
  testDb = await createTestDatabase('gw_ws');
  stack = await startAgentStack(testDb.url, { agent: { deploymentCredential: 'sockets-credential' } });
  const wss = new WebSocketServer({ noServer: true, handleProtocols: (offered) => (offered.has('app.v1') ? 'app.v1' : false) });
  upstream = http.createServer((req, res) => {
    // The CORS answer of a deployment allowing https://app.example only.
    if (req.method === 'OPTIONS' && req.headers.origin === 'https://app.example') res.setHeader('access-control-allow-origin', 'https://app.example');
    res.writeHead(req.method === 'OPTIONS' ? 204 : 404).end();
  });
  upstream.on('upgrade', (req, socket, head) => {
    upgrades.push({ url: req.url!, headers: req.headers });
    if (req.headers['x-berth-deployment-credential'] !== CREDENTIAL) {
      socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => ws.on('message', (data) => ws.send(`echo: ${String(data)}`)));
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  stack.fake.routes.set(echoId, {
    tenantId: stack.tenantId,
    upstreamUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    customAuth: false,
    upstreamCredential: CREDENTIAL,
  });
}, 60_000);
afterAll(async () => {
  await stack?.close();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
  await testDb?.drop();
});

const wsUrl = (id: string, rest = '/threads/t1/stream/events') => `${stack.gateway.url.replace(/^http/, 'ws')}/d/${id}${rest}`;

/** Opens a socket; resolves with it open, or with the HTTP answer that refused it. */
function connect(url: string, protocols: string[] = [], headers: Record<string, string> = {}): Promise<{ ws: WebSocket } | { status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { headers });
    ws.once('open', () => resolve({ ws }));
    ws.once('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString() }));
    });
    ws.once('error', reject);
  });
}

async function echo(ws: WebSocket, text: string): Promise<string> {
  const reply = new Promise<string>((resolve) => ws.once('message', (data) => resolve(String(data))));
  ws.send(text);
  return reply;
}

async function opened(url: string, protocols: string[] = [], headers: Record<string, string> = {}): Promise<WebSocket> {
  const result = await connect(url, protocols, headers);
  if (!('ws' in result)) throw new Error(`refused: ${result.status} ${result.body}`);
  return result.ws;
}

describe('a WebSocket on a deployment URL', () => {
  it('is tunnelled to the agent server with an API key header, which does not reach it', async () => {
    upgrades.length = 0;
    const ws = await opened(wsUrl(echoId, '/threads/t1/stream/events?since=3'), [], { 'x-api-key': stack.key, 'x-berth-deployment-credential': 'forged' });
    expect(await echo(ws, 'hello')).toBe('echo: hello');
    expect(await echo(ws, 'again')).toBe('echo: again');
    ws.close();
    expect(upgrades).toHaveLength(1);
    expect(upgrades[0]!.url).toBe('/threads/t1/stream/events?since=3');
    expect(upgrades[0]!.headers).toMatchObject({ 'x-berth-deployment-credential': CREDENTIAL, upgrade: 'websocket' });
    expect(upgrades[0]!.headers['x-api-key']).toBeUndefined();
  });

  it("takes the key as the subprotocol berth.api-key.<key>, answers berth and never passes the key's protocol on", async () => {
    upgrades.length = 0;
    const ws = await opened(wsUrl(echoId), ['berth', `berth.api-key.${stack.key}`]);
    expect(ws.protocol).toBe('berth');
    expect(await echo(ws, 'hi')).toBe('echo: hi');
    ws.close();
    expect(upgrades[0]!.headers['sec-websocket-protocol']).toBeUndefined();
    // The app's own subprotocols are the agent server's to choose.
    const app = await opened(wsUrl(echoId), ['app.v1', 'berth', `berth.api-key.${stack.key}`]);
    expect(app.protocol).toBe('app.v1');
    app.close();
    expect(upgrades[1]!.headers['sec-websocket-protocol']).toBe('app.v1');
  });

  it('checks a browser’s Origin against the deployment’s CORS policy', async () => {
    const ok = await opened(wsUrl(echoId), ['berth', `berth.api-key.${stack.key}`], { origin: 'https://app.example' });
    expect(await echo(ok, 'from the app')).toBe('echo: from the app');
    ok.close();
    upgrades.length = 0;
    expect(await connect(wsUrl(echoId), ['berth', `berth.api-key.${stack.key}`], { origin: 'https://evil.example' })).toEqual({
      status: 403,
      body: expect.stringContaining('not allowed'),
    });
    expect(upgrades).toEqual([]);
  });
});

/** The next message on `ws` that `match`es. */
function nextMessage(ws: WebSocket, match: (message: any) => boolean): Promise<any> {
  return new Promise((resolve) => {
    const onMessage = (data: unknown) => {
      const message = JSON.parse(String(data));
      if (!match(message)) return;
      ws.off('message', onMessage);
      resolve(message);
    };
    ws.on('message', onMessage);
  });
}

describe("a real agent server's protocol v2 WebSocket through the gateway", () => {
  it('takes commands and streams a run’s events to a browser app with the key as a subprotocol', async () => {
    const threadId = randomUUID();
    const ws = await opened(wsUrl(stack.deploymentId, `/threads/${threadId}/stream/events`), ['berth', `berth.api-key.${stack.key}`], {
      origin: 'https://app.example',
    });
    expect(ws.protocol).toBe('berth');
    ws.send(JSON.stringify({ id: 1, method: 'subscription.subscribe', params: { channels: ['values'] } }));
    expect(await nextMessage(ws, (m) => m.id === 1)).toMatchObject({ type: 'success', result: { subscription_id: expect.any(String) } });
    const replied = nextMessage(ws, (m) => m.type === 'event' && m.method === 'values' && m.params.data.messages?.length === 2);
    ws.send(
      JSON.stringify({ id: 2, method: 'run.start', params: { assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'through the tunnel' }] } } }),
    );
    expect(await nextMessage(ws, (m) => m.id === 2)).toMatchObject({ type: 'success', result: { run_id: expect.any(String) } });
    const event = await replied;
    expect(event).toMatchObject({ seq: expect.any(Number), event_id: expect.any(String) });
    expect(event.params.data.messages.map((m: { content: unknown }) => m.content)).toEqual(['through the tunnel', 'echo: through the tunnel']);
    ws.close();
  });

  it("is not another tenant's to open, nor its SSE stream: 404 as for an unknown deployment", async () => {
    const threadId = randomUUID();
    const run = await fetch(`${stack.deploymentUrl}/threads/${threadId}/commands`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': stack.key },
      body: JSON.stringify({ id: 1, method: 'run.start', params: { assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'mine' }] } } }),
    });
    expect(await run.json()).toMatchObject({ type: 'success' });
    const notFound = { detail: `Deployment ID ${stack.deploymentId} not found.` };
    expect(
      await connect(wsUrl(stack.deploymentId, `/threads/${threadId}/stream/events`), ['berth', `berth.api-key.${stack.otherTenantKey}`], {
        origin: 'https://app.example',
      }),
    ).toEqual({ status: 404, body: JSON.stringify(notFound) });
    const sse = await fetch(`${stack.deploymentUrl}/threads/${threadId}/stream/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': stack.otherTenantKey },
      body: JSON.stringify({ channels: ['values'] }),
    });
    expect({ status: sse.status, body: await sse.json() }).toEqual({ status: 404, body: notFound });
  });
});

describe('an attacker', () => {
  it('without a key, or with one in the query, gets 401 whatever the id names', async () => {
    const unauthorized = { status: 401, body: expect.any(String) };
    for (const url of [
      wsUrl(echoId),
      wsUrl(randomUUID()),
      wsUrl('not-an-id'),
      `${wsUrl(echoId)}?x-api-key=${stack.key}`,
      `${wsUrl(echoId)}?api_key=${stack.key}`,
    ]) {
      expect({ url, ...(await connect(url)) }).toEqual({ url, ...unauthorized });
    }
    expect(await connect(wsUrl(echoId), ['berth', 'berth.api-key.brt_key_wrong'])).toEqual(unauthorized);
  });

  it("with another tenant's key learns no more than of an unknown deployment", async () => {
    upgrades.length = 0;
    const unknownId = randomUUID();
    const foreign = await connect(wsUrl(echoId), ['berth', `berth.api-key.${stack.otherTenantKey}`]);
    const unknown = await connect(wsUrl(unknownId), ['berth', `berth.api-key.${stack.otherTenantKey}`]);
    expect(foreign).toEqual({ status: 404, body: JSON.stringify({ detail: `Deployment ID ${echoId} not found.` }) });
    expect(unknown).toEqual({ status: 404, body: JSON.stringify({ detail: `Deployment ID ${unknownId} not found.` }) });
    expect(await connect(wsUrl(echoId), [], { 'x-api-key': stack.otherTenantKey })).toMatchObject({ status: 404 });
    expect(upgrades).toEqual([]);
  });

  it('with a visitor’s console session, even from the gateway’s origin, opens nothing (a session is for Studio’s HTTP calls only)', async () => {
    upgrades.length = 0;
    const signIn = await fetch(`${stack.gateway.url}/v1/auth/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: stack.key }),
    });
    const cookie = signIn.headers.getSetCookie()[0]!.split(';')[0]!;
    expect(cookie).toMatch(/^berth_session=brt_ses_/);
    // The session works at the deployment URL over HTTP …
    expect((await fetch(`${stack.deploymentUrl}/info`, { headers: { cookie, origin: stack.gateway.url } })).status).toBe(200);
    // … but not for a WebSocket.
    expect(await connect(wsUrl(echoId), [], { cookie, origin: stack.gateway.url })).toEqual({
      status: 403,
      body: JSON.stringify({ detail: 'This route takes an API key or a bearer token, not a console session' }),
    });
    expect(upgrades).toEqual([]);
  });
});

it('an upgrade the agent server does not take is answered as it answered, not switched', async () => {
  const refused = await connect(`${stack.deploymentUrl.replace(/^http/, 'ws')}/threads/${randomUUID()}/state`, [], { 'x-api-key': stack.key });
  expect(refused).toMatchObject({ status: expect.any(Number) });
  expect((refused as { status: number }).status).toBeGreaterThanOrEqual(400);
});
