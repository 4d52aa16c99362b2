/**
 * The console's trace page (`/traces/{project_id}/{trace_id}`) in real Chromium, on a real gateway
 * and export-worker over Postgres: a trace written by the official `langsmith` client (nested
 * `traceable` runs: a chat model, a tool that fails, thread metadata) shown as a tree beside a
 * waterfall, driven by keyboard as an ARIA tree; a chat model's messages rendered as a chat; the
 * error of a failed run; a trace with a 5 MB output and an image block that stays light (the value
 * and the image kept out of the DOM until asked); the link to the runs of the same thread; axe in
 * both themes and no request to another host.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { launchChromium } from '@berth/testing';
import { Client } from 'langsmith';
import { traceable } from 'langsmith/traceable';
import type { Browser, Page } from 'playwright-core';
import { accessibilityProblems, newConsoleTab, signIn } from './__tests__/console-browser.js';
import { FakeDeploymentService } from './__tests__/fake-deployments.js';
import { startTraceStack, type TraceStack } from './__tests__/trace-stack.js';

type Json = Record<string, any>;

let stack: TraceStack;
let fake: FakeDeploymentService;
let deploymentId: string;
let browser: Browser;
let projectId: string;
let nestedTraceId: string;
let bigTraceId: string;
let longTraceId: string;
let oddTraceId: string;
const LONG = 251;
const THREAD = 'thread-42';
const BIG = 5 * 1024 * 1024;
const IMAGE_BASE64 = 'iVBORw0KGgo'.padEnd(1_500_000, 'A');

async function call(path: string, json?: unknown): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${stack.gateway.url}${path}`, {
    method: json === undefined ? 'GET' : 'POST',
    headers: { 'x-api-key': stack.keyA, ...(json !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json };
}

/** A run in the ingest API's shape, `ms` after `base`, under `parent` when given. */
function run(base: number, ms: number, fields: Json, parent?: { id: string; dotted_order: string; trace_id: string }): Json {
  const id = randomUUID();
  const start = new Date(base + ms);
  const stamp = `${start.toISOString().replace(/[-:]/g, '').replace('.', '').replace('Z', '')}000Z${id}`;
  return {
    id,
    trace_id: parent?.trace_id ?? id,
    parent_run_id: parent?.id,
    dotted_order: parent ? `${parent.dotted_order}.${stamp}` : stamp,
    start_time: start.toISOString(),
    end_time: new Date(base + ms + 100).toISOString(),
    session_name: 'console-traces',
    ...fields,
  };
}

