/**
 * Studio's Memory and Crons tabs in the console (Chromium), signed in, through the gateway's
 * deployment URL to real agent servers: one whose project has semantic search (the store fixture
 * of the agent runtime: `store.index` with a toy embedding that counts topic words, graph
 * `memory`), one without (test-projects/studio). What the UI does is checked with the official SDK
 * from the test, as any API client sees it; axe in light and dark mode; no request to another host.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import type { Browser, Page } from 'playwright-core';
import { createTestDatabase, launchChromium, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from '../../agent-runtime/src/server.js';
import { startTestServer } from '../../agent-runtime/src/__tests__/fixtures.js';
import { startAgentStack, type AgentStack } from './__tests__/agent-stack.js';
import { accessibilityProblems, newConsoleTab, signIn } from './__tests__/console-browser.js';

const storeProject = fileURLToPath(new URL('../../agent-runtime/test-projects/store/langgraph.json', import.meta.url));
const studioProject = fileURLToPath(new URL('../test-projects/studio/langgraph.json', import.meta.url));
const credential = 'studio-credential';

let testDb: TestDatabase;
let stack: AgentStack;
/** An agent server whose project has no store index, routed as a second deployment of the same tenant. */
let plain: RunningAgentServer;
let plainId: string;
let browser: Browser;
/** The SDK as an API client of the deployment (the tenant's API key). */
let sdk: Client;

beforeAll(async () => {
  testDb = await createTestDatabase('gw_studio_memory');
  stack = await startAgentStack(testDb.url, { agent: { configPath: storeProject, deploymentCredential: credential } });
  plain = await startTestServer(testDb.url, { configPath: studioProject, schema: 'agent_plain', workers: 0, deploymentCredential: credential });
  plainId = randomUUID();
  stack.fake.routes.set(plainId, { tenantId: stack.tenantId, upstreamUrl: plain.url, customAuth: false, upstreamCredential: credential });
  sdk = new Client({ apiUrl: stack.deploymentUrl, apiKey: stack.key });
  browser = await launchChromium();
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await plain?.close();
  await stack?.close();
  await testDb?.drop();
});

async function openStudio(colorScheme: 'light' | 'dark', tab: string, deploymentId = stack.deploymentId): Promise<{ page: Page; problems: string[] }> {
  const opened = await newConsoleTab(browser, stack.gateway.url, colorScheme);
  const url = `${stack.gateway.url}/deployments/${deploymentId}/studio?tab=${tab}`;
  await opened.page.goto(url);
  await opened.page.waitForURL(/\/sign-in/);
  await signIn(opened.page, stack.key);
  await opened.page.waitForURL(url);
  return opened;
}

const attribute = (page: Page, selector: string, name: string) =>
  page.evaluate(`[...document.querySelectorAll(${JSON.stringify(selector)})].map((el) => el.getAttribute(${JSON.stringify(name)}))`) as Promise<string[]>;

/** The namespaces the browser lists (dotted), once it lists `expected`'s first. */
async function namespacesShown(page: Page, first: string): Promise<string[]> {
  await page.waitForSelector(`[data-namespace="${first}"]`);
  return attribute(page, '[data-namespace]', 'data-namespace');
}

/** The items listed (`namespace/key`), in order, once the list shows each of `expected` and `expected[0]` first. */
async function itemsShown(page: Page, expected: string[]): Promise<string[]> {
  for (const item of expected) await page.waitForSelector(`tr[data-item="${item}"]`);
  await page.waitForSelector(`tr[data-item]:first-child[data-item="${expected[0]}"]`);
  return attribute(page, 'tr[data-item]', 'data-item');
}

async function searchFor(page: Page, query: string, filter = ''): Promise<void> {
  await page.fill('input[type="search"]', query);
  await page.fill('form[role="search"] input[type="text"]', filter);
  await page.click('form[role="search"] button[type="submit"]');
}

