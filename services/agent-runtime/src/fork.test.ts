/**
 * A run from an older checkpoint (a fork: "edit a message" in the LangGraph React hooks) starts a
 * branch whose state is stored as the branch's own. Its channel versions are the same as the
 * original branch's at the same step, and stored values are kept by (channel, version), first copy
 * wins: with versions alone the fork's state read back as the original branch's.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client } from '@langchain/langgraph-sdk';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './index.js';
import { human, startTestServer, type Msg } from './__tests__/fixtures.js';

let db: TestDatabase;
let server: RunningAgentServer;

beforeAll(async () => {
  db = await createTestDatabase('agent_fork');
  server = await startTestServer(db.url, { workers: 1 });
}, 60_000);
afterAll(async () => {
  await server?.close();
  await db?.drop();
});

const texts = (values: unknown) => (values as { messages: Msg[] }).messages.map((m) => m.content);

describe('a run from an older checkpoint', () => {
  it('stores its branch: the thread state, the history and the next run see the new input', async () => {
    const client = new Client({ apiUrl: server.url });
    const { thread_id } = await client.threads.create();
    await client.runs.wait(thread_id, 'echo', { input: human('hello') });
    const forkPoint = await client.threads.getState(thread_id);
    await client.runs.wait(thread_id, 'echo', { input: human('second') });

    const forked = await client.runs.wait(thread_id, 'echo', { input: human('again'), checkpoint: forkPoint.checkpoint });
    expect(texts(forked)).toEqual(['hello', 'echo: hello', 'again', 'echo: again']);
    expect(texts((await client.threads.getState(thread_id)).values)).toEqual(['hello', 'echo: hello', 'again', 'echo: again']);
    // The original branch is kept as it was.
    const history = await client.threads.getHistory(thread_id, { limit: 20 });
    expect(history.map((state) => texts(state.values).join('|'))).toEqual(
      expect.arrayContaining(['hello|echo: hello|second|echo: second', 'hello|echo: hello|again|echo: again']),
    );
    // The branch goes on from its own state.
    const next = await client.runs.wait(thread_id, 'echo', { input: human('more') });
    expect(texts(next)).toEqual(['hello', 'echo: hello', 'again', 'echo: again', 'more', 'echo: more']);
  });
});
