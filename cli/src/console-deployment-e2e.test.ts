/**
 * The console's deployment page (`/deployments/{deployment_id}`) in real Chromium against the whole
 * platform as `berth up` starts it (gateway serving the built console, control plane deploying into
 * the tests' Podman engine): a deploy started with the built `berth` binary shows up and moves on to
 * DEPLOYED without a reload, the server log is followed live, a second revision and a rollback to
 * the first move the deployment URL's traffic, a run it served is found as a trace (through the
 * deployment's project and its runs table) and its node's output read, the webhook secret is rotated (shown once), and the
 * deployment is deleted after typing its name. Axe finds nothing serious in either theme; the page
 * asks no other host.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { cp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import { launchChromium, until } from '@berth/testing';
import type { Browser, Page } from 'playwright-core';
import { accessibilityProblems, newConsoleTab, signIn, type ConsoleTab } from '../../services/gateway/src/__tests__/console-browser.js';
import type { RunningPlatform } from './platform.js';
import { startTestPlatform, testEngine, type TestPlatform } from './__tests__/test-platform.js';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
const repo = fileURLToPath(new URL('../..', import.meta.url));
const NAME = 'console-agent';
/** A deploy (install, build, start) of the small project on a busy 2-core machine. */
const DEPLOY_MS = 240_000;

let stack: TestPlatform;
let platform: RunningPlatform;
let browser: Browser;
let project: string;
let apiKey: string;

