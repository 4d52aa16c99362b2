/**
 * The console's trace screens in real Chromium, on a real gateway and export-worker with Postgres:
 * the tracing projects with their figures over a range and as charts (`/traces`), and a project's
 * runs (`/traces/{project_id}`) — the virtualized table paged with the cursor, root or all runs,
 * the filter checked as it is typed with the problem shown at its character, columns that decide
 * what the API is asked for, rows that open their trace by mouse and keyboard. Each page gets the
 * axe-core check in both themes, and no request may go to another host. The runs are written
 * through the ingest API (`POST /runs/batch`) with figures known here; another tenant's never show.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { launchChromium } from '@berth/testing';
import type { Browser, Page, Request } from 'playwright-core';
import { accessibilityProblems, newConsoleTab, signIn } from './__tests__/console-browser.js';
import { FakeDeploymentService } from './__tests__/fake-deployments.js';
import { startTraceStack, type TraceStack } from './__tests__/trace-stack.js';

type Json = Record<string, any>;

let stack: TraceStack;
let fake: FakeDeploymentService;
let browser: Browser;
let big: string;
let chat: string;
let deploymentId: string;
/** The root runs of the big project, oldest first. */
const roots: Json[] = [];

const ROOTS = 250;
const CHILDREN = 20;

async function call(path: string, key: string, json?: unknown): Promise<Json> {
  const res = await fetch(`${stack.gateway.url}${path}`, {
    method: json === undefined ? 'GET' : 'POST',
    headers: { 'x-api-key': key, ...(json !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
  });
  const body = (await res.json()) as Json;
  if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

/** A run of project `project` starting at `start`, a child of `parent` when given. */
function run(project: string, start: Date, fields: Json, parent?: Json): Json {
  const id = randomUUID();
  const stamp = start.toISOString().replace(/[-:.]/g, '');
  return {
    id,
    session_name: project,
    trace_id: parent ? parent.trace_id : id,
    dotted_order: parent ? `${parent.dotted_order}.${stamp}${id}` : `${stamp}${id}`,
    ...(parent ? { parent_run_id: parent.id } : {}),
    run_type: 'chain',
    start_time: start.toISOString(),
    end_time: new Date(start.getTime() + 200).toISOString(),
    inputs: { q: 1 },
    ...fields,
  };
}

async function write(key: string, runs: Json[]): Promise<void> {
  for (let i = 0; i < runs.length; i += 100) expect((await call('/runs/batch', key, { post: runs.slice(i, i + 100) })).refused).toEqual([]);
}

const projectId = async (key: string, name: string) => ((await call(`/sessions?name=${name}`, key)) as unknown as Json[])[0]!.id as string;

beforeAll(async () => {
  fake = await new FakeDeploymentService().start();
  stack = await startTraceStack('gw_console_traces', { controlPlane: fake.address });
  // The big project: 250 root runs over the last half hour (every 10th an error, ten threads, 10
  // tokens and $0.001 each) and 20 child runs; 270 runs, 25 errors.
  const first = Date.now() - 30 * 60_000;
  for (let i = 0; i < ROOTS; i++) {
    roots.push(
      run('big', new Date(first + i * 5000), {
        name: `root-${i}`,
        tags: ['console'],
        total_tokens: 10,
        total_cost: 0.001,
        extra: { metadata: { thread_id: `thread-${i % 10}` } },
        ...(i % 10 === 0 ? { error: 'ValueError: boom' } : {}),
      }),
    );
  }
  const children = roots.slice(0, CHILDREN).map((parent) => run('big', new Date(Date.parse(parent.start_time) + 10), { name: 'tool' }, parent));
  await write(stack.keyA, [...roots, ...children]);
  // A deployment's project: 4 runs, 1 error.
  await write(
    stack.keyA,
    [0, 1, 2, 3].map((i) => run('chat-agent', new Date(first + i * 1000), { name: 'agent', ...(i === 0 ? { error: 'boom' } : {}) })),
  );
  await write(stack.keyB, [run('secret-project', new Date(first), { name: 'theirs' })]);
  big = await projectId(stack.keyA, 'big');
  chat = await projectId(stack.keyA, 'chat-agent');
  const created = await fetch(`${stack.gateway.url}/v2/deployments`, {
    method: 'POST',
    headers: { 'x-api-key': stack.keyA, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'chat-agent', source: 'external_docker', source_revision_config: { image_uri: 'example/agent:1' } }),
  });
  deploymentId = ((await created.json()) as Json).id as string;
  fake.deployments.get(deploymentId)!.sessionId = chat;
  browser = await launchChromium();
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await stack?.close();
  await fake?.close();
});

/** A signed-in tab on `path`. */
async function open(path: string, scheme: 'light' | 'dark' = 'light') {
  const tab = await newConsoleTab(browser, stack.gateway.url, scheme);
  await tab.page.goto(`${stack.gateway.url}${path}`);
  await tab.page.waitForSelector('h1:text("Sign in to Berth")');
  await signIn(tab.page, stack.keyA);
  return tab;
}

const runQueries = (requests: Request[]) => requests.filter((r) => r.url().endsWith('/runs/query')).map((r) => r.postDataJSON() as Json);
/** Waits until the table says `text` of the runs it loaded (and says what it said instead on a timeout). */
async function loaded(page: Page, text: string): Promise<void> {
  try {
    await page.locator(`[data-testid=loaded]:text-is("${text}")`).waitFor();
  } catch (error) {
    throw new Error(`the table says "${await page.getByTestId('loaded').textContent()}", not "${text}"`, { cause: error });
  }
}
const scrollToEnd = (page: Page) => page.getByTestId('runs-scroller').evaluate((el) => el.scrollTo(0, el.scrollHeight));
const numbers = (texts: string[]) => texts.map((t) => Number(t.replace(/,/g, '')));
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

describe('the tracing projects (/traces)', () => {
  it("shows each project's runs, error rate, tokens and cost over the range, as charts too, and links a deployment's project to it", async () => {
    for (const scheme of ['light', 'dark'] as const) {
      const { page, context, problems } = await open('/traces', scheme);
      await page.waitForSelector('h1:text-is("Traces")');
      const row = page.locator(`tr[data-project="${big}"]`);
      await row.waitFor();
      expect({
        runs: await row.locator('[data-stat=runs]').textContent(),
        errors: await row.locator('[data-stat=error-rate]').textContent(),
        tokens: await row.locator('[data-stat=tokens]').textContent(),
        cost: await row.locator('[data-stat=cost]').textContent(),
      }).toEqual({ runs: '270', errors: '9.3 %', tokens: '2,500', cost: '$0.25' });
      const chatRow = page.locator(`tr[data-project="${chat}"]`);
      expect(await chatRow.locator('[data-stat=runs]').textContent()).toBe('4');
      expect(await chatRow.locator('[data-stat=error-rate]').textContent()).toBe('25.0 %');
      await chatRow.locator(`a[href="/deployments/${deploymentId}"]:text("chat-agent")`).waitFor();
      expect(await row.locator('a[href^="/deployments/"]').count()).toBe(0);
      expect(await page.locator('text=secret-project').count()).toBe(0);

      // The charts are of the busiest project; their data tables hold the same figures.
      const charts = page.getByTestId('charts');
      await charts.waitFor();
      expect(await charts.getAttribute('aria-label')).toBe('Charts of big');
      expect(await charts.locator('svg[role=img]').count()).toBe(4);
      const runsChart = charts.locator('figure').first();
      expect(await runsChart.locator('svg[role=img] rect').count()).toBeGreaterThan(0);
      expect(await runsChart.locator('svg title').textContent()).toMatch(/^Runs and errors per /);
      expect(await runsChart.locator('svg desc').textContent()).toBe('270 runs, 25 with an error (9.3 %).');
      expect(sum(numbers(await runsChart.locator('tbody td:nth-child(2)').allTextContents()))).toBe(270);
      expect(sum(numbers(await runsChart.locator('tbody td:nth-child(3)').allTextContents()))).toBe(25);
      expect(await charts.locator('figure').nth(1).locator('svg[role=img] path').count()).toBe(2);
      expect(await accessibilityProblems(page)).toEqual([]);
      expect(problems).toEqual([]);
      await context.close();
    }
  }, 60_000);

  it('takes its range from the URL: a range before the runs counts none, and a choice is kept in the link', async () => {
    const { page, context, problems } = await open('/traces?range=custom&from=2020-01-01T00:00:00.000Z&to=2020-01-02T00:00:00.000Z');
    const runs = page.locator(`tr[data-project="${big}"] [data-stat=runs]`);
    await runs.waitFor();
    expect(await runs.textContent()).toBe('0');
    expect(await page.locator(`tr[data-project="${big}"] [data-stat=error-rate]`).textContent()).toBe('—');
    await page.click('[aria-label="Time range"] button:text("Last 7 days")');
    await page.locator(`tr[data-project="${big}"] [data-stat=runs]:text-is("270")`).waitFor();
    expect(new URL(page.url()).searchParams.get('range')).toBe('7d');
    // A project's name opens its runs.
    await page.click(`tr[data-project="${big}"] a:text-is("big")`);
    await page.waitForSelector('h1:text-is("big")');
    expect(new URL(page.url()).pathname).toBe(`/traces/${big}`);
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);
});

describe("a project's runs (/traces/{project_id})", () => {
  it('pages through the root runs as the table scrolls, newest first; all runs on request', async () => {
    for (const scheme of ['light', 'dark'] as const) {
      const { page, context, problems, requests } = await open(`/traces/${big}`, scheme);
      await loaded(page, '100 runs loaded, more below');
      expect(await page.locator('tr[data-index="0"] td').first().textContent()).toBe(`root-${ROOTS - 1}`);
      // Only the rows in view are in the page.
      expect(await page.locator('tbody tr[data-index]').count()).toBeLessThan(50);
      expect(runQueries(requests)[0]).toEqual({
        session: [big],
        limit: 100,
        is_root: true,
        select: ['trace_id', 'name', 'status', 'start_time', 'end_time', 'total_tokens', 'total_cost'],
      });
      expect(await accessibilityProblems(page)).toEqual([]);
      await scrollToEnd(page);
      await loaded(page, '200 runs loaded, more below');
      const second = runQueries(requests).at(-1)!;
      expect(second.cursor).toEqual(expect.any(String));
      await scrollToEnd(page);
      await loaded(page, '250 runs loaded');
      await scrollToEnd(page);
      await page.locator(`tr[data-index="${ROOTS - 1}"] a:text-is("root-0")`).waitFor();
      expect(runQueries(requests)).toHaveLength(3);

      // Another query starts at the top of a table of its own (not at the last one's scroll position).
      await page.check('label:text("All runs") input');
      await loaded(page, '100 runs loaded, more below');
      expect(await page.getByTestId('runs-scroller').evaluate((el) => el.scrollTop)).toBe(0);
      expect(new URL(page.url()).searchParams.get('all')).toBe('true');
      expect(runQueries(requests).at(-1)!.is_root).toBeUndefined();
      for (const count of ['200 runs loaded, more below', '270 runs loaded']) {
        await scrollToEnd(page);
        await loaded(page, count);
      }
      expect(problems).toEqual([]);
      await context.close();
    }
  }, 60_000);

  it('checks the filter as it is typed, shows the problem at its character, and applies a good one (in the URL)', async () => {
    const { page, context, problems, requests } = await open(`/traces/${big}`);
    await loaded(page, '100 runs loaded, more below');
    const bad = 'and(eq(status, "error"), gt(latency, "fast"))';
    await page.fill('#run-filter', bad);
    const caret = page.getByTestId('filter-caret');
    await caret.waitFor();
    const position = bad.indexOf('"fast"');
    expect(await caret.getAttribute('data-position')).toBe(String(position));
    expect(await caret.textContent()).toBe(`${bad}\n${' '.repeat(position)}^`);
    expect(await page.locator('#run-filter-problem').textContent()).toContain(`at position ${position}`);
    expect(await page.getAttribute('#run-filter', 'aria-invalid')).toBe('true');
    expect(await accessibilityProblems(page)).toEqual([]);
    // Enter does not apply it.
    const queries = runQueries(requests).length;
    await page.press('#run-filter', 'Enter');
    expect(new URL(page.url()).searchParams.get('filter')).toBeNull();

    const good = 'and(eq(status, "error"), gt(latency, "100ms"))';
    await page.fill('#run-filter', good);
    await page.locator('#run-filter-problem').waitFor({ state: 'detached' });
    await page.press('#run-filter', 'Enter');
    await loaded(page, '25 runs loaded');
    expect(new URL(page.url()).searchParams.get('filter')).toBe(good);
    expect(
      runQueries(requests)
        .slice(queries)
        .map((q) => q.filter),
    ).toEqual([good]);
    const statuses = await page.locator('tbody tr[data-index] td:nth-child(2)').allTextContents();
    expect(new Set(statuses)).toEqual(new Set(['error']));
    expect(requests.some((r) => r.url().endsWith('/runs/filter/validate'))).toBe(true);

    // A link to a thread's runs, as a trace's page makes it.
    await page.goto(`${stack.gateway.url}/traces/${big}?filter=${encodeURIComponent('eq(thread_id, "thread-3")')}`);
    await loaded(page, '25 runs loaded');
    expect(await page.inputValue('#run-filter')).toBe('eq(thread_id, "thread-3")');
    expect(await page.locator('tr[data-index="0"] td').first().textContent()).toBe('root-243');
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it('asks the API for the chosen columns only, and keeps the choice in the URL', async () => {
    const { page, context, problems, requests } = await open(`/traces/${big}`);
    await loaded(page, '100 runs loaded, more below');
    await page.click('summary:text("Columns")');
    await page.uncheck('input[name=column][value=cost]');
    await page.check('input[name=column][value=thread]');
    await page.uncheck('input[name=column][value=latency]');
    await page.locator('th:text-is("Thread")').waitFor();
    await page.locator('tr[data-index="0"] span:text-is("thread-9")').waitFor();
    expect(await page.locator('thead th').allTextContents()).toEqual(['Name', 'Status', 'Start', 'Tokens', 'Thread']);
    expect(runQueries(requests).at(-1)!.select).toEqual(['trace_id', 'name', 'status', 'start_time', 'total_tokens', 'extra']);
    expect(new URL(page.url()).searchParams.get('cols')).toBe('name,status,start,tokens,thread');
    expect(await accessibilityProblems(page)).toEqual([]);
    await page.reload();
    await loaded(page, '100 runs loaded, more below');
    expect(await page.locator('thead th').allTextContents()).toEqual(['Name', 'Status', 'Start', 'Tokens', 'Thread']);
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it("opens a row's trace by click, and by keyboard (arrows move, Enter opens)", async () => {
    const { page, context, problems } = await open(`/traces/${big}`);
    await loaded(page, '100 runs loaded, more below');
    await page.click(`tr[data-index="0"] a:text-is("root-${ROOTS - 1}")`);
    await page.waitForURL(`${stack.gateway.url}/traces/${big}/${roots[ROOTS - 1]!.trace_id}`);
    await page.goBack();
    await loaded(page, '100 runs loaded, more below');
    // The rows are one tab stop after the column chooser.
    await page.focus('summary:text("Columns")');
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.dataset.index')).toBe('0');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    expect(await page.evaluate('document.activeElement.dataset.index')).toBe('2');
    await page.keyboard.press('Enter');
    await page.waitForURL(`${stack.gateway.url}/traces/${big}/${roots[ROOTS - 3]!.trace_id}`);
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);
});
