/**
 * Request fuzzing (fast-check, fixed seeds): random methods, paths of the route tables (from each
 * server's /openapi.json) with random parameters, random query strings, JSON and non-JSON bodies,
 * content types and encodings, credentials and other headers — at a real gateway, at an agent
 * server through the gateway's deployment URL, and at the agent server directly. No answer may be
 * a 5xx, and both servers must still be healthy afterwards.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { startAgentStack, type AgentStack } from './__tests__/agent-stack.js';
import {
  createTestDatabase,
  fuzzRequests,
  handledStatuses,
  jsonBodies,
  nastyText,
  requests,
  routesOf,
  type FuzzAnswer,
  type FuzzRequest,
  type FuzzRoute,
  type TestDatabase,
} from '@berth/testing';

let testDb: TestDatabase;
let stack: AgentStack;
let threadId: string;

const jsonKeys = fc.constantFrom(
  'assistant_id',
  'graph_id',
  'input',
  'metadata',
  'values',
  'limit',
  'offset',
  'name',
  'thread_id',
  'config',
  'context',
  'before',
  'checkpoint',
  'checkpoint_id',
  'as_node',
  'expires_in',
  'source',
  'status',
  'ids',
  'command',
  'stream_mode',
  'version',
  'if_exists',
  'role',
);

/**
 * This stack runs no sandbox-manager: the sandbox routes' answer past validation is a 503 saying
 * how to enable sandboxes (a refusal, not a failure; their validation is still fuzzed).
 */
function sandboxesOff(r: FuzzRequest, res: FuzzAnswer): boolean {
  // HEAD answers carry no body to read the reason from.
  return res.status === 503 && r.path.startsWith('/api/v2/sandboxes/') && (r.method === 'HEAD' || /SANDBOX_MANAGER_GRPC_ADDRESS/.test(res.text));
}

/** Runs the property on the agent stack's requests; returns how many answers had each status. */
function fuzz(baseUrl: string, routes: FuzzRoute[], credentials: () => Record<string, string>, seed: number, numRuns: number): Promise<Map<number, number>> {
  const params = fc.oneof(fc.constant(threadId), fc.uuid(), fc.constantFrom('echo', 'agent'), nastyText);
  const json = jsonBodies(jsonKeys, fc.constantFrom('echo', 'agent', '\u0000', '\ud800', -1, 1e308));
  return fuzzRequests(baseUrl, requests(routes, credentials, { params, json }), { seed, numRuns, allowed: sandboxesOff });
}

beforeAll(async () => {
  testDb = await createTestDatabase('gw_fuzz');
  stack = await startAgentStack(testDb.url);
  threadId = (
    (await (await fetch(`${stack.agent.url}/threads`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as {
      thread_id: string;
    }
  ).thread_id;
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
    expect(handledStatuses(await fuzz(stack.gateway.url, routes, () => ({ 'x-api-key': stack.key }), 9001, 1000))).toEqual({ succeeded: true, invalid: true });
    expect((await fetch(`${stack.gateway.url}/healthz`)).status).toBe(200);
  }, 60_000);

  it('never make an agent server answer 5xx, called directly or through the deployment URL', async () => {
    const routes = await routesOf(stack.agent.url);
    expect(handledStatuses(await fuzz(stack.agent.url, routes, () => ({}), 9002, 1200))).toEqual({ succeeded: true, invalid: true });
    expect(handledStatuses(await fuzz(stack.deploymentUrl, routes, () => ({ 'x-api-key': stack.key }), 9003, 800))).toEqual({ succeeded: true, invalid: true });
    expect((await fetch(`${stack.agent.url}/ok?check_db=1`)).status).toBe(200);
    expect((await fetch(`${stack.deploymentUrl}/ok`, { headers: { 'x-api-key': stack.key } })).status).toBe(200);
  }, 60_000);
});