beforeAll(async () => {
  fake = await new FakeDeploymentService().start();
  stack = await startTraceStack('gw_console_trace', { controlPlane: fake.address });
  const client = new Client({ apiUrl: stack.gateway.url, apiKey: stack.keyA });
  const traced = { client, project_name: 'console-traces', tracingEnabled: true };
  const chatModel = traceable(
    async (_input: { messages: Json[] }) => ({
      generations: [
        [
          {
            text: '',
            message: { lc: 1, type: 'constructor', id: ['langchain_core', 'messages', 'AIMessage'], kwargs: { content: 'Hello Ada, how can I help?' } },
          },
        ],
      ],
    }),
    { name: 'chat-model', run_type: 'llm', ...traced },
  );
  const planner = traceable(
    async (question: string) =>
      chatModel({
        messages: [
          { role: 'system', content: 'You are terse.' },
          { role: 'user', content: [{ type: 'text', text: question }] },
        ],
      }),
    { name: 'planner', run_type: 'chain', ...traced },
  );
  const tool = traceable(
    async (_q: string): Promise<string> => {
      throw new Error('the weather tool timed out after 30 s');
    },
    { name: 'weather-tool', run_type: 'tool', ...traced },
  );
  const agent = traceable(
    async (question: string) => {
      await planner(question);
      await tool(question).catch(() => undefined);
      return { answer: 'Hello Ada, how can I help?' };
    },
    { name: 'agent', run_type: 'chain', tags: ['prod'], metadata: { thread_id: THREAD }, ...traced },
  );
  await agent('Hi, I am Ada');
  await client.awaitPendingTraceBatches();

  // A trace as heavy as a multimodal agent writes: a 5 MB output and an image sent to the model.
  const base = Date.now() - 60_000;
  const root = run(base, 0, { name: 'vision-agent', run_type: 'chain', inputs: { q: 'describe' }, outputs: { report: 'r'.repeat(BIG) } });
  const vision = run(
    base,
    10,
    {
      name: 'vision-model',
      run_type: 'llm',
      inputs: {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is in this picture?' },
              { type: 'image_url', image_url: { url: `data:image/png;base64,${IMAGE_BASE64}` } },
            ],
          },
        ],
      },
      outputs: { role: 'assistant', content: 'A harbour at dawn.' },
    },
    root as { id: string; dotted_order: string; trace_id: string },
  );
  const ingested = await call('/runs/batch', { post: [root, vision] });
  expect(ingested.status).toBe(202);
  expect(ingested.body).toMatchObject({ refused: [] });
  bigTraceId = root.id as string;

  // More runs than a page, ten at a time starting in the same millisecond: loaded in windows of start time.
  const longRoot = run(base, 1000, { name: 'long-agent', run_type: 'chain' });
  const steps = Array.from({ length: LONG - 1 }, (_, i) =>
    run(
      base,
      1000 + Math.floor(i / 10),
      { name: `step-${String(i).padStart(3, '0')}`, run_type: 'tool' },
      longRoot as { id: string; dotted_order: string; trace_id: string },
    ),
  );
  expect((await call('/runs/batch', { post: [longRoot, ...steps] })).body).toMatchObject({ stored: LONG, refused: [] });
  longTraceId = longRoot.id as string;

  // What a buggy or hostile writer can store: two runs each the other's parent, one whose parent is in no trace.
  const oddRoot = run(base, 2000, { name: 'odd-root', run_type: 'chain' });
  const [a, b] = [randomUUID(), randomUUID()];
  const odd = [
    run(base, 2001, { id: a, name: 'loop-a', run_type: 'tool', trace_id: oddRoot.id, parent_run_id: b, dotted_order: undefined }),
    run(base, 2002, { id: b, name: 'loop-b', run_type: 'tool', trace_id: oddRoot.id, parent_run_id: a, dotted_order: undefined }),
    run(base, 2003, { name: 'orphan', run_type: 'tool', trace_id: oddRoot.id, parent_run_id: randomUUID(), dotted_order: undefined }),
  ];
  expect((await call('/runs/batch', { post: [oddRoot, ...odd] })).body).toMatchObject({ stored: 4, refused: [] });
  oddTraceId = oddRoot.id as string;

  const roots = await call('/runs/query', { is_root: true, select: ['name', 'session_id'] });
  nestedTraceId = roots.body.runs.find((r: Json) => r.name === 'agent').id;
  projectId = roots.body.runs[0].session_id;

  // The deployment whose tracing project this is (the gateway names the project after it), and one of a like name that is not.
  for (const name of ['console-traces-old', 'console-traces']) {
    const created = await call('/v2/deployments', { name, source: 'external_docker', source_revision_config: { image_uri: 'example/agent:1' } });
    expect(created).toMatchObject({ status: 201 });
    deploymentId = created.body.id;
  }
  fake.deployments.get(deploymentId)!.sessionId = projectId;
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await stack?.close();
  await fake?.close();
});

const treeItem = (page: Page, name: string) => page.locator('[role=treeitem]', { hasText: name });

async function openTrace(traceId: string, colorScheme: 'light' | 'dark' = 'light') {
  const tab = await newConsoleTab(browser, stack.gateway.url, colorScheme);
  await tab.page.goto(`${stack.gateway.url}/traces/${projectId}/${traceId}`);
  await signIn(tab.page, stack.keyA);
  await tab.page.waitForSelector('[role=tree] [role=treeitem]');
  return tab;
}

