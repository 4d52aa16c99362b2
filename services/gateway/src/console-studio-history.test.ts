/**
 * Studio's time travel in the console (Chromium, signed in, a real agent server behind a real
 * gateway; the `story` graph of test-projects/studio/src/history.ts: planner → writer → reviewer): a
 * thread's checkpoints as a timeline, an earlier checkpoint's state opened, the thread forked there
 * by re-running from it and by editing its state, each branch then in the timeline (the current one
 * marked, the thread's view following it) and in the API's history; a long history paged. axe in
 * light and dark mode; no request to another host.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Page } from 'playwright-core';
import { accessibilityProblems } from './__tests__/console-browser.js';
import { startStudioStack, type StudioStack } from './__tests__/studio-stack.js';

let studio: StudioStack;

beforeAll(async () => {
  studio = await startStudioStack('gw_studio_history');
}, 90_000);
afterAll(() => studio?.close());

/** The deployment's API as any client calls it (an API key): a GET, or a POST of `body`. */
const api = <T>(path: string, body?: unknown): Promise<T> => studio.api<T>(path, body === undefined ? {} : { method: 'POST', body });

type Story = { topic: string; plan: string; draft: string; review: string };
type Checkpoint = {
  values: Story;
  next: string[];
  checkpoint: { checkpoint_id: string };
  parent_checkpoint: { checkpoint_id: string } | null;
  metadata: { step: number; source: string };
};

/** A thread of the `story` graph run `runs` times (topics `cats`, `cats-2`, …) by another client. */
async function storyThread(runs = 1): Promise<string> {
  const { thread_id } = await api<{ thread_id: string }>('/threads', {});
  for (let i = 1; i <= runs; i += 1) {
    await api(`/threads/${thread_id}/runs/wait`, { assistant_id: 'story', input: { topic: i === 1 ? 'cats' : `cats-${i}` } });
  }
  return thread_id;
}

/** The thread's history in Studio, signed in. */
async function openHistory(threadId: string, colorScheme: 'light' | 'dark'): Promise<{ page: Page; problems: string[] }> {
  const tab = await studio.studio(colorScheme, 'Threads');
  await tab.page.click(`[data-thread="${threadId}"]`);
  await tab.page.click('section[aria-label="History"] button:text("History (time travel)")');
  await tab.page.waitForSelector('ol[aria-label="Timeline"] li[data-checkpoint]');
  return tab;
}

const timeline = 'ol[aria-label="Timeline"]';
const steps = (page: Page, within = timeline) =>
  page.locator(`${within} li[data-checkpoint]`).evaluateAll((els) => els.map((el) => `${el.getAttribute('data-step')} ${el.getAttribute('data-source')}`));
const stateView = 'section[aria-label="State"]';