describe('Studio’s Memory tab', () => {
  it('browses namespaces, finds an item by semantic search, opens, edits and deletes it (light mode)', async () => {
    await sdk.store.putItem(['users', 'alice', 'notes'], 'pets', { text: 'my cat and the cat next door', kind: 'note' });
    await sdk.store.putItem(['users', 'alice', 'notes'], 'garage', { text: 'the car needs tyres', kind: 'note' });
    await sdk.store.putItem(['users', 'bob'], 'tunes', { text: 'music, cat videos', kind: 'pref' });
    const { page, problems } = await openStudio('light', 'memory');

    // Namespaces one level at a time; the items under the open one.
    expect(await namespacesShown(page, 'users')).toEqual(['users']);
    await page.click('[data-namespace="users"]');
    expect(await namespacesShown(page, 'users.alice')).toEqual(['users.alice', 'users.bob']);
    await page.click('[data-namespace="users.alice"]');
    expect(await namespacesShown(page, 'users.alice.notes')).toEqual(['users.alice.notes']);
    // Newest first.
    expect(await itemsShown(page, ['users.alice.notes/garage', 'users.alice.notes/pets'])).toEqual(['users.alice.notes/garage', 'users.alice.notes/pets']);
    await page.click('ol[aria-label="Open namespace"] button:text("All")');

    // A text query ranks by meaning (the project's index), a filter on value fields narrows.
    await searchFor(page, 'cats', '{"kind": "note"}');
    const notes = ['users.alice.notes/pets', 'users.alice.notes/garage'];
    expect(await itemsShown(page, notes)).toEqual(notes);
    await page.waitForSelector('th:text("Score")');
    await searchFor(page, 'cats');
    const all = ['users.alice.notes/pets', 'users.bob/tunes', 'users.alice.notes/garage'];
    expect(await itemsShown(page, all)).toEqual(all);
    // A filter that is not a JSON object is not sent.
    await page.fill('form[role="search"] input[type="text"]', '["kind"]');
    await page.waitForSelector('form[role="search"] button[type="submit"]:disabled');
    await page.waitForSelector('form[role="search"] :text("Must be a JSON object")');
    await page.fill('form[role="search"] input[type="text"]', '');

    // Opened: its value as a tree.
    await page.click('tr[data-item="users.alice.notes/pets"] button');
    await page.waitForSelector('[data-testid="item-value"]:has-text("my cat and the cat next door")');
    expect(await accessibilityProblems(page)).toEqual([]);

    // Edited as JSON: invalid text cannot be saved; the saved value is the store's, embedded again.
    await page.click('button:text-is("Edit")');
    const editor = page.locator('form[aria-label="Edit item pets"] textarea');
    await editor.fill('{"text": "a dog",');
    await page.waitForSelector('form[aria-label="Edit item pets"] button[type="submit"]:disabled');
    expect(await editor.getAttribute('aria-invalid')).toBe('true');
    await editor.fill('{"text": "a dog and a dog toy", "kind": "note"}');
    await page.click('form[aria-label="Edit item pets"] button[type="submit"]');
    await page.waitForSelector('[data-testid="item-value"]:has-text("a dog and a dog toy")');
    expect((await sdk.store.getItem(['users', 'alice', 'notes'], 'pets'))?.value).toEqual({ text: 'a dog and a dog toy', kind: 'note' });
    await searchFor(page, 'dogs');
    expect(await itemsShown(page, all)).toEqual(all);

    // Deleted after a confirmation: gone from the list and from the store.
    await page.click('button:text-is("Delete")');
    await page.waitForSelector('dialog[open]:has-text("Delete item pets?")');
    expect(await accessibilityProblems(page)).toEqual([]);
    await page.click('dialog[open] button:text("Delete this item")');
    await page.waitForSelector('tr[data-item="users.alice.notes/pets"]', { state: 'detached' });
    await page.waitForSelector('[data-testid="item-value"]', { state: 'detached' });
    expect(await sdk.store.getItem(['users', 'alice', 'notes'], 'pets')).toBeNull();
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('puts a new item from the form, in the open namespace', async () => {
    const { page, problems } = await openStudio('light', 'memory');
    await page.click('[data-namespace="users"]');
    await page.click('[data-namespace="users.bob"]');
    await page.click('button:text("New item")');
    const form = page.locator('dialog[open] form[aria-label="New item"]');
    expect(await form.getByLabel('Namespace').inputValue()).toBe('users.bob');
    await form.getByLabel('Namespace').fill('users.bob.');
    await form.getByLabel('Key').fill('diet');
    await form.getByLabel('Value (JSON object)').fill('{"text": "food"}');
    await page.waitForSelector('dialog[open] button[type="submit"]:disabled');
    await form.getByLabel('Namespace').fill('users.bob.prefs');
    await page.click('dialog[open] button[type="submit"]');
    // The new item opens.
    await page.waitForSelector('[data-testid="item-value"]:has-text("food")');
    expect((await sdk.store.getItem(['users', 'bob', 'prefs'], 'diet'))?.value).toEqual({ text: 'food' });
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('says so when the project has no semantic search, and lists what the namespace and filter match (dark mode)', async () => {
    const other = new Client({ apiUrl: `${stack.gateway.url}/d/${plainId}`, apiKey: stack.key });
    await other.store.putItem(['docs'], 'readme', { text: 'about cats' });
    const { page, problems } = await openStudio('dark', 'memory', plainId);
    expect(await itemsShown(page, ['docs/readme'])).toEqual(['docs/readme']);
    await searchFor(page, 'cats');
    await page.waitForSelector('[role="note"]:has-text("no semantic search")');
    await page.waitForSelector('[role="note"]:has-text("store.index")');
    expect(await itemsShown(page, ['docs/readme'])).toEqual(['docs/readme']);
    expect(await page.locator('th:text("Score")').count()).toBe(0);
    await page.click('tr[data-item="docs/readme"] button');
    await page.waitForSelector('[data-testid="item-value"]:has-text("about cats")');
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);
});

describe('Studio’s Crons tab', () => {
  it('creates a cron and shows its next run, pauses, resumes and deletes it (light mode)', async () => {
    const { page, problems } = await openStudio('light', 'crons');
    await page.waitForSelector(':text("No crons on this agent server.")');
    const form = page.locator('form[aria-labelledby="crons-new"]');
    await page.waitForSelector('form[aria-labelledby="crons-new"] option', { state: 'attached' });
    expect(await form.getByLabel('Assistant').locator('option').allTextContents()).toEqual(['memory']);

    // The server checks the schedule and says what is wrong.
    await form.getByLabel('Schedule').fill('every morning');
    await page.click('button:text("Create cron")');
    await page.waitForSelector('form[aria-labelledby="crons-new"] [role="alert"]:has-text("schedule")');

    // Every January 1st at 09:00 UTC.
    await form.getByLabel('Schedule').fill('0 9 1 1 *');
    await form.getByLabel('Input (JSON object)').fill('{"op": "get", "namespace": ["x"], "key": "k"}');
    await page.click('button:text("Create cron")');
    await page.waitForSelector('tr[data-cron][data-state="enabled"]');
    const [cron] = await sdk.crons.search();
    expect(cron).toMatchObject({ schedule: '0 9 1 1 *', enabled: true, thread_id: null, payload: { input: { op: 'get', namespace: ['x'], key: 'k' } } });
    const next = new Date(cron!.next_run_date!);
    expect([next.getUTCMonth(), next.getUTCDate(), next.getUTCHours(), next.getUTCMinutes()]).toEqual([0, 1, 9, 0]);
    // The next run the page shows is the server's.
    expect(await page.getAttribute(`tr[data-cron="${cron!.cron_id}"] [data-testid="next-run"] time`, 'datetime')).toBe(cron!.next_run_date);
    expect(await accessibilityProblems(page)).toEqual([]);

    // Paused: the API says so, and it has no next run.
    await page.click(`tr[data-cron="${cron!.cron_id}"] button:text("Pause")`);
    await page.waitForSelector(`tr[data-cron="${cron!.cron_id}"][data-state="paused"]`);
    expect(await sdk.crons.search()).toEqual([expect.objectContaining({ cron_id: cron!.cron_id, enabled: false, next_run_date: null })]);
    expect(await page.textContent(`tr[data-cron="${cron!.cron_id}"] [data-testid="next-run"]`)).toBe('none');
    await page.click(`tr[data-cron="${cron!.cron_id}"] button:text("Resume")`);
    await page.waitForSelector(`tr[data-cron="${cron!.cron_id}"][data-state="enabled"]`);
    expect(await sdk.crons.search()).toEqual([expect.objectContaining({ enabled: true, next_run_date: cron!.next_run_date })]);

    // Deleted after a confirmation.
    await page.click(`tr[data-cron="${cron!.cron_id}"] button:text("Delete")`);
    await page.waitForSelector('dialog[open]:has-text("Delete cron 0 9 1 1 *")');
    await page.click('dialog[open] button:text("Delete this cron")');
    await page.waitForSelector(':text("No crons on this agent server.")');
    expect(await sdk.crons.search()).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('creates a cron on a thread, and is accessible in dark mode', async () => {
    const thread = await sdk.threads.create();
    const { page, problems } = await openStudio('dark', 'crons');
    const form = page.locator('form[aria-labelledby="crons-new"]');
    await form.getByLabel('Schedule').fill('@yearly');
    await form.getByLabel('Thread (optional)').fill('not-a-thread');
    await page.waitForSelector('button:text("Create cron"):disabled');
    await form.getByLabel('Thread (optional)').fill(thread.thread_id);
    await page.click('button:text("Create cron")');
    await page.waitForSelector('tr[data-cron][data-state="enabled"]');
    expect(await sdk.crons.search({ threadId: thread.thread_id })).toEqual([expect.objectContaining({ schedule: '@yearly', thread_id: thread.thread_id })]);
    expect(await page.textContent('tr[data-cron] td:nth-child(3)')).toBe(thread.thread_id.slice(0, 8));
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);
});
