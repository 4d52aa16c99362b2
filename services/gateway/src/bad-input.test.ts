/**
 * Malformed requests found by an audit to answer 500 (issue 9): each must be a 4xx now, on the
 * gateway's own routes and, through its deployment URL, on an agent server behind it.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { startAgentStack, type AgentStack } from './__tests__/agent-stack.js';

let testDb: TestDatabase;
let stack: AgentStack;

type Json = Record<string, any>;

async function send(url: string, init: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {}) {
  const res = await fetch(url, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: { 'x-api-key': stack.key, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }), ...init.headers },
    ...(init.body === undefined ? {} : { body: init.body }),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json };
}

/** `depth` nested arrays around a number. */
const nested = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;

beforeAll(async () => {
  testDb = await createTestDatabase('gw_bad');
  stack = await startAgentStack(testDb.url);
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await testDb?.drop();
});

describe('content-encoding', () => {
  it('answers 400 for a body that does not decode, on the gateway and an agent server behind it', async () => {
    for (const encoding of ['gzip', 'deflate', 'br']) {
      const headers = { 'content-encoding': encoding };
      const gateway = await send(`${stack.gateway.url}/v1/auth/tokens`, { headers, body: '{}' });
      expect({ encoding, ...gateway }).toEqual({ encoding, status: 400, body: { detail: expect.stringMatching(/could not be decoded/) } });
      const agent = await send(`${stack.deploymentUrl}/threads`, { headers, body: '{}' });
      expect({ encoding, ...agent }).toEqual({ encoding, status: 400, body: { detail: expect.stringMatching(/could not be decoded/) } });
    }
  });

  it('inflates gzip, deflate and br bodies', async () => {
    const json = JSON.stringify({ expires_in: 600 });
    for (const [encoding, body] of [
      ['gzip', gzipSync(json)],
      ['deflate', deflateSync(json)],
      ['br', brotliCompressSync(json)],
    ] as const) {
      const res = await send(`${stack.gateway.url}/v1/auth/tokens`, { headers: { 'content-encoding': encoding }, body });
      expect({ encoding, status: res.status, expires: res.body.expires_in }).toEqual({ encoding, status: 201, expires: 600 });
    }
    const thread = await send(`${stack.deploymentUrl}/threads`, { headers: { 'content-encoding': 'gzip' }, body: gzipSync('{"metadata":{"zipped":true}}') });
    expect(thread).toMatchObject({ status: 200, body: { metadata: { zipped: true } } });
  });

  it('answers 415 for a coding it does not know', async () => {
    const res = await send(`${stack.gateway.url}/v1/auth/tokens`, { headers: { 'content-encoding': 'compress' }, body: '{}' });
    expect(res).toEqual({ status: 415, body: { detail: expect.stringMatching(/unsupported content encoding/) } });
  });
});

describe('JSON depth', () => {
  it('answers 422 for JSON nested 5000 levels deep, in the project format', async () => {
    const tooDeep = { status: 422, body: { detail: [{ loc: ['body'], msg: expect.stringMatching(/deeper than 128/), type: 'too_deep' }] } };
    expect(await send(`${stack.gateway.url}/v1/auth/tokens`, { body: `{"expires_in":${nested(5000)}}` })).toEqual(tooDeep);
    expect(await send(`${stack.deploymentUrl}/threads`, { body: `{"metadata":{"a":${nested(5000)}}}` })).toEqual(tooDeep);
    // 128 levels are fine.
    const ok = await send(`${stack.deploymentUrl}/threads`, { body: `{"metadata":{"a":${nested(126)}}}` });
    expect(ok.status).toBe(200);
  });
});

describe('strings Postgres cannot store', () => {
  it('answers 422 naming the query parameter that holds a NUL', async () => {
    const res = await send(`${stack.gateway.url}/v2/deployments?name_contains=%00`);
    expect(res).toEqual({ status: 422, body: { detail: [{ loc: ['query', 'name_contains'], msg: expect.stringMatching(/NUL/), type: 'string_nul' }] } });
  });

  it('answers 422 for NULs and lone surrogates in bodies, keys included', async () => {
    const nul = await send(`${stack.gateway.url}/v2/deployments`, { body: '{"name":"a\\u0000b","source":"internal_source"}' });
    expect(nul).toMatchObject({ status: 422, body: { detail: [{ loc: ['body', 'name'], type: 'string_nul' }] } });
    const surrogate = await send(`${stack.deploymentUrl}/threads`, { body: '{"metadata":{"k":["ok","\\ud800"]}}' });
    expect(surrogate).toMatchObject({ status: 422, body: { detail: [{ loc: ['body', 'metadata', 'k', 1], type: 'string_unicode' }] } });
    const key = await send(`${stack.deploymentUrl}/threads`, { body: '{"metadata":{"a\\u0000":1}}' });
    expect(key).toMatchObject({ status: 422, body: { detail: [{ loc: ['body', 'metadata', 'a\u0000'], type: 'string_nul' }] } });
  });
});
