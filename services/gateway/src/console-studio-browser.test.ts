/**
 * Studio in the console (Chromium): a deployment's Studio page signed in with a console session,
 * talking to a real agent server through the gateway's deployment URL (`/d/{id}`) with the
 * session and its CSRF token — the graph drawn, a run followed node by node, axe in light and dark
 * mode, no request to another host. And from the attacker's side: pages a deployment serves (an
 * opaque origin, the gateway's host) and pages of another origin cannot use a visitor's session
 * at `/d/…`, of that deployment or another.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { createTestDatabase, launchChromium, type TestDatabase } from '@berth/testing';
import { startAgentStack, type AgentStack } from './__tests__/agent-stack.js';
import { accessibilityProblems, newConsoleTab, signIn } from './__tests__/console-browser.js';
import { expectStepsGraph, runThroughSteps } from './__tests__/studio-run.js';

const studioProject = fileURLToPath(new URL('../test-projects/studio/langgraph.json', import.meta.url));

let testDb: TestDatabase;
let stack: AgentStack;
let browser: Browser;
let gateDir: string;
let attacker: http.Server;
let attackerUrl: string;
/** What reached the attacker's server as an agent server (method and path). */
const reached: string[] = [];

/** The attacker's page: calls deployment URLs (relative: the gateway's origin) with whatever session the browser holds. */
const attack = (targets: string[]) => `<!doctype html><html><head><title>attack</title></head><body><script>
(async () => {
  const out = [];
  for (const target of ${JSON.stringify(targets)}) {
    for (const method of ['GET', 'POST']) {
      try {
        const res = await fetch(target, { method, credentials: 'include', ...(method === 'POST' ? { headers: { 'content-type': 'application/json' }, body: '{}' } : {}) });
        out.push(method + ' ' + target + ' ' + res.status);
      } catch (error) { out.push(method + ' ' + target + ' failed'); }
    }
    // A write that needs no preflight and whose answer is not read.
    try { await fetch(target, { method: 'POST', mode: 'no-cors', credentials: 'include', body: '{}' }); } catch (error) {}
  }
  document.body.textContent = JSON.stringify(out);
  document.title = 'done';
})();
</script></body></html>`;

beforeAll(async () => {
  gateDir = await mkdtemp(join(tmpdir(), 'studio-gates-'));
  // Read by the graph's nodes (test-projects/studio), which run in this process's agent server.
  process.env.STUDIO_GATE_DIR = gateDir;
  testDb = await createTestDatabase('gw_studio');
  stack = await startAgentStack(testDb.url, { agent: { configPath: studioProject, deploymentCredential: 'studio-credential' } });
  attacker = http.createServer((req, res) => {
    reached.push(`${req.method} ${req.url}`);
    const targets = new URL(req.url!, 'http://x').searchParams.getAll('target');
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(attack(targets));
  });
  await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
  attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
  browser = await launchChromium();
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => attacker?.close(resolve));
  await stack?.close();
  await testDb?.drop();
  delete process.env.STUDIO_GATE_DIR;
  await rm(gateDir, { recursive: true, force: true });
});

async function openStudio(colorScheme: 'light' | 'dark'): Promise<{ page: Page; problems: string[] }> {
  const tab = await newConsoleTab(browser, stack.gateway.url, colorScheme);
  await tab.page.goto(`${stack.gateway.url}/deployments/${stack.deploymentId}/studio`);
  await tab.page.waitForURL(/\/sign-in/);
  await signIn(tab.page, stack.key);
  await tab.page.waitForURL(`${stack.gateway.url}/deployments/${stack.deploymentId}/studio`);
  return tab;
}

const threadCount = async () =>
  (
    (await (
      await fetch(`${stack.deploymentUrl}/threads/search`, {
        method: 'POST',
        headers: { 'x-api-key': stack.key, 'content-type': 'application/json' },
        body: '{}',
      })
    ).json()) as unknown[]
  ).length;

