/**
 * Studio's Threads tab in the console (Chromium, signed in, a real agent server behind a real
 * gateway; graphs of test-projects/studio/src/threads.ts gated by files): a message in a new thread
 * whose reply streams in token by token while the state view follows; threads searched by status
 * and metadata; two interrupts in one thread — the second a pair at once — answered until the run
 * finishes; a run that never ends by itself cancelled on the server, with a queued run visible and
 * cancelled too. axe in light and dark mode; no request to another host.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { accessibilityProblems } from './__tests__/console-browser.js';
import { startStudioStack, type StudioStack } from './__tests__/studio-stack.js';

let studio: StudioStack;

beforeAll(async () => {
  studio = await startStudioStack('gw_studio_threads');
}, 90_000);
afterAll(() => studio?.close());

/** The deployment's API as any client calls it (an API key). */
const api = <T>(path: string, init?: { method?: string; body?: unknown }) => studio.api<T>(path, init);

/** The Threads tab, signed in. */
const openThreads = (colorScheme: 'light' | 'dark') => studio.studio(colorScheme, 'Threads');

/** "New thread", then the graph `graph`'s assistant chosen to run it; the new thread's id. */
async function newThread(page: Page, graph: string): Promise<string> {
  const shown = page.locator('[data-testid="thread-id"]');
  const before = (await shown.count()) > 0 ? await shown.textContent() : undefined;
  await page.click('button:text("New thread")');
  const heading = await page.waitForSelector(before ? `[data-testid="thread-id"]:not(:text("${before}"))` : '[data-testid="thread-id"]');
  const threadId = (await heading.textContent())!.replace('thread ', '');
  await page.waitForSelector(`[data-thread="${threadId}"][aria-current="true"]`);
  await page.selectOption('select[name="run-assistant"]', { label: graph });
  return threadId;
}

async function send(page: Page, text: string): Promise<void> {
  await page.fill('textarea[name="run-input"]', text);
  await page.click('form[aria-label="Start a run"] button[type="submit"]');
}

const open = (name: string) => writeFile(join(studio.gateDir, name), '');
const conversation = 'section[aria-label="Conversation"]';

type State = { values: { messages: { content: string }[] }; next: string[] };
type RunRow = { run_id: string; status: string };

