/**
 * The production mode: queue and run events on Redis (REDIS_URL), state still in Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client } from '@langchain/langgraph-sdk';
import { createTestDatabase, testRedisUrl, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './index.js';
import { startTestServer, until } from './__tests__/fixtures.js';

let db: TestDatabase;
let server: RunningAgentServer;
let client: Client;

beforeAll(async () => {
  db = await createTestDatabase('agentredis');
  // A schema of its own keeps this server's Redis keys apart from other test files' servers.
  server = await startTestServer(db.url, { schema: `agent_${db.name}`, redisUrl: testRedisUrl(), workers: 2 });
  client = new Client({ apiUrl: server.url });
}, 60_000);
afterAll(async () => {
  await server?.close();
  await db?.drop();
});

describe('agent server on Redis', () => {
  it('queues, streams, resumes and cancels runs through Redis', async () => {
    const t = await client.threads.create();
    const result = (await client.runs.wait(t.thread_id, 'echo', { input: { messages: [{ role: 'user', content: 'redis' }] } })) as {
      messages: { content: string }[];
    };
    expect(result.messages.at(-1)?.content).toBe('echo: redis');

    const events: { event: string; id?: string }[] = [];
    for await (const chunk of client.runs.stream(t.thread_id, 'echo', {
      input: { messages: [{ role: 'user', content: 'again' }] },
      streamMode: ['updates'],
      streamResumable: true,
    })) {
      events.push(chunk as { event: string; id?: string });
    }
    expect(events.map((e) => e.event)).toEqual(['metadata', 'updates']);
    const runId = (events[0] as unknown as { data: { run_id: string } }).data.run_id;
    const replay: string[] = [];
    for await (const chunk of client.runs.joinStream(t.thread_id, runId, { lastEventId: '-1' })) replay.push(chunk.event);
    expect(replay).toEqual(['metadata', 'updates']);

    const slow = await client.runs.create(t.thread_id, 'slow', { input: {}, context: { delay_ms: 20_000 } });
    await until(
      () => client.runs.get(t.thread_id, slow.run_id),
      (r) => r.status === 'running',
    );
    await client.runs.cancel(t.thread_id, slow.run_id, true);
    expect((await client.runs.get(t.thread_id, slow.run_id)).status).toBe('interrupted');
  });
});