describe('a deployment’s Studio in the console', () => {
  it('draws the graph and follows a run node by node, through /d/{id} with the console session; accessible, same origin only', async () => {
    const { page, problems } = await openStudio('light');
    await expectStepsGraph(page);
    expect(await accessibilityProblems(page)).toEqual([]);
    await runThroughSteps(page, gateDir, 'hello-gateway');
    expect(await accessibilityProblems(page)).toEqual([]);
    // The run is the deployment's: its thread holds the reply, as any API client sees it.
    const threadId = (await page.textContent('[data-testid="run-status"]'))?.match(/thread ([0-9a-f-]{36})/)?.[1];
    const state = (await (await fetch(`${stack.deploymentUrl}/threads/${threadId}/state`, { headers: { 'x-api-key': stack.key } })).json()) as {
      values: { messages: { content: string }[] };
    };
    expect(state.values.messages.map((m) => m.content)).toEqual(['hello-gateway', 'plan for hello-gateway', 'acted', 'done: hello-gateway']);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('is not served by a deployed agent server: its deployment URL has no /studio', async () => {
    const res = await fetch(`${stack.deploymentUrl}/studio`, { headers: { 'x-api-key': stack.key } });
    expect({ status: res.status, type: res.headers.get('content-type') }).toEqual({ status: 404, type: expect.stringMatching(/^application\/json/) });
  });

  it('is accessible in dark mode too, and picks another graph, drawn with its subgraph’s nodes (xray)', async () => {
    const { page, problems } = await openStudio('dark');
    await expectStepsGraph(page);
    expect(await accessibilityProblems(page)).toEqual([]);
    await page.selectOption('select', 'nested');
    await page.waitForSelector('[data-node="inner:one"]');
    const nodes = (await page.evaluate(`[...document.querySelectorAll('[data-node]')].map((el) => el.dataset.node)`)) as string[];
    expect(nodes.sort()).toEqual(['__end__', '__start__', 'inner:one', 'inner:two']);
    expect(await accessibilityProblems(page)).toEqual([]);
    // A run marks the subgraph's nodes as they run (its events come with the subgraph's namespace).
    await page.fill('textarea', 'nested');
    await page.click('button[type="submit"]:text("Send")');
    await page.waitForSelector('[data-testid="run-status"][data-status="success"]');
    await page.waitForSelector('[data-node="inner:one"][data-state="done"]');
    await page.waitForSelector('[data-node="inner:two"][data-state="done"]');
    await page.click('[data-node="inner:one"]');
    await page.waitForSelector('section[aria-label="Node details"]:has-text("one: nested")');
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);
});

describe('the console session at deployment URLs, from the attacker’s side', () => {
  it('is of no use to a page a deployment serves, at that deployment or another (reads and writes)', async () => {
    const { page } = await openStudio('light');
    // The tenant's own second deployment serves the attacker's page (its project is the attacker's
    // code); a project with its own auth serves it to anyone.
    const own = randomUUID();
    stack.fake.routes.set(own, { tenantId: stack.tenantId, upstreamUrl: attackerUrl, customAuth: false });
    const custom = randomUUID();
    stack.fake.routes.set(custom, { tenantId: stack.otherTenantId, upstreamUrl: attackerUrl, customAuth: true });
    const targets = [`/d/${stack.deploymentId}/threads`, `/d/${own}/threads`];
    const before = await threadCount();
    for (const host of [own, custom]) {
      reached.length = 0;
      await page.goto(`${stack.gateway.url}/d/${host}/pwn?${targets.map((t) => `target=${encodeURIComponent(t)}`).join('&')}`);
      await page.waitForFunction(`document.title === 'done'`, undefined, { timeout: 10_000 });
      const seen = JSON.parse((await page.textContent('body')) ?? '[]') as string[];
      // Every call fails: no session goes with an opaque origin's requests, and none is accepted from one.
      expect(seen.filter((line) => !/ (failed|401|403)$/.test(line))).toEqual([]);
      // Only the page itself reached the attacker's agent server, and CORS preflights (which never
      // carry credentials, and which agent servers answer by design): none of its calls did.
      expect(reached.map((line) => line.split('?')[0]!).filter((line) => !line.startsWith('OPTIONS '))).toEqual(['GET /pwn']);
    }
    expect(await threadCount()).toBe(before);
    await page.context().close();
  }, 60_000);

  it('is of no use to a page of another origin', async () => {
    const { page } = await openStudio('light');
    const before = await threadCount();
    reached.length = 0;
    const target = `${stack.deploymentUrl}/threads`;
    await page.goto(`${attackerUrl}/other-origin?target=${encodeURIComponent(target)}`);
    await page.waitForFunction(`document.title === 'done'`, undefined, { timeout: 10_000 });
    const seen = JSON.parse((await page.textContent('body')) ?? '[]') as string[];
    expect(seen.filter((line) => !/ (failed|401|403)$/.test(line))).toEqual([]);
    expect(await threadCount()).toBe(before);
    await page.context().close();
  }, 60_000);
});
