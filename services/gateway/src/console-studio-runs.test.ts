/**
 * Studio's runs in the console (Chromium, signed in, a real agent server behind a real gateway):
 * a run started from the form built from the graph's input schema, with the stream modes chosen,
 * and the events of those modes in the event log; a second run sent while one runs, queued on the
 * server, shown pending and cancelled there; the Runs tab's queue of the whole deployment (runs of
 * two threads, oldest first) with Cancel and "Cancel all pending"; the Graph tab drawn and run for
 * an assistant chosen. Graphs: test-projects/studio (`repeat` in src/runs.ts; `forever`, which
 * ends only when cancelled, in src/threads.ts). axe in light and dark mode; no request to another host.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import type { Page } from 'playwright-core';
import { accessibilityProblems } from './__tests__/console-browser.js';
import { startStudioStack, type StudioStack } from './__tests__/studio-stack.js';

let studio: StudioStack;

beforeAll(async () => {
  studio = await startStudioStack('gw_studio_runs');
}, 90_000);
afterAll(() => studio?.close());
// A test that failed midway leaves no run behind to hold the next one's worker or fill its queue.
afterEach(() => studio.api('/runs/cancel', { method: 'POST', body: { status: 'all' } }));

const api = <T>(path: string, init?: { method?: string; body?: unknown }) => studio.api<T>(path, init);
type RunRow = { run_id: string; thread_id: string; assistant_id: string; status: string };
const runOf = (threadId: string, runId: string) => api<RunRow>(`/threads/${threadId}/runs/${runId}`);
const post = <T>(path: string, body: unknown) => api<T>(path, { method: 'POST', body });
const forever = (text: string, extra: Record<string, unknown> = {}) => ({
  assistant_id: 'forever',
  input: { messages: [{ role: 'user', content: text }] },
  ...extra,
});

const openStudio = (colorScheme: 'light' | 'dark', label: string) => studio.studio(colorScheme, label);

/** "New thread" in the Threads tab, its run form set to `graph`'s assistant; the thread's id. */
async function newThread(page: Page, graph: string): Promise<string> {
  await page.click('button:text("New thread")');
  const heading = await page.waitForSelector('[data-testid="thread-id"]');
  const threadId = (await heading.textContent())!.replace('thread ', '');
  await page.waitForSelector(`[data-thread="${threadId}"][aria-current="true"]`);
  await page.selectOption('select[name="run-assistant"]', { label: graph });
  return threadId;
}

const form = 'form[aria-label="Start a run"]';
const mode = (name: string) => `${form} input[name="stream-mode"][value="${name}"]`;

