/**
 * Bodies are never ignored (issue 25): every route of the gateway, of an agent server through the
 * gateway's deployment URL, and of an agent server reached directly (as `berth dev` serves it) is
 * sent the same body as `application/json`, as `text/plain` and with no content type, with and
 * without a credential header. With one, the other types are read as JSON: the answer is the JSON
 * one's. Without one, the answer is 415 naming application/json. Never a 5xx. Routes that read
 * their own body (tarball, multipart) refuse what is not theirs.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createTestDatabase, routesOf, sendRaw, type FuzzAnswer, type FuzzRoute, type TestDatabase } from '@berth/testing';
import { startTestServer } from '../../agent-runtime/src/__tests__/fixtures.js';
import { startAgentStack, type AgentStack } from './__tests__/agent-stack.js';

let testDb: TestDatabase;
let stack: AgentStack;
let devServer: Awaited<ReturnType<typeof startTestServer>>;

beforeAll(async () => {
  testDb = await createTestDatabase('gw_bodies');
  stack = await startAgentStack(testDb.url, { agent: { deploymentCredential: 'bodies-credential' } });
  devServer = await startTestServer(testDb.url, { workers: 0 });
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await devServer?.close();
  await testDb?.drop();
});

/** A body every strict schema refuses by name, and no schema-less route acts on. */
const PROBE = Buffer.from(JSON.stringify({ berth_probe: 1 }));

/** Routes that read their own body (documented with another request type than JSON). */
async function ownBodyRoutes(baseUrl: string): Promise<Set<string>> {
  const doc = (await (await fetch(`${baseUrl}/openapi.json`)).json()) as {
    paths: Record<string, Record<string, { requestBody?: { content: Record<string, unknown> } }>>;
  };
  const own = new Set<string>();
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(operations)) {
      if (op.requestBody && !('application/json' in op.requestBody.content)) own.add(`${method.toUpperCase()} ${path}`);
    }
  }
  return own;
}

const concrete = (route: FuzzRoute) => route.path.replace(/\{[^}]+\}/g, () => randomUUID());
/** Why a 415 says it refused: `detail`, or a JSON-RPC endpoint's (MCP, A2A) error message. */
const refusal = (a: FuzzAnswer) => {
  const body = JSON.parse(a.text) as { detail?: string; error?: { message?: string } };
  return body.detail ?? body.error?.message ?? '';
};
/** What must agree between two answers: status, and a validation error's content. */
const outcome = (a: FuzzAnswer) => ({ status: a.status, detail: a.status === 422 ? (JSON.parse(a.text) as { detail: unknown }).detail : undefined });

interface Walk {
  baseUrl: string;
  /** Routes listed by this server (defaults to baseUrl). */
  docsUrl?: string;
  credential: Record<string, string>;
  skip?: RegExp;
  /** Without a credential header, the answer comes before any body is read (the gateway's 401). */
  withoutCredential: number;
  /** Routes whose handlers need what this stack does not run: their 5xx is fine when JSON gets it too. */
  unserved?: RegExp;
}

/** Walks every route; returns what went wrong, one line each. */
async function walk({ baseUrl, docsUrl, credential, skip, withoutCredential, unserved }: Walk): Promise<string[]> {
  const routes = await routesOf(docsUrl ?? baseUrl, skip);
  const own = await ownBodyRoutes(docsUrl ?? baseUrl);
  expect(routes.length).toBeGreaterThan(10);
  const problems: string[] = [];
  for (const route of routes) {
    const path = concrete(route);
    const send = (headers: Record<string, string>) => sendRaw(baseUrl, { method: route.method, path, headers, body: PROBE });
    const where = `${route.method} ${route.path}`;
    const asJson = await send({ ...credential, 'content-type': 'application/json' });
    const typed = await send({ ...credential, 'content-type': 'text/plain' });
    const untyped = await send({ ...credential });
    const anonymous = [await send({ 'content-type': 'text/plain' }), await send({})];
    const failed = (answer: FuzzAnswer) => answer.status >= 500 && !(unserved?.test(route.path) && answer.status === asJson.status);
    for (const answer of [asJson, typed, untyped, ...anonymous]) if (failed(answer)) problems.push(`${where}: ${answer.status} ${answer.text}`);
    if (own.has(where)) {
      // Their own type or a refusal: text/plain is neither tarball nor multipart.
      for (const answer of [typed, untyped]) if (answer.status < 400) problems.push(`${where}: took a text body (${answer.status})`);
      continue;
    }
    for (const [how, answer] of [
      ['text/plain', typed],
      ['no content type', untyped],
    ] as const) {
      if (JSON.stringify(outcome(answer)) !== JSON.stringify(outcome(asJson)))
        problems.push(`${where} ${how}: ${answer.status} ${answer.text} where JSON got ${asJson.status} ${asJson.text}`);
    }
    for (const answer of anonymous) {
      const refused = answer.status === withoutCredential && (withoutCredential !== 415 || /application\/json/.test(refusal(answer)));
      if (!refused) problems.push(`${where} without a credential: ${answer.status} ${answer.text}`);
    }
  }
  return problems;
}

describe('a body without Content-Type: application/json', () => {
  it('is read as JSON or refused with 415 on every route of the gateway', async () => {
    // The deployment URL is walked below, with the agent server's routes.
    // Login flows call the control plane's AuthFlowService, which the fake does not serve; this
    // stack runs no sandbox-manager (503 saying how to enable sandboxes).
    const unserved = /^\/(v2\/auth|login|api\/v2\/sandboxes)\b/;
    expect(
      await walk({ baseUrl: stack.gateway.url, credential: { 'x-api-key': stack.key }, skip: /^\/(d\/|readyz)/, withoutCredential: 415, unserved }),
    ).toEqual([]);
  }, 120_000);

  it('is read as JSON on every route of an agent server through the gateway (the key was required)', async () => {
    expect(await walk({ baseUrl: stack.deploymentUrl, docsUrl: devServer.url, credential: { 'x-api-key': stack.key }, withoutCredential: 401 })).toEqual([]);
  }, 120_000);

  it('is read as JSON or refused with 415 on every route of an agent server reached directly', async () => {
    expect(await walk({ baseUrl: devServer.url, credential: { 'x-api-key': 'any' }, withoutCredential: 415 })).toEqual([]);
  }, 120_000);

  it('keeps what it says: metadata of a new thread and a search filter', async () => {
    const headers = { 'x-api-key': stack.key };
    const created = await fetch(`${stack.deploymentUrl}/threads`, { method: 'POST', headers, body: JSON.stringify({ metadata: { from: 'proxy' } }) });
    expect(await created.json()).toMatchObject({ metadata: { from: 'proxy' } });
    await fetch(`${stack.deploymentUrl}/threads`, { method: 'POST', headers, body: '{}' });
    const found = (await (
      await fetch(`${stack.deploymentUrl}/threads/search`, {
        method: 'POST',
        headers,
        body: new TextEncoder().encode(JSON.stringify({ metadata: { from: 'proxy' } })),
      })
    ).json()) as unknown[];
    expect(found).toHaveLength(1);
  });
});