describe('Studio’s time travel', () => {
  it('opens an earlier checkpoint, forks there by re-running and by editing the state, and shows every branch', async () => {
    const threadId = await storyThread();
    const history = await api<Checkpoint[]>(`/threads/${threadId}/history?limit=20`);
    const afterPlan = history.find((c) => c.metadata.step === 1)!;
    const { page, problems } = await openHistory(threadId, 'light');
    // Oldest first, one line: the input, then planner, writer and reviewer each a step; the last is the head.
    expect(await steps(page)).toEqual(['-1 input', '0 loop', '1 loop', '2 loop', '3 loop']);
    await page.waitForSelector(`${timeline} li[data-step="3"][data-head]:has-text("ran reviewer")`);
    expect(await accessibilityProblems(page)).toEqual([]);

    // The state after `planner`: a plan, no draft yet, `writer` next.
    const id = afterPlan.checkpoint.checkpoint_id;
    await page.click(`li[data-checkpoint="${id}"] button`);
    const panel = `[data-open-checkpoint="${id}"]`;
    await page.waitForSelector(`${panel} [data-testid="checkpoint-values"]:has-text("plan for cats")`);
    expect(await page.locator(`${panel} [data-testid="checkpoint-values"] li`).allTextContents()).toEqual([
      'topic: cats',
      'plan: plan for cats',
      'draft: ',
      'review: ',
    ]);
    expect(await page.locator(`${panel} [data-testid="checkpoint-next"]`).textContent()).toBe('writer');

    // Re-run from it: `writer` and `reviewer` run again on a branch of their own, which the thread follows.
    await page.click(`${panel} button:text("Re-run from here")`);
    await page.waitForSelector('[data-testid="thread-run-status"][data-status="done"]');
    const [rerun, first] = await api<{ run_id: string }[]>(`/threads/${threadId}/runs`);
    await page.waitForSelector(`${stateView}:has-text("by run ${rerun!.run_id}")`);
    const fork = `${timeline} li[data-fork="${id}"]`;
    await page.waitForSelector(`${fork} > ol > li[data-branch]:nth-child(2)[data-current]`);
    expect(await page.locator(`${fork} > ol > li[data-branch]`).count()).toBe(2);
    // The first branch is the first run's, the second the re-run's: a copy of the checkpoint, then writer and reviewer.
    expect(await steps(page, `${fork} > ol > li[data-branch]:nth-child(1)`)).toEqual(['2 loop', '3 loop']);
    expect(await steps(page, `${fork} > ol > li[data-branch]:nth-child(2)`)).toEqual(['2 fork', '3 loop', '4 loop']);
    const head = (await api<Checkpoint>(`/threads/${threadId}/state`)).checkpoint.checkpoint_id;
    await page.waitForSelector(`[data-open-checkpoint="${head}"]:has-text("(the head)")`);
    expect(await accessibilityProblems(page)).toEqual([]);

    // Edit the state at the same checkpoint: checked as typed, then written as a third branch.
    await page.click(`li[data-checkpoint="${id}"] button`);
    await page.click(`${panel} button:text("Edit state")`);
    const values = `${panel} form[aria-label="Edit the state at this checkpoint"] textarea`;
    await page.fill(values, '{"topic": "cats", "plan": ');
    await page.waitForSelector(`${panel} :text("Not JSON")`);
    expect(await page.locator(`${panel} button:text("Save as a new branch")`).isDisabled()).toBe(true);
    await page.fill(values, JSON.stringify({ ...afterPlan.values, plan: 'plan for dogs' }));
    await page.click(`${panel} button:text("Save as a new branch")`);
    await page.waitForSelector(`${fork} > ol > li[data-branch]:nth-child(3)[data-current]`);
    expect(await steps(page, `${fork} > ol > li[data-branch]:nth-child(3)`)).toEqual(['2 update']);
    const edited = await api<Checkpoint>(`/threads/${threadId}/state`);
    expect({ plan: edited.values.plan, next: edited.next, source: edited.metadata.source }).toEqual({
      plan: 'plan for dogs',
      next: ['writer'],
      source: 'update',
    });
    // The thread's view and the open checkpoint follow the new branch.
    await page.waitForSelector(`${stateView}:has-text("plan for dogs")`);
    await page.waitForSelector(`[data-open-checkpoint="${edited.checkpoint.checkpoint_id}"]:has-text("(the head)")`);

    // The branches, the open head and its edit form in dark mode too.
    const headPanel = `[data-open-checkpoint="${edited.checkpoint.checkpoint_id}"]`;
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.waitForSelector('html[data-theme="dark"]', { state: 'attached' });
    await page.click(`${headPanel} button:text("Edit state")`);
    await page.waitForSelector(`${headPanel} :text("Nothing changed yet")`);
    expect(await accessibilityProblems(page)).toEqual([]);
    await page.click(`${headPanel} button:text("Cancel")`);

    // Every branch is the thread's, as any API client sees it: three children of the checkpoint.
    const after = await api<Checkpoint[]>(`/threads/${threadId}/history?limit=50`);
    expect(after.filter((c) => c.parent_checkpoint?.checkpoint_id === id).map((c) => c.metadata.source)).toEqual(['update', 'fork', 'loop']);
    expect(after.filter((c) => c.metadata.step >= 3).map((c) => c.values.draft)).toEqual([
      `draft of plan for cats by run ${rerun!.run_id}`,
      `draft of plan for cats by run ${rerun!.run_id}`,
      `draft of plan for cats by run ${first!.run_id}`,
    ]);

    // The edited branch goes on from the edit.
    await page.click(`${headPanel} button:text("Re-run from here")`);
    await page.waitForSelector(`${stateView}:has-text("reviewed: draft of plan for dogs")`);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('pages a long history: the latest 50 checkpoints first, then the earlier ones', async () => {
    // 11 runs of 5 checkpoints each.
    const threadId = await storyThread(11);
    const { page, problems } = await openHistory(threadId, 'dark');
    await page.waitForSelector(`section[aria-label="History"] h3:text("Checkpoints · 50+")`);
    expect(await page.locator(`${timeline} li[data-checkpoint]`).count()).toBe(50);
    expect(await accessibilityProblems(page)).toEqual([]);
    await page.click('button:text("Load earlier checkpoints")');
    await page.waitForSelector(`section[aria-label="History"] h3:text("Checkpoints · 55")`);
    // One line from the first input to the head, with no checkpoint twice.
    const all = await steps(page);
    expect({ count: all.length, first: all[0], last: all.at(-1) }).toEqual({ count: 55, first: '-1 input', last: '53 loop' });
    expect(await page.locator(`${timeline} li[data-fork]`).count()).toBe(0);
    await page.click(`${timeline} li[data-checkpoint] >> nth=0`);
    await page.waitForSelector('[data-open-checkpoint] [data-testid="checkpoint-next"]:text("__start__")');
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);
});
