/**
 * Studio's Assistants tab in the console (Chromium), signed in, against a real agent server behind
 * the gateway: a graph's assistants and versions, its context edited in the form generated from the
 * graph's context schema (a wrong number refused) and saved as a new version that runs then use, an
 * older version made active again, the JSON view, an assistant created from a version; axe in light
 * and dark mode; no request to another host. The `greeter` graph (test-projects/studio) replies with
 * the context it ran with, so each run shows which version ran.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Page } from 'playwright-core';
import { accessibilityProblems } from './__tests__/console-browser.js';
import { startStudioStack, type StudioStack } from './__tests__/studio-stack.js';

let studio: StudioStack;

beforeAll(async () => {
  studio = await startStudioStack('gw_studio_assistants');
}, 90_000);
afterAll(() => studio?.close());

/** The agent server's API through the gateway, as any API client calls it. */
const api = <T>(method: string, path: string, body?: unknown) => studio.api<T>(path, { method, body });

interface Assistant {
  assistant_id: string;
  name: string;
  version: number;
  context: Record<string, unknown>;
  metadata: Record<string, unknown>;
}

/** The context a run of `assistant` (an id, or the graph's name: its system assistant) was given, as the graph replies it. */
async function contextOfRun(assistant: string): Promise<unknown> {
  const values = await api<{ messages: { content: string }[] }>('POST', '/runs/wait', {
    assistant_id: assistant,
    input: { messages: [{ role: 'user', content: 'hi' }] },
  });
  return JSON.parse(values.messages.at(-1)!.content.replace(/^context: /, ''));
}

const versionCount = async (assistantId: string) => (await api<unknown[]>('POST', `/assistants/${assistantId}/versions`, { limit: 100 })).length;

async function openAssistants(colorScheme: 'light' | 'dark') {
  const tab = await studio.studio(colorScheme, 'Assistants');
  await tab.page.getByLabel('Graph', { exact: true }).selectOption('greeter');
  await tab.page.waitForSelector('nav[aria-label="Assistants of greeter"] button[aria-current="true"]:has-text("system")');
  return tab;
}

/** The version marked active in the versions table. */
const activeVersion = async (page: Page) => Number(await page.locator('tr[data-version]:has(span:text-is("active"))').getAttribute('data-version'));
/** The Context fieldset (its legend names it). */
const contextForm = (page: Page) => page.getByRole('group', { name: 'Context', exact: true });

