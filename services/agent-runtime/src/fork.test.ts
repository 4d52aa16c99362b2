/**
 * A run from an older checkpoint (a fork: "edit a message" in the LangGraph React hooks) starts a
 * branch whose state is stored as the branch's own. Its channel versions are the same as the
 * original branch's at the same step, and stored values are kept by (channel, version), first copy
 * wins: with versions alone the fork's state read back as the original branch's. Studio's time
 * travel: re-running from a checkpoint (input null) and editing the state at one each start a
 * branch from that checkpoint, and the history is paged the way the JS SDK asks (`before` a config).
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

  it('re-runs from a checkpoint (input null) and edits the state at one, each a branch from that checkpoint', async () => {
    const client = new Client({ apiUrl: server.url });
    const { thread_id } = await client.threads.create();
    await client.runs.wait(thread_id, 'echo', { input: human('hello') });
    // Oldest first: the input checkpoint (step -1), the input written (step 0, next respond), the reply (step 1).
    const [input, beforeReply, replied] = (await client.threads.getHistory(thread_id, { limit: 10 })).reverse();
    expect([input, beforeReply, replied].map((s) => [s!.metadata?.step, s!.next])).toEqual([
      [-1, ['__start__']],
      [0, ['respond']],
      [1, []],
    ]);

    const rerun = await client.runs.wait(thread_id, 'echo', { input: null, checkpointId: beforeReply!.checkpoint.checkpoint_id! });
    expect(texts(rerun)).toEqual(['hello', 'echo: hello']);
    // LangGraph copies the checkpoint first (source `fork`, a child of it), then runs on from the copy.
    const afterRerun = await client.threads.getState(thread_id);
    const copy = await client.threads.getState(thread_id, afterRerun.parent_checkpoint!.checkpoint_id!);
    expect([copy.metadata?.source, copy.next, copy.parent_checkpoint?.checkpoint_id]).toEqual(['fork', ['respond'], beforeReply!.checkpoint.checkpoint_id]);

    const edited = await client.threads.updateState(thread_id, {
      values: { messages: [{ role: 'user', content: 'edited', id: 'edited' }] },
      checkpointId: beforeReply!.checkpoint.checkpoint_id!,
    });
    const head = await client.threads.getState(thread_id);
    // The LangGraph API answers `{checkpoint}` (the SDK's type says `{configurable}`).
    expect(head.checkpoint.checkpoint_id).toBe((edited as { checkpoint?: { checkpoint_id?: string } }).checkpoint?.checkpoint_id);
    expect(head.parent_checkpoint?.checkpoint_id).toBe(beforeReply!.checkpoint.checkpoint_id);
    expect({ source: head.metadata?.source, texts: texts(head.values), next: head.next }).toEqual({
      source: 'update',
      texts: ['hello', 'edited'],
      next: ['respond'],
    });
    // Three children of the same checkpoint: the first run's reply, the re-run's copy, the edit.
    const history = await client.threads.getHistory(thread_id, { limit: 20 });
    const children = history.filter((s) => s.parent_checkpoint?.checkpoint_id === beforeReply!.checkpoint.checkpoint_id);
    expect(children.map((s) => s.checkpoint.checkpoint_id)).toEqual([
      head.checkpoint.checkpoint_id,
      copy.checkpoint.checkpoint_id,
      replied!.checkpoint.checkpoint_id,
    ]);
    // The edited branch runs on from the edit.
    expect(texts(await client.runs.wait(thread_id, 'echo', { input: null }))).toEqual(['hello', 'edited', 'echo: edited']);
  });

  it('pages the history with the JS SDK’s `before` (a config): every checkpoint once, newest first', async () => {
    const client = new Client({ apiUrl: server.url });
    const { thread_id } = await client.threads.create();
    for (const text of ['one', 'two', 'three']) await client.runs.wait(thread_id, 'echo', { input: human(text) });
    const all = (await client.threads.getHistory(thread_id, { limit: 100 })).map((s) => s.checkpoint.checkpoint_id);
    expect(all).toHaveLength(9);
    const paged: string[] = [];
    for (let page = await client.threads.getHistory(thread_id, { limit: 4 }); page.length > 0;) {
      paged.push(...page.map((s) => s.checkpoint.checkpoint_id!));
      page = await client.threads.getHistory(thread_id, { limit: 4, before: { configurable: page.at(-1)!.checkpoint } });
    }
    expect(paged).toEqual(all);
  });
});