describe('Studio’s Threads tab', () => {
  it('streams a reply token by token into a new thread, the state view following; finds threads by status and metadata', async () => {
    const { page, problems } = await openThreads('light');
    const threadId = await newThread(page, 'chat');
    expect(await accessibilityProblems(page)).toEqual([]);
    await send(page, 'hello-stream');
    // The first token is there, the rest waits at the gate: the reply is seen half written.
    await page.waitForSelector(`${conversation} li:has-text("echo")`);
    expect(await page.locator(`${conversation} li`).allTextContents()).toEqual(['Userhello-stream', 'Assistantecho']);
    await page.waitForSelector('section[aria-label="State"]:has-text("messages: [1 item]")');
    await page.waitForSelector('[data-testid="thread-run-status"][data-status="running"]');
    await open('hello-stream.tokens');
    await page.waitForSelector(`${conversation} li:has-text("echo: hello-stream")`);
    await page.waitForSelector('section[aria-label="State"]:has-text("messages: [2 items]")');
    await page.waitForSelector('[data-testid="thread-run-status"][data-status="done"]');
    expect(await page.locator(`${conversation} li`).allTextContents()).toEqual(['Userhello-stream', 'Assistantecho: hello-stream']);
    expect(await accessibilityProblems(page)).toEqual([]);
    // The thread is the deployment's, as any API client sees it.
    const state = await api<State>(`/threads/${threadId}/state`);
    expect(state.values.messages.map((m) => m.content)).toEqual(['hello-stream', 'echo: hello-stream']);

    // Another thread, never run: searches tell them apart.
    const other = await newThread(page, 'chat');
    const listed = async () => page.locator('ul[aria-label="Thread list"] [data-thread]').evaluateAll((els) => els.map((el) => el.getAttribute('data-thread')));
    // Newest first.
    expect((await listed()).slice(0, 2)).toEqual([other, threadId]);
    await page.fill('input[name="metadata-key"]', 'graph_id');
    await page.fill('input[name="metadata-value"]', 'chat');
    await page.click('button:text("Search")');
    // The list empties while the search is under way: wait for the answer, not only for `other` to go.
    await page.waitForSelector(`[data-thread="${other}"]`, { state: 'detached' });
    await page.waitForSelector(`ul[aria-label="Thread list"] [data-thread="${threadId}"]`);
    expect(await listed()).toEqual([threadId]);
    await page.fill('input[name="metadata-key"]', '');
    await page.selectOption('select[name="thread-status"]', 'busy');
    await page.click('button:text("Search")');
    await page.waitForSelector('nav[aria-label="Threads"] :text("No threads.")');
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('shows each interrupt of a thread — a question, then two approvals at once — and resumes the run with each answer until it finishes', async () => {
    const { page, problems } = await openThreads('dark');
    const threadId = await newThread(page, 'approvals');
    await send(page, 'go');
    await page.waitForSelector('[data-interrupt="ask"]:has-text("Which colour?")');
    expect(await accessibilityProblems(page)).toEqual([]);
    await page.fill('[data-interrupt="ask"] textarea', 'blue');
    await page.click('[data-interrupt="ask"] button:text("Answer")');

    // The second interrupt of the thread: two pending at once, each an approval request.
    await page.waitForSelector('[data-interrupt="first"]:has-text("allowed_decisions")');
    await page.waitForSelector('[data-interrupt="second"]');
    await page.waitForSelector('[data-interrupt="ask"]', { state: 'detached' });
    expect(await accessibilityProblems(page)).toEqual([]);
    await page.click('[data-interrupt="first"] button:text("Approve")');
    // Only that one is answered: the other stays pending, the run waits again.
    await page.waitForSelector('[data-interrupt="first"]', { state: 'detached' });
    await page.waitForSelector('[data-interrupt="second"]');
    expect((await api<{ status: string }>(`/threads/${threadId}`)).status).toBe('interrupted');
    await page.click('[data-interrupt="second"] button:text("Edit")');
    await page.fill('[data-interrupt="second"] textarea', '{"edited": true}');
    await page.click('[data-interrupt="second"] button:text("Send edited")');

    const reply = 'answer blue; first "approve"; second {"edited":true}';
    await page.waitForSelector(`${conversation} li:has-text('${reply}')`);
    await page.waitForSelector('[data-testid="thread-run-status"][data-status="done"]');
    expect(await page.locator('section[aria-label="Interrupts"]').count()).toBe(0);
    const state = await api<State>(`/threads/${threadId}/state`);
    expect({ next: state.next, last: state.values.messages.at(-1)?.content }).toEqual({ next: [], last: reply });
    expect((await api<{ status: string }>(`/threads/${threadId}`)).status).toBe('idle');
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('cancels a run on the server (it never ends by itself), shows a queued run, and cancels that one once it runs', async () => {
    const { page, problems } = await openThreads('light');
    const threadId = await newThread(page, 'forever');
    await send(page, 'long-1');
    const running = await page.waitForSelector('section[aria-label="Runs"] li[data-status="running"]');
    const first = (await running.getAttribute('data-run'))!;
    // Another client queues a second run on the thread: it shows as queued.
    const queued = await api<RunRow>(`/threads/${threadId}/runs`, {
      method: 'POST',
      body: { assistant_id: 'forever', input: { messages: [{ role: 'user', content: 'long-2' }] }, multitask_strategy: 'enqueue' },
    });
    expect(queued.status).toBe('pending');
    await page.waitForSelector(`li[data-run="${queued.run_id}"][data-status="pending"]:has-text("queued")`);
    await page.waitForSelector('section[aria-label="Runs"] h3:text("Runs · 1 queued")');
    expect(await accessibilityProblems(page)).toEqual([]);

    await page.click(`li[data-run="${first}"] button:text("Cancel")`);
    await page.waitForSelector(`li[data-run="${first}"][data-status="interrupted"]:has-text("cancelled")`);
    await page.waitForSelector('[data-testid="thread-run-status"][data-status="cancelled"]');
    expect((await api<RunRow>(`/threads/${threadId}/runs/${first}`)).status).toBe('interrupted');
    // The queue moves on: the second run starts, and is cancelled the same way.
    await page.click(`li[data-run="${queued.run_id}"][data-status="running"] button:text("Cancel")`);
    await page.waitForSelector(`li[data-run="${queued.run_id}"][data-status="interrupted"]`);
    expect((await api<RunRow>(`/threads/${threadId}/runs/${queued.run_id}`)).status).toBe('interrupted');
    expect((await api<RunRow[]>(`/threads/${threadId}/runs`)).map((r) => r.status)).toEqual(['interrupted', 'interrupted']);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);
});
