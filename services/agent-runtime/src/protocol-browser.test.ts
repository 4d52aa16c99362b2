/**
 * Protocol v2 in a real browser: the official React hook (`useStream` of @langchain/react 1.x,
 * which speaks only protocol v2) on a page of another origin, against the agent server over SSE
 * and over WebSocket — send and stream tokens, reload and rehydrate, interrupt and respond.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, launchChromium, servePage, type ServedPage, type TestDatabase } from '@berth/testing';
import type { Browser, Page } from 'playwright-core';
import type { RunningAgentServer } from './server.js';
import { startTestServer, until } from './__tests__/fixtures.js';

const project = fileURLToPath(new URL('../test-projects/protocol/langgraph.json', import.meta.url));

let db: TestDatabase;
let server: RunningAgentServer;
let browser: Browser;
let page: ServedPage;

beforeAll(async () => {
  db = await createTestDatabase('agent_protocol_browser');
  server = await startTestServer(db.url, { configPath: project });
  browser = await launchChromium();
  page = await servePage({ entry: fileURLToPath(new URL('./__tests__/use-stream.page.tsx', import.meta.url)) });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await page?.close();
  await server?.close();
  await db?.drop();
});

function open(tab: Page, params: Record<string, string>) {
  return tab.goto(`${page.url}?${new URLSearchParams({ api: server.url, ...params }).toString()}`);
}

const text = (tab: Page, id: string) => tab.textContent(`#${id}`).then((t) => t ?? '');

describe.each(['sse', 'websocket'])('useStream of @langchain/react over %s', (transport) => {
  it('sends, streams the reply token by token, sends again, forks from a checkpoint, and rehydrates after a reload', async () => {
    const tab = await browser.newPage();
    const said = (words: string) => JSON.stringify({ messages: [{ type: 'human', content: words }] });
    const shows = async (expected: string) => {
      const seen = await until(
        async () => `${await text(tab, 'messages')} (loading: ${await text(tab, 'loading')}${await text(tab, 'error')})`,
        (t) => t === `${expected} (loading: no)`,
      );
      expect(seen).toBe(`${expected} (loading: no)`);
    };
    try {
      await open(tab, { transport, assistant: 'chat' });
      // A run that ends before the hook's subscriptions are in place: they replay it.
      await tab.fill('#input', said('quick'));
      await tab.click('#send');
      await shows('quick|reply: quick');
      // Tokens 50 ms apart: the page renders the reply growing.
      await tab.fill('#input', said('slowly now'));
      await tab.click('#send');
      await shows('quick|reply: quick|slowly now|reply: slowly now');
      expect(await text(tab, 'error')).toBe('');
      const partials = (await text(tab, 'partials')).split('|').filter((p) => p.startsWith('rep') && p !== 'reply: quick');
      expect(partials.length).toBeGreaterThan(1);
      expect(partials.at(-1)).toBe('reply: slowly now');
      // Fork from the checkpoint the last reply came after (its parent, from the streamed checkpoints):
      // the new turn replaces that reply instead of following it.
      expect(
        await until(
          () => text(tab, 'fork-from'),
          (t) => t !== '',
        ),
      ).toMatch(/^[0-9a-f-]{36}$/);
      await tab.fill('#input', said('edited'));
      await tab.click('#edit');
      await shows('quick|reply: quick|slowly now|edited|reply: edited');
      const threadId = await text(tab, 'thread');
      expect(threadId).toMatch(/^[0-9a-f-]{36}$/);
      await open(tab, { transport, assistant: 'chat', thread: threadId });
      await shows('quick|reply: quick|slowly now|edited|reply: edited');
    } finally {
      await tab.close();
    }
  }, 60_000);

  it('rejoins a run still streaming after a reload, and shows how it ends', async () => {
    const tab = await browser.newPage();
    try {
      await open(tab, { transport, assistant: 'chat' });
      // About 50 tokens 50 ms apart: the run goes on for seconds after the reload.
      const words = 'slowly, a reply long enough to reload in the middle of it, and then some more words to be sure of that';
      await tab.fill('#input', JSON.stringify({ messages: [{ type: 'human', content: words }] }));
      await tab.click('#send');
      // Some tokens are in, not all.
      const partial = await until(
        () => text(tab, 'messages'),
        (t) => t.includes('|rep'),
      );
      expect(partial).not.toBe(`${words}|reply: ${words}`);
      const threadId = await text(tab, 'thread');
      await open(tab, { transport, assistant: 'chat', thread: threadId });
      // Rejoined while it runs: more of the reply comes in after the reload.
      expect(
        await until(
          () => text(tab, 'loading'),
          (t) => t === 'yes',
        ),
      ).toBe('yes');
      const seen = await until(
        async () => `${await text(tab, 'messages')} (loading: ${await text(tab, 'loading')})`,
        (t) => t === `${words}|reply: ${words} (loading: no)`,
      );
      expect(seen).toBe(`${words}|reply: ${words} (loading: no)`);
    } finally {
      await tab.close();
    }
  }, 60_000);

  it('shows an interrupt and resumes the run with respond', async () => {
    const tab = await browser.newPage();
    try {
      await open(tab, { transport, assistant: 'interrupt' });
      await tab.fill('#input', JSON.stringify({ question: 'proceed?' }));
      await tab.click('#send');
      expect(
        await until(
          () => text(tab, 'interrupt'),
          (t) => t !== '',
        ),
      ).toBe('{"question":"proceed?"}');
      await tab.click('#respond');
      expect(
        JSON.parse(
          await until(
            () => text(tab, 'values'),
            (t) => t.includes('result'),
          ),
        ),
      ).toMatchObject({ result: 'done: yes' });
      expect(await text(tab, 'interrupt')).toBe('');
      expect(await text(tab, 'error')).toBe('');
    } finally {
      await tab.close();
    }
  }, 60_000);
});