describe('the trace page', () => {
  it('shows the nested runs as a tree beside a waterfall, and opens a run by keyboard as a tree view does', async () => {
    const { page, context, problems } = await openTrace(nestedTraceId);
    const rows = page.locator('[role=treeitem]');
    await expect(rows.count()).resolves.toBe(4);
    const shape = await rows.evaluateAll((items) =>
      items.map((item) => [item.querySelector('.truncate')?.textContent, item.getAttribute('aria-level'), item.getAttribute('aria-expanded')]),
    );
    expect(shape).toEqual([
      ['agent', '1', 'true'],
      ['planner', '2', 'true'],
      ['chat-model', '3', null],
      ['weather-tool', '2', null],
    ]);
    // The waterfall: one bar a run, each child's bar starting no earlier than its trace's.
    const bars = await Promise.all((await page.locator('[data-testid=bar]').all()).map(async (bar) => (await bar.boundingBox())!.x));
    expect(bars).toHaveLength(4);
    expect(Math.min(...bars)).toBe(bars[0]);
    // The root is open at first.
    await expect(page.locator('#run-title').textContent()).resolves.toBe('agent');

    await page.focus('[role=tree]');
    await page.keyboard.press('ArrowDown'); // planner
    await page.keyboard.press('ArrowRight'); // expanded already: to its first child
    await expect(page.locator('[role=tree]').getAttribute('aria-activedescendant')).resolves.toBe(await treeItem(page, 'chat-model').getAttribute('id'));
    await page.keyboard.press('Enter');
    await page.waitForSelector('#run-title:text-is("chat-model")');
    await expect(treeItem(page, 'chat-model').getAttribute('aria-selected')).resolves.toBe('true');
    // Its output, a LangChain AIMessage, and its input messages read as a chat.
    const chat = page.locator('[data-testid=run-details] ol[aria-label=Messages]');
    await expect(chat.nth(0).locator('li').allTextContents()).resolves.toEqual(['SystemYou are terse.', 'UserHi, I am Ada']);
    await expect(chat.nth(1).locator('li').allTextContents()).resolves.toEqual(['AssistantHello Ada, how can I help?']);

    await page.keyboard.press('ArrowLeft'); // a leaf: to its parent
    await page.keyboard.press('ArrowLeft'); // expanded: collapse
    await expect(treeItem(page, 'planner').getAttribute('aria-expanded')).resolves.toBe('false');
    await expect(rows.count()).resolves.toBe(3);
    await page.keyboard.press('ArrowRight');
    await expect(rows.count()).resolves.toBe(4);
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press(' ');
    await page.waitForSelector('#run-title:text-is("weather-tool")');
    expect(new URL(page.url()).searchParams.get('run')).toBe(await treeItem(page, 'weather-tool').evaluate((el) => el.id.replace(/^run-/, '')));
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it('loads every run of a trace longer than a page, each once', async () => {
    const { page, context, problems } = await openTrace(longTraceId);
    // The first page at once, then every run.
    await page
      .getByTestId('trace-summary')
      .filter({ hasText: new RegExp(`^${LONG} runs`) })
      .waitFor();
    await page.focus('[role=tree]');
    await page.keyboard.press('End');
    await page.keyboard.press('Enter');
    // The last ten started in the same millisecond: one of them is last (by id).
    await page.locator('#run-title', { hasText: /^step-24\d$/ }).waitFor();
    // Virtualized: a screenful of rows in the DOM, not all of them.
    await expect(page.locator('[role=treeitem]').count()).resolves.toBeLessThan(60);
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it('shows every run of a trace whose parents loop or are missing, at the top', async () => {
    const { page, context, problems } = await openTrace(oddTraceId);
    await page
      .getByTestId('trace-summary')
      .filter({ hasText: /^4 runs/ })
      .waitFor();
    const rows = await page
      .locator('[role=treeitem]')
      .evaluateAll((items) => items.map((item) => [item.querySelector('.truncate')?.textContent, item.getAttribute('aria-level')]));
    expect(rows).toEqual([
      ['odd-root', '1'],
      ['loop-a', '1'],
      ['loop-b', '2'],
      ['orphan', '1'],
    ]);
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it('shows a failed run with its error first, and the same run again on reload (the URL keeps it)', async () => {
    const { page, context } = await openTrace(nestedTraceId);
    await treeItem(page, 'weather-tool').click();
    await page.waitForSelector('#run-title:text-is("weather-tool")');
    await expect(page.getByTestId('run-error').textContent()).resolves.toContain('the weather tool timed out after 30 s');
    await expect(treeItem(page, 'weather-tool').textContent()).resolves.toContain('error');
    await page.reload();
    await page.waitForSelector('#run-title:text-is("weather-tool")');
    await context.close();
  }, 30_000);

  it('links to the runs of the same thread with a filter the runs query accepts, back to the project, and to its deployment', async () => {
    const { page, context } = await openTrace(nestedTraceId);
    const link = page.getByRole('link', { name: `Runs of thread ${THREAD}` });
    const href = new URL((await link.getAttribute('href'))!, stack.gateway.url);
    expect(href.pathname).toBe(`/traces/${projectId}`);
    const filter = href.searchParams.get('filter')!;
    expect(filter).toBe(`eq(thread_id, "${THREAD}")`);
    expect((await call('/runs/filter/validate', { filter })).status).toBe(200);
    const thread = await call('/runs/query', { session: [projectId], filter, select: ['name'] });
    // The client passes the thread to every run of the trace; the other trace has none.
    expect(thread.body.runs.map((r: Json) => r.name).sort()).toEqual(['agent', 'chat-model', 'planner', 'weather-tool']);
    await expect(page.getByRole('navigation', { name: 'Breadcrumb' }).getByRole('link', { name: 'console-traces' }).getAttribute('href')).resolves.toBe(
      `/traces/${projectId}`,
    );
    await expect(page.getByRole('link', { name: 'Deployment console-traces' }).getAttribute('href')).resolves.toBe(`/deployments/${deploymentId}`);
    await context.close();
  }, 30_000);

  it('stays light on a trace with a 5 MB output and an image: neither is in the DOM until asked for', async () => {
    const { page, context, problems } = await openTrace(bigTraceId);
    await page.waitForSelector('#run-title:text-is("vision-agent")');
    await page.waitForSelector('[data-testid=run-details] button:text("show all")');
    const domSize = async () => (await page.evaluate('document.documentElement.outerHTML.length')) as number;
    expect(await domSize()).toBeLessThan(200_000);

    await treeItem(page, 'vision-model').click();
    await page.waitForSelector('#run-title:text-is("vision-model")');
    await expect(page.getByTestId('media-placeholder').textContent()).resolves.toBe('Image · image/png, 1.1 MB');
    await expect(page.locator('img').count()).resolves.toBe(0);
    expect(await domSize()).toBeLessThan(200_000);
    await expect(page.locator('ol[aria-label=Messages] li').allTextContents()).resolves.toEqual([
      'UserWhat is in this picture?Image · image/png, 1.1 MB',
      'AssistantA harbour at dawn.',
    ]);

    // Asked for, the whole value is there.
    await treeItem(page, 'vision-agent').click();
    await page.click('[data-testid=run-details] button:text("show all")');
    await page.waitForFunction(`document.body.innerText.length > ${BIG}`);
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it('has no accessibility problem in either theme and asks no other host for anything', async () => {
    for (const scheme of ['light', 'dark'] as const) {
      const { page, context, problems } = await openTrace(nestedTraceId, scheme);
      await treeItem(page, 'chat-model').click();
      await page.waitForSelector('#run-title:text-is("chat-model")');
      expect(await accessibilityProblems(page)).toEqual([]);
      await treeItem(page, 'weather-tool').click();
      await page.waitForSelector('#run-title:text-is("weather-tool")');
      expect(await accessibilityProblems(page)).toEqual([]);
      expect(problems).toEqual([]);
      await context.close();
    }
  }, 60_000);
});
