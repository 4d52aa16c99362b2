/**
 * Replicas of one deployment (Kubernetes replicas, `berth dev --processes`) start at the same
 * moment on a fresh database: none may fail on the schema setup the others do at once.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import pg from 'pg';
import type { RunningAgentServer } from './index.js';
import { startTestServer } from './__tests__/fixtures.js';

let db: TestDatabase;
const servers: RunningAgentServer[] = [];

beforeAll(async () => {
  db = await createTestDatabase('agent_replicas');
});
afterAll(async () => {
  for (const server of servers) await server.close();
  await db?.drop();
});

it('starts three agent servers at once on a fresh database, and each serves runs', async () => {
  const started = await Promise.allSettled([0, 1, 2].map(() => startTestServer(db.url, { schema: 'fresh' })));
  for (const result of started) if (result.status === 'fulfilled') servers.push(result.value);
  expect(started.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok', 'ok']);
  for (const server of servers) {
    const response = await fetch(`${server.url}/runs/wait`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'replica' }] } }),
    });
    expect(((await response.json()) as { messages: { content: string }[] }).messages.at(-1)?.content).toBe('echo: replica');
  }
}, 60_000);

it('answers 404 for a run of a deleted system assistant, and leaves no thread behind', async () => {
  const url = servers[0]!.url;
  const json = { 'content-type': 'application/json' };
  const threadCount = async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      return Number((await client.query('SELECT count(*) AS n FROM fresh.threads')).rows[0].n);
    } finally {
      await client.end();
    }
  };
  const before = await threadCount();
  const { assistant_id } = (
    (await (await fetch(`${url}/assistants/search`, { method: 'POST', headers: json, body: JSON.stringify({ graph_id: 'echo' }) })).json()) as {
      assistant_id: string;
    }[]
  )[0]!;
  expect((await fetch(`${url}/assistants/${assistant_id}`, { method: 'DELETE' })).status).toBeLessThan(300);
  const response = await fetch(`${url}/runs/wait`, {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'gone' }] } }),
  });
  expect(response.status).toBe(404);
  expect(((await response.json()) as { detail: string }).detail).toMatch(/^No assistant found for "[0-9a-f-]{36}"/);
  // The threadless run's temporary thread is gone with it.
  expect(await threadCount()).toBe(before);
});
