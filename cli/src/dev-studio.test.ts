/**
 * `berth dev`'s Studio (Chromium): the built binary on a copy of the gateway's Studio test project
 * prints a Studio link on its own origin and serves it there, with no sign-in — the graph drawn, a
 * run followed node by node, a thread's interrupts answered until its run ends and a fork made from
 * its history, axe in light and dark mode, no request to another host (offline).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { cp, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { CONSOLE_CSP } from '@berth/http';
import { launchChromium, spawnTestChild, type TestChild } from '@berth/testing';
import { accessibilityProblems, newConsoleTab } from '../../services/gateway/src/__tests__/console-browser.js';
import { expectStepsGraph, runThroughSteps } from '../../services/gateway/src/__tests__/studio-run.js';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
const repo = fileURLToPath(new URL('../..', import.meta.url));
let project: string;
let gateDir: string;
let dev: TestChild;
let url: string;
let browser: Browser;

beforeAll(async () => {
  project = await mkdtemp(join(tmpdir(), 'berth-dev-studio-'));
  gateDir = await mkdtemp(join(tmpdir(), 'berth-dev-gates-'));
  await cp(join(repo, 'services/gateway/test-projects/studio'), project, { recursive: true });
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'studio', type: 'module' }));
  await symlink(join(repo, 'node_modules'), join(project, 'node_modules'));
  dev = spawnTestChild(process.execPath, [bin, 'dev', '--port', '0', '--no-reload', '--no-trace'], {
    cwd: project,
    env: { ...process.env, LOG_LEVEL: 'warn', STUDIO_GATE_DIR: gateDir },
  });
  url = (await dev.waitForOutput(/Studio: (http:\/\/127\.0\.0\.1:\d+)\/studio\n/))[1]!;
  browser = await launchChromium();
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await dev?.stop();
  const cluster = await realpath(join(project, '.berth', 'postgres')).catch(() => undefined);
  if (cluster && !cluster.startsWith(project)) await rm(cluster, { recursive: true, force: true });
  await rm(project, { recursive: true, force: true });
  await rm(gateDir, { recursive: true, force: true });
}, 30_000);

describe('berth dev’s Studio', () => {
  it('prints its own link, not a hosted one, and serves the console’s Studio there under a self-only CSP', async () => {
    expect(dev.output()).not.toContain('smith.langchain.com');
    const page = await fetch(`${url}/studio`);
    expect({ status: page.status, csp: page.headers.get('content-security-policy') }).toEqual({ status: 200, csp: CONSOLE_CSP });
    const html = await page.text();
    expect(html).toContain('<meta name="berth-console" content="studio" />');
    const script = /src="(\/studio\/assets\/index-[^"]+\.js)"/.exec(html)?.[1];
    expect((await fetch(`${url}${script}`)).status).toBe(200);
    // Only the build's own files: nothing else of the disk.
    for (const path of [
      '/studio/assets/..%2Findex.html',
      '/studio/assets/..%2F..%2Fpackage.json',
      '/studio/assets/nope-12345678.js',
      '/studio/assets/%E0%A4%A',
    ]) {
      expect({ path, status: (await fetch(`${url}${path}`)).status }).toEqual({ path, status: 404 });
    }
  });

  it('draws the graph and follows a run node by node, with no sign-in; accessible in both themes, offline', async () => {
    const { page, context, problems } = await newConsoleTab(browser, url);
    await page.goto(`${url}/studio`);
    await expectStepsGraph(page);
    expect(new URL(page.url()).pathname).toBe('/studio');
    expect(await accessibilityProblems(page)).toEqual([]);
    await runThroughSteps(page, gateDir, 'hello-dev');
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(problems).toEqual([]);
    await context.close();

    const dark = await newConsoleTab(browser, url, 'dark');
    await dark.page.goto(`${url}/studio`);
    await expectStepsGraph(dark.page);
    expect(await accessibilityProblems(dark.page)).toEqual([]);
    expect(dark.problems).toEqual([]);
    await dark.context.close();
  }, 60_000);
  it('answers a thread’s interrupts until its run finishes, and forks it from an earlier checkpoint in the history', async () => {
    const { page, context, problems } = await newConsoleTab(browser, url);
    await page.goto(`${url}/studio`);
    await page.click('[role="tab"]:text("Threads")');
    await page.click('button:text("New thread")');
    const threadId = (await (await page.waitForSelector('[data-testid="thread-id"]')).textContent())!.replace('thread ', '');
    await page.selectOption('select[name="run-assistant"]', { label: 'approvals' });
    await page.fill('textarea[name="run-input"]', 'go');
    await page.click('form[aria-label="Start a run"] button[type="submit"]');
    await page.fill('[data-interrupt="ask"] textarea', 'green');
    await page.click('[data-interrupt="ask"] button:text("Answer")');
    await page.click('[data-interrupt="first"] button:text("Approve")');
    await page.waitForSelector('[data-interrupt="first"]', { state: 'detached' });
    await page.click('[data-interrupt="second"] button:text("Approve")');
    await page.waitForSelector('[data-testid="thread-run-status"][data-status="done"]');
    const answered = (await (await fetch(`${url}/threads/${threadId}/state`)).json()) as { next: string[]; values: { messages: { content: string }[] } };
    expect({ next: answered.next, last: answered.values.messages.at(-1)?.content }).toEqual({
      next: [],
      last: 'answer green; first "approve"; second "approve"',
    });

    // Time travel: re-run from the checkpoint before the first question; the timeline shows two branches from it.
    await page.click('section[aria-label="History"] button:text("History (time travel)")');
    const history = (await (await fetch(`${url}/threads/${threadId}/history?limit=50`)).json()) as {
      checkpoint: { checkpoint_id: string };
      metadata: { step: number };
    }[];
    const start = history.find((c) => c.metadata.step === 0)!.checkpoint.checkpoint_id;
    await page.click(`li[data-checkpoint="${start}"] button`);
    await page.click(`[data-open-checkpoint="${start}"] button:text("Re-run from here")`);
    await page.waitForSelector('[data-interrupt="ask"]:has-text("Which colour?")');
    await page.waitForSelector(`ol[aria-label="Timeline"] li[data-fork="${start}"] > ol > li[data-branch]:nth-child(2)[data-current]`);
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(problems).toEqual([]);
    await context.close();
  }, 60_000);
});
