/**
 * Browsers apply no CORS to WebSockets: any page may open one to any server, with the user's
 * network position. The agent server (`berth dev`, a deployment's) checks a browser's Origin on the
 * protocol v2 WebSocket against the project's `http.cors` itself (here allowing
 * https://app.example only), from the attacker's page's side.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { WebSocket } from 'ws';
import type { RunningAgentServer } from './server.js';
import { startTestServer } from './__tests__/fixtures.js';

const project = fileURLToPath(new URL('../test-projects/cors/langgraph.json', import.meta.url));

let db: TestDatabase;
let server: RunningAgentServer;
let threadId: string;

beforeAll(async () => {
  db = await createTestDatabase('agent_protocol_origin');
  server = await startTestServer(db.url, { configPath: project });
  const res = await fetch(`${server.url}/threads`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  threadId = ((await res.json()) as { thread_id: string }).thread_id;
}, 60_000);

afterAll(async () => {
  await server?.close();
  await db?.drop();
});

/** Opens the thread's socket from `origin` (none: not a browser) and asks for its state; or the HTTP refusal. */
function stateOver(origin: string | undefined): Promise<{ answer: unknown } | { status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${server.url.replace(/^http/, 'ws')}/threads/${threadId}/stream/events`, origin ? { headers: { origin } } : {});
    ws.once('open', () => ws.send(JSON.stringify({ id: 1, method: 'state.get', params: {} })));
    ws.once('message', (data) => {
      resolve({ answer: JSON.parse(String(data)) });
      ws.close();
    });
    ws.once('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString() }));
    });
    ws.once('error', reject);
  });
}

it("refuses a page of an origin the project's http.cors does not allow before switching protocols", async () => {
  for (const origin of ['https://evil.example', 'null', 'https://app.example.evil.example']) {
    expect({ origin, ...(await stateOver(origin)) }).toEqual({
      origin,
      status: 403,
      body: JSON.stringify({ detail: `Origin ${origin} is not allowed by the project's http.cors` }),
    });
  }
});

it('opens the socket for an allowed page, and for clients that are not browsers', async () => {
  for (const origin of ['https://app.example', undefined]) {
    expect({ origin, ...(await stateOver(origin)) }).toEqual({ origin, answer: expect.objectContaining({ type: 'success', id: 1 }) });
  }
});
