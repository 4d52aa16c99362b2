/**
 * Request fuzzing (fast-check, fixed seeds): random methods, paths of the route tables (from each
 * server's /openapi.json) with random parameters, random query strings, JSON and non-JSON bodies,
 * content types and encodings, credentials and other headers — at a real gateway, at an agent
 * server through the gateway's deployment URL, and at the agent server directly. No answer may be
 * a 5xx, and both servers must still be healthy afterwards.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import fc from 'fast-check';
import { startAgentStack, type AgentStack } from './__tests__/agent-stack.js';

let testDb: TestDatabase;
let stack: AgentStack;
let threadId: string;

interface Route {
  method: string;
  /** Template, e.g. `/threads/{thread_id}/state`. */
  path: string;
  query: string[];
}

interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer | undefined;
}

/** Routes of a server's OpenAPI document. */
async function routesOf(baseUrl: string, skip?: RegExp): Promise<Route[]> {
  const doc = (await (await fetch(`${baseUrl}/openapi.json`)).json()) as {
    paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>>;
  };
  return Object.entries(doc.paths)
    .filter(([path]) => !skip?.test(path))
    .flatMap(([path, operations]) =>
      Object.entries(operations).map(([method, op]) => ({
        method: method.toUpperCase(),
        path,
        query: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
      })),
    );
}