function berth(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      {
        cwd: project,
        env: { PATH: process.env.PATH ?? '', HOME: stack.temp, XDG_CONFIG_HOME: join(stack.temp, 'config'), BERTH_STATE_DIR: join(stack.temp, 'cli-state') },
        timeout: DEPLOY_MS,
        maxBuffer: 64 * 1024 * 1024,
      },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** The project's graph at `version`: it answers `<version>: <text>` and prints a line saying so (N more for `lines:N`). */
async function writeGraph(version: string): Promise<void> {
  await writeFile(
    join(project, 'src/graph.ts'),
    `import { AIMessage } from '@langchain/core/messages';
import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';

const State = new StateSchema({ messages: MessagesValue });

function respond(state: typeof State.State) {
  const text = state.messages.at(-1)?.text ?? '';
  console.log('${version} answered ' + text);
  // "lines:N" prints N numbered lines (a long server log).
  if (text.startsWith('lines:')) for (let i = 1; i <= Number(text.slice(6)); i++) console.log('${version} line ' + i);
  return { messages: [new AIMessage('${version}: ' + text)] };
}

export const graph = new StateGraph(State).addNode('respond', respond).addEdge('__start__', 'respond').addEdge('respond', '__end__').compile();
`,
  );
}

/** `datetime-local` text of now plus `minutes`, in local time (the browser's zone is the test's). */
function localMinute(minutes: number): string {
  const at = new Date(Date.now() + minutes * 60_000);
  return new Date(at.getTime() - at.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

async function reply(url: string, text: string): Promise<string> {
  const client = new Client({ apiUrl: url, apiKey, callerOptions: { maxRetries: 0 } });
  const state = (await client.runs.wait(null, 'echo', { input: { messages: [{ role: 'user', content: text }] } })) as { messages: { content: unknown }[] };
  return String(state.messages.at(-1)?.content);
}

async function api(path: string, init: { method?: string; json?: unknown } = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(`${platform.url}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': apiKey, ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function signedInTab(colorScheme: 'light' | 'dark' = 'light', path = '/deployments'): Promise<ConsoleTab> {
  const tab = await newConsoleTab(browser, platform.url, colorScheme);
  await tab.page.goto(`${platform.url}/sign-in?redirect=${encodeURIComponent(path)}`);
  await signIn(tab.page, apiKey);
  return tab;
}

const revisionRows = (page: Page) => page.locator('section[aria-labelledby=revisions] tbody tr');
/** The timeline's step `status` in state `state` (done, now, failed, later). */
const step = (page: Page, status: string, state: string) => page.locator(`[data-testid=timeline] li[data-state=${state}]`, { hasText: status });

beforeAll(async () => {
  stack = await startTestPlatform('console-deployment', { sandboxes: testEngine() });
  platform = stack.platform;
  apiKey = stack.adminKey;
  project = join(stack.temp, NAME);
  await cp(join(repo, 'examples/echo-agent'), project, { recursive: true, filter: (path) => !path.includes('node_modules') });
  await writeFile(join(project, '.env'), `BERTH_API_KEY=${apiKey}\nBERTH_HOST_URL=${platform.url}\n`);
  await writeGraph('v1');
  browser = await launchChromium();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

describe("a deployment's page", () => {
  let tab: ConsoleTab;
  let deploymentId: string;
  let url: string;
  let firstRevision: string;
  /** Full page loads of the tab after signing in: the page must follow every change without one. */
  let loads = 0;

  it(
    'shows a deploy started with the CLI appear and move on to DEPLOYED, without a reload',
    async () => {
      tab = await signedInTab();
      const { page } = tab;
      await page.waitForSelector('h1:text("Deployments")');
      page.on('load', () => loads++);
      const deploy = berth(['deploy']);
      // The list reads the deployments again by itself; its row links to the page.
      await page.locator(`a:text-is("${NAME}")`).click({ timeout: 60_000 });
      await page.waitForSelector(`h1:text-is("${NAME}")`);
      deploymentId = new URL(page.url()).pathname.split('/').at(-1)!;
      // Caught on its way (the upload and the install take far longer than the list's refresh).
      await step(page, '', 'now').first().waitFor();
      await step(page, 'DEPLOYED', 'done').waitFor({ timeout: DEPLOY_MS });
      const done = await deploy;
      expect({ code: done.code, stderr: done.stderr }).toEqual({ code: 0, stderr: '' });
      firstRevision = /Revision (\S+): DEPLOYED/.exec(done.stdout)![1]!;
      for (const status of ['QUEUED', 'BUILDING', 'DEPLOYING']) await expect(step(page, status, 'done').count()).resolves.toBe(1);
      await page.locator('[data-testid=deployment-status]', { hasText: 'READY' }).waitFor();
      await expect(revisionRows(page).first().textContent()).resolves.toMatch(new RegExp(`^${firstRevision.slice(0, 8)}serving.*DEPLOYED`));
      url = (await page.getByTestId('deployment-url').textContent())!;
      expect(url).toBe(`${platform.url}/d/${deploymentId}`);
      const session = (await api(`/v2/deployments/${deploymentId}`)).body.session_id as string;
      expect(await page.locator('a', { hasText: `Traces of ${NAME}` }).getAttribute('href')).toBe(`/traces/${session}`);
      expect(loads).toBe(0);
      expect(await accessibilityProblems(page)).toEqual([]);
      expect(tab.problems).toEqual([]);
    },
    DEPLOY_MS + 60_000,
  );

  it('follows the server log live (a line the agent server prints appears) and reads a time range of it', async () => {
    const { page } = tab;
    await page.click('button[aria-pressed]:text("Server log")');
    await page.waitForSelector('[data-testid=log-state]:text("Live")');
    expect(new URL(page.url()).searchParams.get('log')).toBe('deploy');
    expect(await reply(url, 'marker-4711')).toBe('v1: marker-4711');
    await page.locator('[data-testid=log-lines]', { hasText: 'v1 answered marker-4711' }).waitFor();

    // A time range (datetime-local fields, to the minute): read as pages, kept in the URL.
    await page.getByLabel('Since').fill(localMinute(-5));
    await page.getByLabel('Until (empty: follow live)').fill(localMinute(2));
    await page.click('button:text-is("Show")');
    await page.waitForSelector('[data-testid=log-state]:text-matches("^[0-9]+ lines$")');
    expect(new URL(page.url()).searchParams.get('until')).toBe(new Date(localMinute(2)).toISOString());
    await page.locator('[data-testid=log-lines]', { hasText: 'v1 answered marker-4711' }).waitFor();
    await page.getByLabel('Since').fill(localMinute(1));
    await page.click('button:text-is("Show")');
    await page.waitForSelector('[data-testid=log-state]:text("0 lines")');
    await page.click('button:text("Newest lines, live")');
    await page.waitForSelector('[data-testid=log-state]:text("Live")');
    expect(new URL(page.url()).searchParams.has('until')).toBe(false);
    // The build log of the same revision, read as it is (it ended).
    await page.click('button[aria-pressed]:text("Build log")');
    await page.locator('[data-testid=log-lines] [data-line]').first().waitFor();
    expect(tab.problems).toEqual([]);
  }, 60_000);

  it('opens a long server log at its newest line, and reads older lines on scrolling to the top without moving the view', async () => {
    const { page } = tab;
    // More lines than a page (1000), all written before the log is opened again.
    expect(await reply(url, 'lines:2500')).toBe('v1: lines:2500');
    await until(
      'the 2500th line to be written',
      async () => (await api(`/v2/deployments/${deploymentId}/revisions/${firstRevision}/logs?type=deploy&tail=1`)).body.logs[0]?.message === 'v1 line 2500',
      30_000,
      200,
    );
    // Opened afresh: the stream starts at the newest 1000 lines, scrolled to the newest.
    await page.click('button[aria-pressed]:text("Build log")');
    await page.locator('[data-testid=log-lines] [data-line]').first().waitFor();
    await page.click('button[aria-pressed]:text("Server log")');
    await page.waitForSelector('[data-testid=log-state]:text("Live")');
    const lines = page.getByTestId('log-lines');
    await lines.locator('[data-line]', { hasText: /v1 line 2500$/ }).waitFor();
    await expect(lines.getAttribute('data-lines')).resolves.toBe('1000');
    await expect(page.getByTestId('log-older').textContent()).resolves.toContain('scroll up for older ones');

    /** Scrolls the list to its top; answers how far below the list's top the line `text` is then (px). */
    const scrollUp = () => lines.evaluate((el) => el.scrollTo({ top: 0 }));
    const offsetOf = (text: string) =>
      lines.evaluate((el, text) => {
        const row = [...el.querySelectorAll('[data-line]')].find((r) => r.textContent?.endsWith(text));
        return row ? row.getBoundingClientRect().top - el.getBoundingClientRect().top - el.clientTop : null;
      }, text);
    await scrollUp();
    await page.locator('[data-testid=log-lines][data-lines="2000"]').waitFor();
    // The 1000 older lines went above: the line that was at the top still is.
    await expect(offsetOf('v1 line 1501')).resolves.toBe(0);
    await scrollUp();
    await page.getByTestId('log-older').filter({ hasText: 'From the first line of the log' }).waitFor();
    // The log's first line at the top. The list renders the rows it scrolled to after the scroll, and keeps
    // the view where it was when older lines arrive: CI read a row of the page before, still rendered.
    await until(
      'the first line of the log at the top',
      async () => {
        await scrollUp();
        return /deploying on /.test((await lines.locator('[data-line]').first().textContent()) ?? '');
      },
      10_000,
      100,
    );
    expect(tab.problems).toEqual([]);
  }, 90_000);

  it(
    'shows a second revision take over, then rolls back to the first: the deployment URL answers from its code again',
    async () => {
      const { page } = tab;
      await writeGraph('v2');
      const second = await berth(['deploy']);
      expect(second.code).toBe(0);
      await until(
        'two revisions, the newest serving',
        async () => (await revisionRows(page).count()) === 2 && /serving/.test((await revisionRows(page).first().textContent()) ?? ''),
        30_000,
        200,
      );
      await until('the second revision to answer', async () => (await reply(url, 'x')) === 'v2: x', 30_000, 250);

      const first = revisionRows(page).nth(1);
      await first.locator('button', { hasText: 'Redeploy' }).click();
      await page.locator('dialog[open] button:text("Redeploy this revision")').click();
      await page
        .locator('dialog[open]')
        .waitFor({ state: 'detached' })
        .catch(() => undefined);
      await until('a third revision', async () => (await revisionRows(page).count()) === 3, 30_000, 200);
      const third = (await api(`/v2/deployments/${deploymentId}`)).body.latest_revision_id as string;
      // The page chose the new revision: its timeline moves on to DEPLOYED.
      await page
        .locator(`ol[aria-label="Status timeline of revision ${third.slice(0, 8)}"] li[data-state=done]`, { hasText: 'DEPLOYED' })
        .waitFor({ timeout: DEPLOY_MS });
      expect(new URL(page.url()).searchParams.get('revision')).toBe(third);
      await until('the rollback to answer', async () => (await reply(url, 'y')) === 'v1: y', 30_000, 250);
      await expect(revisionRows(page).first().textContent()).resolves.toContain('serving');
      expect(tab.problems).toEqual([]);
    },
    2 * DEPLOY_MS,
  );

  it("opens the trace of a run the deployment served, from its page through its project's runs, and reads the node's output", async () => {
    const { page } = tab;
    const marker = `trace-${Date.now()}`;
    expect(await reply(url, marker)).toBe(`v1: ${marker}`);
    const sessionId = (await api(`/v2/deployments/${deploymentId}`)).body.session_id as string;
    // The agent server sends its traces in batches: wait for this run's trace to be stored.
    let traceId = '';
    await until(
      "the run's trace stored",
      async () => {
        const found = await api('/runs/query', {
          method: 'POST',
          json: { session: [sessionId], filter: 'eq(name, "respond")', select: ['outputs', 'trace_id'], limit: 20 },
        });
        traceId = (found.body.runs as { trace_id: string; outputs: unknown }[]).find((r) => JSON.stringify(r.outputs).includes(marker))?.trace_id ?? '';
        return traceId !== '';
      },
      30_000,
      250,
    );

    await page.getByRole('link', { name: `Traces of ${NAME}` }).click();
    await page.waitForURL(`**/traces/${sessionId}`);
    const row = page.locator(`a[href="/traces/${sessionId}/${traceId}"]`);
    await row.waitFor();
    await row.click();
    await page.waitForURL(`**/traces/${sessionId}/${traceId}**`);
    await page.locator('[role=treeitem]', { hasText: 'respond' }).click();
    await page.waitForSelector('#run-title:text-is("respond")');
    await page.getByText(`v1: ${marker}`).first().waitFor();
    expect(tab.problems).toEqual([]);
    // Back to the deployment's page for the tests after this one.
    await page.goBack();
    await page.goBack();
    await page.waitForURL(`**/deployments/${deploymentId}**`);
  }, 60_000);

  it('changes resources and replicas without making a revision', async () => {
    const { page } = tab;
    const before = (await api(`/v2/deployments/${deploymentId}/revisions`)).body.resources.length as number;
    await page.getByLabel('Most replicas').fill('3');
    await page.getByLabel('Memory per replica (MB)').fill('512');
    await page.click('button:text("Save resources")');
    await page.locator('[data-testid=resource-spec]', { hasText: '512' }).waitFor();
    expect((await api(`/v2/deployments/${deploymentId}`)).body.source_config.resource_spec).toEqual({ max_scale: 3, memory_mb: 512 });
    expect((await api(`/v2/deployments/${deploymentId}/revisions`)).body.resources.length).toBe(before);
    await expect(page.textContent('section[aria-labelledby=resources]')).resolves.toContain('it makes no new revision');
  }, 30_000);

  it('rotates the webhook secret and shows the new one once', async () => {
    const { page } = tab;
    await page.click('button:text("Rotate the webhook secret")');
    await page.click('dialog[open] button:text-is("Rotate")');
    const field = page.getByTestId('webhook-secret');
    await field.waitFor();
    const secret = await field.inputValue();
    expect(secret).toMatch(/^whsec_/);
    await expect(page.textContent('dialog[open]')).resolves.toContain('it will not be shown again');
    expect(await accessibilityProblems(page)).toEqual([]);
    await page.click('dialog[open] button:text("Done")');
    await page.locator('dialog[open]').waitFor({ state: 'detached' });
    expect(await page.content()).not.toContain(secret);
  }, 30_000);

  it('has no accessibility problem in the dark theme either', async () => {
    const dark = await signedInTab('dark', `/deployments/${deploymentId}`);
    await dark.page.waitForSelector(`h1:text-is("${NAME}")`);
    await dark.page.locator('[data-testid=timeline] li').first().waitFor();
    expect(await accessibilityProblems(dark.page)).toEqual([]);
    expect(dark.problems).toEqual([]);
    await dark.context.close();
  }, 30_000);

  it('shows another tenant nothing of it: the page of its id says it is not found', async () => {
    const other = await api('/v1/tenants', { method: 'POST', json: { name: 'other-tenant' } });
    expect(other.status).toBe(201);
    const { page, context, problems } = await newConsoleTab(browser, platform.url);
    await page.goto(`${platform.url}/sign-in?redirect=${encodeURIComponent(`/deployments/${deploymentId}`)}`);
    await signIn(page, other.body.api_key.key as string);
    await page.waitForSelector(`[role=alert]:text("Deployment ID ${deploymentId} not found")`);
    expect(await page.textContent('main')).not.toContain(NAME);
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it('deletes the deployment once its name is typed, and goes back to the list', async () => {
    const { page } = tab;
    await page.click('button:text("Delete this deployment")');
    const confirm = page.locator('dialog[open] button[type=submit]:text("Delete")');
    await page.locator('dialog[open] input').fill('console-agen');
    expect(await confirm.isDisabled()).toBe(true);
    await page.locator('dialog[open] input').fill(NAME);
    await confirm.click();
    await page.waitForSelector('h1:text("Deployments")');
    expect(new URL(page.url()).pathname).toBe('/deployments');
    await page.locator(`a:text-is("${NAME}")`).waitFor({ state: 'detached' });
    await until('the deployment to be gone', async () => (await api(`/v2/deployments/${deploymentId}`)).status === 404, 30_000, 250);
    expect(loads).toBe(0);
    expect(tab.problems).toEqual([]);
    await tab.context.close();
  }, 60_000);
});

// Needs PUT/DELETE /v2/deployments/{deployment_id}/secrets/{name} (the `secrets` helper's part of issue 27).
describe("a deployment's secrets on its page", () => {
  it('sets, replaces and removes a secret by name; its value is never shown back', async () => {
    const created = await api('/v2/deployments', { method: 'POST', json: { name: 'secret-agent', source: 'internal_source' } });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const { page, context, problems } = await signedInTab('light', `/deployments/${id}`);
    await page.waitForSelector('h1:text-is("secret-agent")');
    const value = 'sk-this-value-stays-on-the-server';
    await page.getByLabel('Name').fill('MODEL_API_KEY');
    await page.getByLabel('Value').fill(value);
    expect(await page.getByLabel('Value').getAttribute('type')).toBe('password');
    await page.click('button:text("Set secret")');
    await page.locator('[data-secret=MODEL_API_KEY]').waitFor();
    expect(await page.getByLabel('Value').inputValue()).toBe('');
    expect(await page.content()).not.toContain(value);
    expect((await api(`/v2/deployments/${id}`)).body.secrets).toEqual([{ name: 'MODEL_API_KEY' }]);

    await page.click('[data-secret=MODEL_API_KEY] button:text("Replace")');
    await page.getByLabel('New value of MODEL_API_KEY').fill('another-value');
    await page.click('[data-secret=MODEL_API_KEY] button[type=submit]:text("Replace")');
    await page.getByLabel('New value of MODEL_API_KEY').waitFor({ state: 'detached' });
    expect(await page.content()).not.toContain('another-value');

    await page.click('[data-secret=MODEL_API_KEY] button:text("Remove")');
    await page.locator('[data-secret=MODEL_API_KEY]').waitFor({ state: 'detached' });
    expect((await api(`/v2/deployments/${id}`)).body.secrets).toEqual([]);
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(problems).toEqual([]);
    await context.close();
  }, 60_000);
});
