/**
 * Studio's graph and live run, as a user sees them, on a page showing the `steps` graph of
 * test-projects/studio (whose nodes each wait for a gate file the test creates): the graph drawn,
 * then a message sent and the highlight followed from node to node until the run ends.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from '@jest/globals';
import type { Page } from 'playwright-core';

/** The state each node of the graph shows (`idle`, `running`, `done`), by node. */
async function nodeStates(page: Page): Promise<Record<string, string>> {
  const entries = (await page.evaluate(`[...document.querySelectorAll('[data-node]')].map((el) => [el.dataset.node, el.dataset.state])`)) as [string, string][];
  return Object.fromEntries(entries);
}

/** Waits until the nodes show `expected` (selectors only: the console's CSP allows no eval, so no waitForFunction). */
async function waitForStates(page: Page, expected: Record<string, string>): Promise<void> {
  try {
    for (const [node, state] of Object.entries(expected)) await page.waitForSelector(`[data-node="${node}"][data-state="${state}"]`, { state: 'attached' });
  } catch (error) {
    const states = await nodeStates(page);
    throw new Error(`expected ${JSON.stringify(expected)}, the graph shows ${JSON.stringify(states)}, beside it: ${await page.textContent('aside')}`, {
      cause: error,
    });
  }
  expect(await nodeStates(page)).toMatchObject(expected);
}

/** The `steps` graph drawn: its nodes (named for screen readers), its edges (the conditional ones dashed), a picker of both graphs. */
export async function expectStepsGraph(page: Page): Promise<void> {
  await page.waitForSelector('select');
  await page.selectOption('select', 'steps');
  // On a failure, what the page says instead.
  await page.waitForSelector('[data-node="plan"]').catch(async (error: Error) => {
    throw new Error(`${error.message}\nthe page shows: ${await page.textContent('main')}`);
  });
  expect(Object.keys(await nodeStates(page)).sort()).toEqual(['__end__', '__start__', 'act', 'plan', 'reply']);
  expect(await page.getAttribute('[data-node="plan"]', 'aria-label')).toBe('plan');
  // The project's graphs, sorted (other parts' tests add graphs of their own to it).
  const graphs = await page.locator('select').locator('option').allTextContents();
  expect(graphs).toEqual([...graphs].sort());
  expect(graphs).toEqual(expect.arrayContaining(['nested', 'steps']));
  const edges = (await page.evaluate(
    `[...document.querySelectorAll('[data-edge]')].map((el) => el.dataset.edge + (el.getAttribute('stroke-dasharray') ? ' dashed' : ''))`,
  )) as string[];
  expect(edges.sort()).toEqual(['__start__->plan', 'act->reply', 'plan->act dashed', 'plan->reply dashed', 'reply->__end__']);
  await expect(page.locator('ul[aria-label="Edges"] li').allTextContents()).resolves.toContain('plan to act (conditional)');
}

/**
 * Sends `text` from the message box and follows the run: each node highlighted while it executes
 * (the test opens its gate to let it finish), finished nodes marked, their latest update shown.
 */
export async function runThroughSteps(page: Page, gateDir: string, text: string): Promise<void> {
  const open = (node: string) => writeFile(join(gateDir, `${text}.${node}`), '');
  await page.fill('textarea', text);
  await page.click('button[type="submit"]:text("Send")');
  await waitForStates(page, { plan: 'running', act: 'idle', reply: 'idle' });
  expect(await page.getAttribute('[data-node="plan"]', 'aria-label')).toBe('plan, running');
  await open('plan');
  await waitForStates(page, { plan: 'done', act: 'running', reply: 'idle' });
  await open('act');
  await waitForStates(page, { plan: 'done', act: 'done', reply: 'running' });
  await open('reply');
  await waitForStates(page, { plan: 'done', act: 'done', reply: 'done' });
  await page.waitForSelector('[data-testid="run-status"][data-status="success"]');
  // A finished node's latest update.
  await page.click('[data-node="plan"]');
  await page.waitForSelector(`section[aria-label="Node details"]:has-text("plan for ${text}")`);
}