/** Sends exactly what was generated (fetch refuses bodies on GET and normalizes paths). */
function send(baseUrl: string, r: FuzzRequest): Promise<{ status: number; text: string }> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: r.method,
        path: url.pathname.replace(/\/$/, '') + r.path,
        // Node frames bodies of GET/HEAD/DELETE only with an explicit length.
        headers: r.body ? { ...r.headers, 'content-length': String(r.body.length) } : r.headers,
        timeout: 15_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer to ${r.method} ${r.path}`)));
    req.on('error', reject);
    req.end(r.body);
  });
}

/** Percent-encodes anything; lone surrogates become the WTF-8 bytes that do not decode as UTF-8. */
const pct = (s: string) => s.replace(/\p{Surrogate}/gu, '\uFFFD').split('\uFFFD').map(encodeURIComponent).join('%ED%A0%80');

/** Text values that have broken servers before: NULs, bad encodings, huge, numeric, empty. */
const nasty = fc.oneof(
  fc.constantFrom('', '%00', 'a%00b', '%ED%A0%80', '%ZZ', '%', '..', '%2F', '%2e%2e', '-1', '0', '1e309', 'null', 'true', 'x'.repeat(2000)),
  fc.string({ unit: 'binary', maxLength: 20 }).map(pct),
);

const jsonKeys = fc.constantFrom(
  'assistant_id', 'graph_id', 'input', 'metadata', 'values', 'limit', 'offset', 'name', 'thread_id', 'config', 'context', 'before',
  'checkpoint', 'checkpoint_id', 'as_node', 'expires_in', 'source', 'status', 'ids', 'command', 'stream_mode', 'version', 'if_exists', 'role',
);
const nested = (depth: number) => `${'['.repeat(depth)}${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}${']'.repeat(depth)}`;

const jsonBodies = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  fc.dictionary(jsonKeys, fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.constantFrom('echo', 'agent', '\u0000', '\ud800', -1, 1e308)), { maxKeys: 5 }).map((v) => JSON.stringify(v)),
  fc.integer({ min: 60, max: 6000 }).map(nested),
  fc.constantFrom('{"values":"x"}', '{"name":"\\u0000"}', '{"metadata":{"\\ud800":1}}', '{', '{"a":1,}', '[]', 'null', '"x"', '1', '{"__proto__":{"x":1}}'),
);

const bodies = fc.oneof(
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 5, arbitrary: jsonBodies.map((s) => Buffer.from(s)) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)) },
);

const contentTypes = fc.constantFrom(
  undefined, 'application/json', 'application/json; charset=utf-8', 'application/json; charset=latin1', 'application/json; charset=utf-16',
  'application/json; charset=bogus', 'application/vnd.api+json', 'text/plain', 'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x', 'application/gzip', '*/*', 'garbage',
);

/** A content-encoding header and whether the body really is encoded that way. */
const encodings = fc.record({
  name: fc.constantFrom(undefined, 'identity', 'gzip', 'deflate', 'br', 'GZIP', 'gzip, gzip', 'compress', 'zstd', 'x-unknown'),
  applied: fc.boolean(),
});

function encode(body: Buffer, name: string | undefined): Buffer {
  switch (name?.toLowerCase()) {
    case 'gzip':
      return gzipSync(body);
    case 'deflate':
      return deflateSync(body);
    case 'br':
      return brotliCompressSync(body);
    default:
      return body;
  }
}

function requests(routes: Route[], credentials: () => Record<string, string>): fc.Arbitrary<FuzzRequest> {
  return fc
    .record({
      route: fc.constantFrom(...routes),
      otherMethod: fc.oneof({ weight: 4, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD') }),
      param: fc.oneof(fc.constant(threadId), fc.uuid(), fc.constantFrom('echo', 'agent'), nasty),
      query: fc.array(fc.tuple(fc.oneof(fc.constant('limit'), fc.string({ maxLength: 8 }).map(pct), nasty), nasty), { maxLength: 4 }),
      routeQuery: fc.boolean(),
      body: bodies,
      contentType: contentTypes,
      encoding: encodings,
      authenticated: fc.boolean(),
      extra: fc.dictionary(fc.constantFrom('x-request-id', 'x-tenant-id', 'authorization', 'accept', 'x-api-key', 'last-event-id'), fc.string({ unit: 'grapheme-ascii', maxLength: 40 }), { maxKeys: 2 }),
    })
    .map((g) => {
      const path = g.route.path.replace(/\{[^}]+\}/g, () => g.param);
      const names = g.routeQuery ? g.route.query : [];
      const query = g.query.map(([k, v], i) => `${names[i] ?? k}=${v}`).join('&');
      const headers: Record<string, string> = { ...(g.authenticated ? credentials() : {}) };
      // Header values must be printable for node's client; odd ones are what servers get anyway.
      for (const [k, v] of Object.entries(g.extra)) headers[k] = v.replace(/[^\x20-\x7e]/g, '');
      if (g.contentType !== undefined) headers['content-type'] = g.contentType;
      if (g.encoding.name !== undefined) headers['content-encoding'] = g.encoding.name;
      const body = g.body && g.encoding.applied ? encode(g.body, g.encoding.name) : g.body;
      return { method: g.otherMethod ?? g.route.method, path: query ? `${path}?${query}` : path, headers, body };
    });
}

/**
 * This stack runs no sandbox-manager: the sandbox routes' answer past validation is a 503 saying
 * how to enable sandboxes (a refusal, not a failure; their validation is still fuzzed).
 */
function sandboxesOff(r: FuzzRequest, res: { status: number; text: string }): boolean {
  // HEAD answers carry no body to read the reason from.
  return res.status === 503 && r.path.startsWith('/api/v2/sandboxes/') && (r.method === 'HEAD' || /SANDBOX_MANAGER_GRPC_ADDRESS/.test(res.text));
}

/** Runs the property; returns how many answers had each status. */
async function fuzz(baseUrl: string, routes: Route[], credentials: () => Record<string, string>, seed: number, numRuns: number): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  await fc.assert(
    fc.asyncProperty(requests(routes, credentials), async (r) => {
      const res = await send(baseUrl, r);
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      if (res.status >= 500 && !sandboxesOff(r, res)) throw new Error(`${r.method} ${r.path} answered ${res.status}: ${res.text.slice(0, 300)}`);
    }),
    { seed, numRuns, endOnFailure: true },
  );
  return statuses;
}

/** The fuzzer is no use if everything bounces off authentication or routing: some requests must get through. */
function expectHandled(statuses: Map<number, number>): void {
  const count = (test: (status: number) => boolean) => [...statuses].filter(([s]) => test(s)).reduce((n, [, c]) => n + c, 0);
  expect({ succeeded: count((s) => s < 300) > 0, invalid: count((s) => s === 422) > 0 }).toEqual({ succeeded: true, invalid: true });
}

beforeAll(async () => {
  testDb = await createTestDatabase('gw_fuzz');
  stack = await startAgentStack(testDb.url);
  threadId = ((await (await fetch(`${stack.agent.url}/threads`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { thread_id: string }).thread_id;
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await testDb?.drop();
});

describe('fuzzed requests', () => {
  it('never make the gateway answer 5xx', async () => {
    // Login flows and the approval page call the control plane's AuthFlowService, which the fake
    // does not serve, and /readyz is a 503 for as long as the fake has no health service.
    const routes = await routesOf(stack.gateway.url, /^\/(v2\/auth|login|readyz)\b/);
    expectHandled(await fuzz(stack.gateway.url, routes, () => ({ 'x-api-key': stack.key }), 9001, 1000));
    expect((await fetch(`${stack.gateway.url}/healthz`)).status).toBe(200);
  }, 60_000);

  it('never make an agent server answer 5xx, called directly or through the deployment URL', async () => {
    const routes = await routesOf(stack.agent.url);
    expectHandled(await fuzz(stack.agent.url, routes, () => ({}), 9002, 1200));
    expectHandled(await fuzz(stack.deploymentUrl, routes, () => ({ 'x-api-key': stack.key }), 9003, 800));
    expect((await fetch(`${stack.agent.url}/ok?check_db=1`)).status).toBe(200);
    expect((await fetch(`${stack.deploymentUrl}/ok`, { headers: { 'x-api-key': stack.key } })).status).toBe(200);
  }, 60_000);
});
