/**
 * Context schemas declared each way LangGraph.js accepts (`Annotation.Root`, zod 4, zod 3 via
 * `zod/v3`, `StateSchema`; test-projects/context) behave alike through the agent server: they show
 * in GET /assistants/{id}/schemas, an unknown context key is a 422 naming it (assistant create and
 * patch, runs), and a valid context reaches the graph as `runtime.context`.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './index.js';
import { startTestServer } from './__tests__/fixtures.js';

const configPath = fileURLToPath(new URL('../test-projects/context/langgraph.json', import.meta.url));
const styles = ['annotation', 'zod4', 'zod3', 'state_schema'] as const;

let db: TestDatabase;
let server: RunningAgentServer;

beforeAll(async () => {
  db = await createTestDatabase('agentctx');
  server = await startTestServer(db.url, { configPath, leaseMs: 30_000 });
}, 60_000);
afterAll(async () => {
  await server?.close();
  await db?.drop();
});

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: await res.json() };
}

const unknownKey = (loc: (string | number)[]) => ({
  detail: [{ loc, msg: "Extra inputs are not permitted; the graph's context accepts: model, temperature", type: 'extra_forbidden' }],
});

describe.each(styles)('context schema declared as %s', (graph) => {
  it('shows in GET /assistants/{id}/schemas as context_schema and config_schema', async () => {
    const { status, body } = await call('GET', `/assistants/${graph}/schemas`);
    expect(status).toBe(200);
    expect(body.context_schema).toMatchObject({
      type: 'object',
      properties: { model: expect.any(Object), temperature: expect.any(Object) },
      additionalProperties: false,
    });
    expect(Object.keys(body.context_schema.properties)).toEqual(['model', 'temperature']);
    expect(body.config_schema).toEqual(body.context_schema);
  });

  it('refuses an unknown context key with a 422 naming it: assistant create and patch, runs', async () => {
    expect(await call('POST', '/assistants', { graph_id: graph, context: { model: 'm', modle: 'x' } })).toEqual({
      status: 422,
      body: unknownKey(['body', 'context', 'modle']),
    });
    const assistant = await call('POST', '/assistants', { graph_id: graph, context: { model: 'm' } });
    expect(assistant.status).toBe(200);
    expect(await call('PATCH', `/assistants/${assistant.body.assistant_id}`, { context: { temprature: 1 } })).toEqual({
      status: 422,
      body: unknownKey(['body', 'context', 'temprature']),
    });
    expect(await call('POST', '/runs/wait', { assistant_id: graph, input: {}, context: { bogus: true } })).toEqual({
      status: 422,
      body: unknownKey(['body', 'context', 'bogus']),
    });
    const thread = await call('POST', '/threads', {});
    expect(await call('POST', `/threads/${thread.body.thread_id}/runs`, { assistant_id: graph, input: {}, context: { bogus: true } })).toEqual({
      status: 422,
      body: unknownKey(['body', 'context', 'bogus']),
    });
  });

  it('passes a valid context to the graph (runtime.context), the run context over the assistant context', async () => {
    const plain = await call('POST', '/runs/wait', { assistant_id: graph, input: {}, context: { model: 'm', temperature: 0.5 } });
    expect(plain).toEqual({ status: 200, body: { seen: { model: 'm', temperature: 0.5 } } });
    const assistant = await call('POST', '/assistants', { graph_id: graph, context: { model: 'from-assistant', temperature: 1 } });
    const merged = await call('POST', '/runs/wait', { assistant_id: assistant.body.assistant_id, input: {}, context: { temperature: 0 } });
    expect(merged).toEqual({ status: 200, body: { seen: { model: 'from-assistant', temperature: 0 } } });
  });
});