describe('Studio’s runs', () => {
  it('starts a run from the form of the graph’s input schema, in the stream modes chosen, and logs each mode’s events', async () => {
    const { page, problems } = await openStudio('light', 'Threads');
    const threadId = await newThread(page, 'repeat');
    await page.click(`${form} button:text("Graph input")`);
    // One input per field of the graph's input schema.
    await page.getByLabel(/^topic/).fill('bell');
    await page.getByLabel(/^times/).fill('two');
    await page.getByLabel('loud', { exact: true }).check();
    await page.getByLabel(/^tone/).selectOption('warm');
    // Stream modes: the values and updates chosen by default, plus custom; not the chat's messages.
    await page.uncheck(mode('messages-tuple'));
    await page.check(mode('custom'));
    expect(await accessibilityProblems(page)).toEqual([]);
    await page.click(`${form} button:text("Run")`);
    // A wrong integer is refused at its field; nothing runs.
    await page.waitForSelector(`${form} :text("Enter a whole number.")`);
    expect(await api<RunRow[]>(`/threads/${threadId}/runs`)).toEqual([]);
    await page.getByLabel(/^times/).fill('2');
    await page.click(`${form} button:text("Run")`);
    await page.waitForSelector('[data-testid="thread-run-status"][data-status="done"]');

    // The run had the form's input and the modes chosen: custom events (one per repetition), values, updates.
    const state = await api<{ values: Record<string, unknown> }>(`/threads/${threadId}/state`);
    expect(state.values).toMatchObject({ topic: 'bell', times: 2, loud: true, tone: 'warm', result: 'warm: BELL BELL' });
    const [run] = await api<(RunRow & { kwargs: { stream_mode: string[] } })[]>(`/threads/${threadId}/runs`);
    expect(run!.kwargs.stream_mode.sort()).toEqual(['custom', 'updates', 'values']);
    await page.click('[data-testid="event-log"] summary');
    const kinds = await page
      .locator('[data-testid="event-log"] ol[aria-label="Events"] > li')
      .evaluateAll((els) => els.map((el) => el.getAttribute('data-event')));
    expect(kinds.filter((k) => k === 'custom')).toHaveLength(2);
    expect(new Set(kinds)).toEqual(new Set(['metadata', 'values', 'updates', 'custom']));
    await page.click('[data-testid="event-log"] li[data-event="custom"] summary >> nth=1');
    await page.waitForSelector('[data-testid="event-log"] li[data-event="custom"] >> nth=1 >> :text("BELL")');
    await page.waitForSelector('section[aria-label="State"]:has-text("warm: BELL BELL")');
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('queues a second run sent while one runs, shows it pending, and cancels it on the server', async () => {
    const { page, problems } = await openStudio('dark', 'Threads');
    const threadId = await newThread(page, 'forever');
    await page.fill('textarea[name="run-input"]', 'q-1');
    await page.click(`${form} button:text("Send")`);
    const running = await page.waitForSelector('section[aria-label="Runs"] li[data-status="running"]');
    const first = (await running.getAttribute('data-run'))!;
    // Sent while the first runs: queued behind it on the server.
    await page.fill('textarea[name="run-input"]', 'q-2');
    await page.click(`${form} button:text("Queue")`);
    const pending = await page.waitForSelector('section[aria-label="Runs"] li[data-status="pending"]:has-text("queued")');
    const second = (await pending.getAttribute('data-run'))!;
    await page.waitForSelector('section[aria-label="Runs"] h3:text("Runs · 1 queued")');
    expect((await runOf(threadId, second)).status).toBe('pending');
    expect(await accessibilityProblems(page)).toEqual([]);

    await page.click(`li[data-run="${second}"] button:text("Cancel")`);
    await page.waitForSelector(`li[data-run="${second}"][data-status="interrupted"]:has-text("cancelled")`);
    expect((await runOf(threadId, second)).status).toBe('interrupted');
    // The first runs on, untouched. A third is queued; once the first is cancelled, it runs and the page follows it.
    expect((await runOf(threadId, first)).status).toBe('running');
    await page.fill('textarea[name="run-input"]', 'q-3');
    await page.click(`${form} button:text("Queue")`);
    const third = (await (await page.waitForSelector('section[aria-label="Runs"] li[data-status="pending"]')).getAttribute('data-run'))!;
    await page.click(`li[data-run="${first}"] button:text("Cancel")`);
    await page.waitForSelector(`li[data-run="${third}"][data-status="running"]`);
    expect((await runOf(threadId, first)).status).toBe('interrupted');
    // Its events from the first (it was queued resumable): the metadata event, then its input's values.
    await page.waitForSelector(`[data-testid="event-log"] li[data-event="values"][data-event-run="${third}"]`, { state: 'attached' });
    await page.waitForSelector('section[aria-label="Conversation"] li:has-text("q-3")');
    await page.waitForSelector('[data-testid="thread-run-status"][data-status="running"]');
    await page.click(`li[data-run="${third}"] button:text("Cancel")`);
    await page.waitForSelector('[data-testid="thread-run-status"][data-status="cancelled"]');
    expect((await runOf(threadId, third)).status).toBe('interrupted');
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('lists the runs of every thread in the Runs tab, oldest first, and cancels one, then all pending, on the server', async () => {
    const [t1, t2] = [await post<{ thread_id: string }>('/threads', {}), await post<{ thread_id: string }>('/threads', {})];
    const a = await post<RunRow>(`/threads/${t1.thread_id}/runs`, forever('tab-1'));
    const b = await post<RunRow>(`/threads/${t1.thread_id}/runs`, forever('tab-2', { multitask_strategy: 'enqueue' }));
    const c = await post<RunRow>(`/threads/${t2.thread_id}/runs`, forever('tab-3', { after_seconds: 600 }));

    for (const scheme of ['light', 'dark'] as const) {
      const { page, problems } = await openStudio(scheme, 'Runs');
      if (scheme === 'light') {
        const rows = 'section[aria-label="Queue"] tbody tr';
        await page.waitForSelector(`${rows}[data-run="${a.run_id}"][data-status="running"]`);
        const listed = await page
          .locator(rows)
          .evaluateAll((els) =>
            els.map((el) => [el.getAttribute('data-run'), el.getAttribute('data-status'), el.querySelector('[data-thread]')?.getAttribute('data-thread')]),
          );
        expect(listed).toEqual([
          [a.run_id, 'running', t1.thread_id],
          [b.run_id, 'pending', t1.thread_id],
          [c.run_id, 'pending', t2.thread_id],
        ]);
        await page.waitForSelector('[data-testid="queue-summary"]:text("1 running · 2 queued")');
        expect(await page.locator(`${rows}[data-run="${c.run_id}"] td`).nth(3).textContent()).toBe('forever');
        expect(await accessibilityProblems(page)).toEqual([]);

        await page.click(`${rows}[data-run="${c.run_id}"] button:text("Cancel")`);
        await page.waitForSelector(`${rows}[data-run="${c.run_id}"]`, { state: 'detached' });
        expect((await runOf(t2.thread_id, c.run_id)).status).toBe('interrupted');
        expect((await runOf(t1.thread_id, b.run_id)).status).toBe('pending');
        await page.click('button:text("Cancel all pending")');
        await page.waitForSelector(`${rows}[data-run="${b.run_id}"]`, { state: 'detached' });
        expect((await runOf(t1.thread_id, b.run_id)).status).toBe('interrupted');
        // The running run is no pending one: it runs on.
        await page.waitForSelector('[data-testid="queue-summary"]:text("1 running · 0 queued")');
        expect((await runOf(t1.thread_id, a.run_id)).status).toBe('running');
      } else {
        await page.waitForSelector(`section[aria-label="Queue"] tr[data-run="${a.run_id}"]`);
        expect(await accessibilityProblems(page)).toEqual([]);
        await page.click(`tr[data-run="${a.run_id}"] button:text("Cancel")`);
        await page.waitForSelector('section[aria-label="Queue"] :text("No run is running or queued.")');
        expect((await runOf(t1.thread_id, a.run_id)).status).toBe('interrupted');
      }
      expect(problems).toEqual([]);
      await page.context().close();
    }
  }, 60_000);

  it('draws a graph for the assistant chosen in the Graph tab and runs it with that assistant', async () => {
    const mine = await post<{ assistant_id: string }>('/assistants', { graph_id: 'nested', name: 'nested-mine' });
    const { page, problems } = await openStudio('light', 'Graph');
    await page.getByRole('combobox', { name: 'Graph', exact: true }).selectOption('nested');
    await page.getByRole('combobox', { name: 'Assistant', exact: true }).selectOption({ label: 'nested-mine' });
    await page.waitForSelector('[data-node="inner:one"]');
    await page.fill('form[aria-label="Run the graph"] textarea', 'mine');
    await page.click('form[aria-label="Run the graph"] button:text("Send")');
    await page.waitForSelector('[data-node="inner:two"][data-state="done"]');
    const threadId = (await page.locator('[data-testid="run-status"] span').textContent())!.replace('thread ', '');
    expect((await api<RunRow[]>(`/threads/${threadId}/runs`)).map((r) => r.assistant_id)).toEqual([mine.assistant_id]);
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);
});