describe('Studio’s Assistants tab', () => {
  it('edits the context in the generated form, saves new versions that runs use, makes an older one active again, creates an assistant from a version', async () => {
    const { page, problems } = await openAssistants('light');
    const system = (await api<Assistant[]>('POST', '/assistants/search', { graph_id: 'greeter', metadata: { created_by: 'system' } }))[0]!;
    expect(await activeVersion(page)).toBe(1);
    expect(await accessibilityProblems(page)).toEqual([]);

    // A field of each shape the schema has: inputs for the simple ones, a fieldset for the nested object, JSON for the array.
    const context = contextForm(page);
    await context.getByLabel('greeting').fill('hola');
    await context.getByLabel('temperature').fill('warm-ish');
    await context.getByLabel('max_turns').fill('3');
    await context.getByLabel('verbose').check();
    await context.getByLabel('tone').selectOption('warm');
    await context.getByRole('group', { name: 'limits', exact: true }).getByLabel('tokens').fill('100');
    await context.getByLabel('tags').fill('["a", "b"]');

    // A wrong number is refused, with a message at its field; nothing is saved.
    await page.click('button:text("Save as a new version")');
    await page.waitForSelector('[role="alert"]:has-text("Not saved: correct the marked fields.")');
    expect(await context.getByLabel('temperature').getAttribute('aria-invalid')).toBe('true');
    await expect(context.locator('p:text("Enter a number.")').count()).resolves.toBe(1);
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(await versionCount(system.assistant_id)).toBe(1);
    // So is a fraction where a whole number goes.
    await context.getByLabel('temperature').fill('0.5');
    await context.getByLabel('max_turns').fill('2.5');
    await page.click('button:text("Save as a new version")');
    await page.waitForSelector('p:text("Enter a whole number.")');
    expect(await versionCount(system.assistant_id)).toBe(1);

    await context.getByLabel('max_turns').fill('3');
    await page.click('button:text("Save as a new version")');
    await page.waitForSelector('[role="status"]:has-text("Saved as version 2, now the active one.")');
    expect(await activeVersion(page)).toBe(2);
    const v2 = { greeting: 'hola', temperature: 0.5, max_turns: 3, verbose: true, tone: 'warm', limits: { tokens: 100 }, tags: ['a', 'b'] };
    // Runs of the graph's assistant use the new version.
    expect(await contextOfRun(system.assistant_id)).toEqual(v2);
    expect(await contextOfRun('greeter')).toEqual(v2);

    // The older version made the active one again: runs use it.
    await page.click('button[aria-label="Make active: v1"]');
    await page.waitForSelector('[role="status"]:has-text("Version 1 is the active one.")');
    expect(await activeVersion(page)).toBe(1);
    expect(await contextOfRun(system.assistant_id)).toEqual({});

    // The JSON view of version 2, edited there and saved: version 3, active.
    await page.click('button[aria-label="Open v2"]');
    await expect(context.getByLabel('greeting').inputValue()).resolves.toBe('hola');
    await context.locator('button:text-is("JSON")').click();
    const json = context.getByLabel('Context (JSON)');
    expect(JSON.parse(await json.inputValue())).toEqual(v2);
    await json.fill('{"greeting": "hej", "tone": "plain",}');
    await page.click('button:text("Save as a new version")');
    await page.waitForSelector('p:has-text("Not valid JSON")');
    expect(await versionCount(system.assistant_id)).toBe(2);
    await json.fill('{"greeting": "hej", "tone": "plain"}');
    // Back to the form: the JSON's values in their inputs.
    await context.locator('button:text-is("Form")').click();
    await expect(context.getByLabel('tone').inputValue()).resolves.toBe('0');
    await page.click('button:text("Save as a new version")');
    await page.waitForSelector('[role="status"]:has-text("Saved as version 3, now the active one.")');
    expect(await contextOfRun(system.assistant_id)).toEqual({ greeting: 'hej', tone: 'plain' });

    // A new assistant from version 2: its graph, config and context, and the name given.
    await page.click('button[aria-label="Create from this version (v2)"]');
    await page.fill('dialog[open] input', 'Spanish greeter');
    expect(await accessibilityProblems(page)).toEqual([]);
    await page.click('dialog[open] button:text("Create assistant")');
    await page.waitForSelector('nav[aria-label="Assistants of greeter"] button[aria-current="true"]:has-text("Spanish greeter")');
    expect(await activeVersion(page)).toBe(1);
    const created = (await api<Assistant[]>('POST', '/assistants/search', { graph_id: 'greeter', name: 'Spanish greeter' }))[0]!;
    expect(created.context).toEqual(v2);
    expect(await contextOfRun(created.assistant_id)).toEqual(v2);
    // The graph's own assistant is as it was.
    expect(await contextOfRun(system.assistant_id)).toEqual({ greeting: 'hej', tone: 'plain' });
    expect(problems).toEqual([]);
    await page.context().close();
  }, 90_000);

  it('is accessible in dark mode: the form, the JSON view and the dialog', async () => {
    const { page, problems } = await openAssistants('dark');
    await contextForm(page).getByLabel('greeting').waitFor();
    expect(await accessibilityProblems(page)).toEqual([]);
    await contextForm(page).locator('button:text-is("JSON")').click();
    expect(await accessibilityProblems(page)).toEqual([]);
    await page.click('button[aria-label="Create from this version (v1)"]');
    await page.waitForSelector('dialog[open]');
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);
});
