/**
 * Malformed requests to the agent server that an audit found answering 500 (issue 9): NULs that
 * reached Postgres through path, query and body, and thread-state updates that do not fit the
 * graph's state. Each is a 422 naming the location now.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './index.js';
import { human, lastText, startTestServer } from './__tests__/fixtures.js';

let db: TestDatabase;
let server: RunningAgentServer;
let threadId: string;

type Json = Record<string, any>;

async function call(path: string, body?: string) {
  const res = await fetch(`${server.url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body }),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json };
}

/** A 422 with one entry at `loc` of kind `type`. */
const invalid = (loc: (string | number)[], type: string) => ({ status: 422, body: { detail: [{ loc, msg: expect.any(String), type }] } });

beforeAll(async () => {
  db = await createTestDatabase('agent_bad');
  server = await startTestServer(db.url, { workers: 1 });
  threadId = (await call('/threads', '{}')).body.thread_id;
  const run = await call(`/threads/${threadId}/runs/wait`, JSON.stringify({ assistant_id: 'echo', input: human('hi') }));
  expect(lastText(run.body)).toBe('echo: hi');
}, 60_000);
afterAll(async () => {
  await server?.close();
  await db?.drop();
});

describe('NUL characters', () => {
  it('are refused in a checkpoint id in the path', async () => {
    expect(await call(`/threads/${threadId}/state/%00`)).toEqual(invalid(['path', 'checkpoint_id'], 'string_nul'));
  });

  it('are refused in `before` of history, as query and as body', async () => {
    expect(await call(`/threads/${threadId}/history?before=%00`)).toEqual(invalid(['query', 'before'], 'string_nul'));
    expect(await call(`/threads/${threadId}/history`, '{"before":"\\u0000"}')).toEqual(invalid(['body', 'before'], 'string_nul'));
    expect(await call(`/threads/${threadId}/history`, '{"before":{"checkpoint_id":"x\\u0000"}}')).toEqual(
      invalid(['body', 'before', 'checkpoint_id'], 'string_nul'),
    );
  });
});

describe('POST /threads/{thread_id}/state', () => {
  it('refuses values that are not an object', async () => {
    expect(await call(`/threads/${threadId}/state`, '{"values":"x"}')).toEqual(invalid(['body', 'values'], 'dict_type'));
    expect(await call(`/threads/${threadId}/state`, '{"values":[1]}')).toEqual(invalid(['body', 'values'], 'dict_type'));
  });

  it('refuses keys the graph has no state channel for, and nodes it does not have', async () => {
    const res = await call(`/threads/${threadId}/state`, '{"values":{"messages":[],"mood":"sad"}}');
    expect(res).toEqual(invalid(['body', 'values', 'mood'], 'extra_forbidden'));
    expect(res.body.detail[0].msg).toContain('messages');
    expect(await call(`/threads/${threadId}/state`, '{"values":{"messages":[]},"as_node":"nope"}')).toEqual(invalid(['body', 'as_node'], 'value_error'));
  });

  it("refuses values the graph's reducer cannot take (a message of an unknown role), here and in supersteps", async () => {
    const bad = { messages: [{ role: 'wizard', content: 'x' }] };
    const res = await call(`/threads/${threadId}/state`, JSON.stringify({ values: bad, as_node: 'respond' }));
    expect(res).toEqual(invalid(['body'], 'value_error'));
    expect(res.body.detail[0].msg).toContain('Unable to coerce message');
    const refusedId = '5f0c9a55-1b7e-4c51-9c1e-0d1a2b3c4d5e';
    const create = await call(
      '/threads',
      JSON.stringify({ thread_id: refusedId, metadata: { graph_id: 'echo' }, supersteps: [{ updates: [{ values: bad, as_node: 'respond' }] }] }),
    );
    expect(create).toEqual(invalid(['body'], 'value_error'));
    expect((await call(`/threads/${refusedId}`)).status).toBe(404);
  });

  it('still applies an update that fits the graph', async () => {
    const update = JSON.stringify({ values: { messages: [{ role: 'user', content: 'edited' }] }, as_node: 'respond' });
    const res = await call(`/threads/${threadId}/state`, update);
    expect(res).toMatchObject({ status: 200, body: { checkpoint: { checkpoint_id: expect.any(String) } } });
    expect(lastText((await call(`/threads/${threadId}/state`)).body.values)).toBe('edited');
  });
});
