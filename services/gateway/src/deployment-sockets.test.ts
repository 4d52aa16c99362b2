/**
 * WebSockets on deployment URLs (issue 25), with the `ws` client: tunnelled to the deployment's
 * agent server (here a WebSocket echo server that answers only with its deployment credential, as
 * agent servers do) after the checks of HTTP requests; the API key as a header or, for browsers,
 * as the subprotocol `berth.api-key.<key>`; a browser's Origin checked against the deployment's
 * CORS policy. From the attacker's side: no key, a key in the query, another tenant's key, a forged
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
  stack = await startAgentStack(testDb.url);
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
  stack.fake.routes.set(echoId, { tenantId: stack.tenantId, upstreamUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, customAuth: false, upstreamCredential: CREDENTIAL });
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
    expect(await connect(wsUrl(echoId), ['berth', `berth.api-key.${stack.key}`], { origin: 'https://evil.example' })).toEqual({ status: 403, body: expect.stringContaining('not allowed') });
    expect(upgrades).toEqual([]);
  });
});

describe('an attacker', () => {
  it('without a key, or with one in the query, gets 401 whatever the id names', async () => {
    const unauthorized = { status: 401, body: expect.any(String) };
    for (const url of [wsUrl(echoId), wsUrl(randomUUID()), wsUrl('not-an-id'), `${wsUrl(echoId)}?x-api-key=${stack.key}`, `${wsUrl(echoId)}?api_key=${stack.key}`]) {
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
});

it('an upgrade the agent server does not take is answered as it answered, not switched', async () => {
  const refused = await connect(`${stack.deploymentUrl.replace(/^http/, 'ws')}/threads/${randomUUID()}/state`, [], { 'x-api-key': stack.key });
  expect(refused).toMatchObject({ status: expect.any(Number) });
  expect((refused as { status: number }).status).toBeGreaterThanOrEqual(400);
});
