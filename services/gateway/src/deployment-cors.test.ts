/**
 * Browsers calling deployments through the gateway (issue 25): a CORS preflight needs no
 * credential and is answered by the deployment's `http.cors` (the test project allows
 * https://app.example and loopback pages, with credentials); what reaches the agent server is a
 * preflight and nothing else; a preflight to an unknown, malformed, pending or other tenant's
 * deployment answers exactly as a deployment without `http.cors`; actual answers carry the
 * deployment's headers once; the gateway's own API follows GATEWAY_CORS_ALLOW_ORIGINS.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { startTestServer } from '../../agent-runtime/src/__tests__/fixtures.js';
import { startAgentStack, type AgentStack } from './__tests__/agent-stack.js';
import { loadGatewayConfig } from './index.js';

const browserProject = fileURLToPath(new URL('../test-projects/browser/langgraph.json', import.meta.url));
const echoProject = fileURLToPath(new URL('../../agent-runtime/test-projects/echo/langgraph.json', import.meta.url));

let testDb: TestDatabase;
let stack: AgentStack;
let plainAgent: Awaited<ReturnType<typeof startTestServer>>;
let recorder: http.Server;
const recorded: { method: string; url: string; headers: IncomingHttpHeaders; body: string }[] = [];
/** Deployment ids: the tenant's without `http.cors`, another tenant's, one not serving yet, one whose agent server is down, one recording. */
const ids = { plain: randomUUID(), foreign: randomUUID(), pending: randomUUID(), down: randomUUID(), recording: randomUUID() };

beforeAll(async () => {
  testDb = await createTestDatabase('gw_cors');
  stack = await startAgentStack(testDb.url, {
    agent: { configPath: browserProject, deploymentCredential: 'browser-credential' },
    gateway: { corsAllowOrigins: ['https://console.example'] },
  });
  plainAgent = await startTestServer(testDb.url, { configPath: echoProject, workers: 0, deploymentCredential: 'plain-credential' });
  recorder = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      recorded.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString() });
      res.writeHead(204, { 'access-control-allow-origin': 'https://recorded.example' }).end();
    });
  });
  await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
  const closed = http.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const downUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
  await new Promise((resolve) => closed.close(resolve));
  const plain = { upstreamUrl: plainAgent.url, customAuth: false, upstreamCredential: 'plain-credential' };
  stack.fake.routes.set(ids.plain, { tenantId: stack.tenantId, ...plain });
  stack.fake.routes.set(ids.foreign, { tenantId: stack.otherTenantId, ...plain });
  stack.fake.routes.set(ids.pending, { tenantId: stack.tenantId, upstreamUrl: '', customAuth: false });
  stack.fake.routes.set(ids.down, { tenantId: stack.tenantId, upstreamUrl: downUrl, customAuth: false });
  stack.fake.routes.set(ids.recording, {
    tenantId: stack.tenantId,
    upstreamUrl: `http://127.0.0.1:${(recorder.address() as AddressInfo).port}`,
    customAuth: false,
    upstreamCredential: 'recorder-credential',
  });
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await plainAgent?.close();
  await new Promise((resolve) => recorder?.close(resolve));
  await testDb?.drop();
});

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  /** Header name → how many times it came. */
  counts: Record<string, number>;
  body: string;
}

/** Exactly this request (fetch would add headers and refuse bodies on OPTIONS). */
function send(url: string, method: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method, headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const counts: Record<string, number> = {};
          for (let i = 0; i < res.rawHeaders.length; i += 2) counts[res.rawHeaders[i]!.toLowerCase()] = (counts[res.rawHeaders[i]!.toLowerCase()] ?? 0) + 1;
          resolve({ status: res.statusCode!, headers: res.headers, counts, body: Buffer.concat(chunks).toString() });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const preflight = (url: string, origin: string, extra: Record<string, string> = {}) =>
  send(url, 'OPTIONS', { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-api-key', ...extra });

/** What a browser reads of an answer: its status and CORS headers. */
const cors = (a: Answer) => ({
  status: a.status,
  ...Object.fromEntries(Object.entries(a.headers).filter(([name]) => name.startsWith('access-control-') || name === 'vary')),
});

describe('a preflight to a deployment URL', () => {
  it("needs no credential: the deployment's http.cors answers it", async () => {
    for (const origin of ['https://app.example', 'http://127.0.0.1:9303']) {
      expect(cors(await preflight(`${stack.deploymentUrl}/threads`, origin))).toEqual({
        status: 204,
        'access-control-allow-origin': origin,
        'access-control-allow-credentials': 'true',
        'access-control-allow-methods': 'GET, POST, PUT, PATCH, DELETE, OPTIONS',
        'access-control-allow-headers': 'content-type, x-api-key',
        'access-control-max-age': '60',
        vary: 'Origin',
      });
    }
    // An origin it does not list learns nothing it could use.
    expect(cors(await preflight(`${stack.deploymentUrl}/threads`, 'https://evil.example'))).toEqual({ status: 204, vary: 'Origin' });
  });

  it('reaches the agent server as a bare preflight: no body, credential, cookie, other header or query', async () => {
    recorded.length = 0;
    const answer = await preflight(`${stack.gateway.url}/d/${ids.recording}/threads/t1/runs?token=secret`, 'https://app.example', {
      'x-api-key': stack.key,
      authorization: 'Bearer nope',
      cookie: 'session=s',
      'x-custom': 'payload',
      'content-type': 'application/json',
    }).then(() =>
      send(
        `${stack.gateway.url}/d/${ids.recording}/threads`,
        'OPTIONS',
        { origin: 'https://app.example', 'access-control-request-method': 'DELETE', 'x-berth-deployment-credential': 'forged' },
        '{"run":"me"}',
      ),
    );
    expect(cors(answer)).toEqual({ status: 204, 'access-control-allow-origin': 'https://recorded.example' });
    expect(recorded.map(({ method, url, body }) => ({ method, url, body }))).toEqual([
      { method: 'OPTIONS', url: '/threads/t1/runs', body: '' },
      { method: 'OPTIONS', url: '/threads', body: '' },
    ]);
    const allowed = [
      'origin',
      'access-control-request-method',
      'access-control-request-headers',
      'x-berth-deployment-credential',
      'host',
      'connection',
      'x-forwarded-for',
      'x-forwarded-host',
      'x-forwarded-proto',
      'x-forwarded-prefix',
      'x-request-id',
    ];
    for (const { headers } of recorded) {
      expect(Object.keys(headers).filter((name) => !allowed.includes(name))).toEqual([]);
      expect(headers['x-berth-deployment-credential']).toBe('recorder-credential');
    }
  });

  it('tells no more about a deployment than its CORS answer: unknown, malformed, pending, down and foreign ids answer alike', async () => {
    const ask = (id: string) => preflight(`${stack.gateway.url}/d/${id}/threads`, 'https://evil.example');
    const reference = await ask(ids.plain);
    expect(cors(reference)).toEqual({
      status: 204,
      'access-control-allow-origin': '*',
      'access-control-allow-methods': 'GET, POST, PUT, PATCH, DELETE, OPTIONS',
      'access-control-allow-headers': 'content-type,x-api-key',
    });
    const shape = (a: Answer) => ({
      ...cors(a),
      names: Object.keys(a.headers)
        .filter((n) => n !== 'date')
        .sort(),
      body: a.body,
    });
    for (const id of [randomUUID(), 'not-a-deployment', ids.foreign, ids.pending, ids.down]) {
      expect({ id, ...shape(await ask(id)) }).toEqual({ id, ...shape(reference) });
    }
  });

  it('is only what browsers send: an OPTIONS without Access-Control-Request-Method needs a credential', async () => {
    const res = await send(`${stack.deploymentUrl}/threads`, 'OPTIONS', { origin: 'https://app.example' });
    expect(res.status).toBe(401);
  });
});

describe('answers through a deployment URL', () => {
  it("carry the deployment's CORS headers, once each", async () => {
    const res = await send(
      `${stack.deploymentUrl}/threads/search`,
      'POST',
      { origin: 'https://app.example', 'x-api-key': stack.key, 'content-type': 'application/json' },
      '{}',
    );
    expect(res.status).toBe(200);
    expect(cors(res)).toMatchObject({ 'access-control-allow-origin': 'https://app.example', 'access-control-allow-credentials': 'true', vary: 'Origin' });
    expect(res.headers['access-control-expose-headers']).toContain('x-pagination-total');
    for (const name of ['access-control-allow-origin', 'access-control-allow-credentials', 'access-control-expose-headers', 'vary'])
      expect({ name, count: res.counts[name] }).toEqual({ name, count: 1 });
    const evil = await send(
      `${stack.deploymentUrl}/threads/search`,
      'POST',
      { origin: 'https://evil.example', 'x-api-key': stack.key, 'content-type': 'application/json' },
      '{}',
    );
    expect(evil.headers['access-control-allow-origin']).toBeUndefined();
  });

  it("of the gateway's own (no key, unknown deployment) may be read by any page, without credentials", async () => {
    for (const url of [`${stack.deploymentUrl}/threads`, `${stack.gateway.url}/d/${randomUUID()}/threads`]) {
      const res = await send(url, 'GET', { origin: 'https://evil.example' });
      expect(res.status).toBe(401);
      expect(cors(res)).toMatchObject({ 'access-control-allow-origin': '*' });
      expect(res.headers['access-control-allow-credentials']).toBeUndefined();
    }
  });
});

describe("the gateway's own API", () => {
  it('answers preflights of the operator’s origins and its own, before authentication', async () => {
    for (const origin of ['https://console.example', stack.gateway.url]) {
      const res = await preflight(`${stack.gateway.url}/v2/deployments`, origin);
      expect(cors(res)).toEqual({
        status: 204,
        'access-control-allow-origin': origin,
        'access-control-allow-methods': 'GET, POST, PUT, PATCH, DELETE, OPTIONS',
        'access-control-allow-headers': 'content-type,x-api-key',
        vary: 'Origin',
      });
    }
    expect(cors(await preflight(`${stack.gateway.url}/v2/deployments`, 'https://evil.example'))).toEqual({ status: 204, vary: 'Origin' });
  });

  it('adds the headers to answers for allowed origins only', async () => {
    const ok = await send(`${stack.gateway.url}/v2/deployments`, 'GET', { origin: 'https://console.example', 'x-api-key': stack.key });
    expect(ok.status).toBe(200);
    expect(cors(ok)).toMatchObject({ 'access-control-allow-origin': 'https://console.example', vary: 'Origin' });
    expect(ok.headers['access-control-allow-credentials']).toBeUndefined();
    const evil = await send(`${stack.gateway.url}/v2/deployments`, 'GET', { origin: 'https://evil.example', 'x-api-key': stack.key });
    expect(evil.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('takes its origins from GATEWAY_CORS_ALLOW_ORIGINS, origins only', () => {
    const env = { DATABASE_URL: testDb.url };
    expect(loadGatewayConfig(env).corsAllowOrigins).toEqual([]);
    expect(loadGatewayConfig({ ...env, GATEWAY_CORS_ALLOW_ORIGINS: 'https://a.example, http://b.example:8080/' }).corsAllowOrigins).toEqual([
      'https://a.example',
      'http://b.example:8080',
    ]);
    expect(loadGatewayConfig({ ...env, GATEWAY_CORS_ALLOW_ORIGINS: '*' }).corsAllowOrigins).toEqual(['*']);
    for (const bad of ['https://a.example/console', 'javascript:alert(1)', 'a.example']) {
      expect(() => loadGatewayConfig({ ...env, GATEWAY_CORS_ALLOW_ORIGINS: bad })).toThrow(/GATEWAY_CORS_ALLOW_ORIGINS/);
    }
  });
});
