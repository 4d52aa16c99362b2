/**
 * What a browser test of Studio's runs needs: a real agent server serving test-projects/studio
 * behind a real gateway, its graphs' gates in a directory of their own (STUDIO_GATE_DIR: a gated node
 * waits until the test writes its file there, or its run is cancelled), Chromium, the deployment's API as any client calls it
 * (the tenant's API key), and Studio opened on a tab, signed in.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { createTestDatabase, launchChromium, type TestDatabase } from '@berth/testing';
import { startAgentStack, type AgentStack } from './agent-stack.js';
import { newConsoleTab, signIn, type ConsoleTab } from './console-browser.js';

const studioProject = fileURLToPath(new URL('../../test-projects/studio/langgraph.json', import.meta.url));

export interface StudioStack {
  stack: AgentStack;
  browser: Browser;
  /** Where a test opens a gate of test-projects/studio's graphs (a file named as the graph says). */
  gateDir: string;
  /** The deployment's API with the tenant's key: the JSON answer (undefined for 204), or an Error naming the status. */
  api<T>(path: string, init?: { method?: string; body?: unknown }): Promise<T>;
  /** Studio's tab `label` (its name in the tab list), signed in, in a browser context of its own. */
  studio(colorScheme: 'light' | 'dark', label: string): Promise<ConsoleTab>;
  close(): Promise<void>;
}

export async function startStudioStack(databaseName: string): Promise<StudioStack> {
  const gateDir = await mkdtemp(join(tmpdir(), `${databaseName}-gates-`));
  // Read by the graphs' nodes, which run in this process's agent server.
  process.env.STUDIO_GATE_DIR = gateDir;
  let testDb: TestDatabase | undefined;
  let stack: AgentStack | undefined;
  let browser: Browser | undefined;
  const close = async () => {
    await browser?.close();
    await stack?.close();
    await testDb?.drop();
    delete process.env.STUDIO_GATE_DIR;
    await rm(gateDir, { recursive: true, force: true });
  };
  try {
    testDb = await createTestDatabase(databaseName);
    stack = await startAgentStack(testDb.url, { agent: { configPath: studioProject, deploymentCredential: 'studio-credential' } });
    browser = await launchChromium();
  } catch (error) {
    await close();
    throw error;
  }
  const started = { stack, browser, gateDir };
  return {
    ...started,
    close,
    async api<T>(path: string, init: { method?: string; body?: unknown } = {}) {
      const res = await fetch(`${started.stack.deploymentUrl}${path}`, {
        method: init.method ?? 'GET',
        headers: { 'x-api-key': started.stack.key, 'content-type': 'application/json' },
        ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      });
      if (!res.ok) throw new Error(`${init.method ?? 'GET'} ${path}: ${res.status} ${await res.text()}`);
      return (res.status === 204 ? undefined : await res.json()) as T;
    },
    async studio(colorScheme, label) {
      const tab = await newConsoleTab(started.browser, started.stack.gateway.url, colorScheme);
      const url = `${started.stack.gateway.url}/deployments/${started.stack.deploymentId}/studio`;
      await tab.page.goto(url);
      await tab.page.waitForURL(/\/sign-in/);
      await signIn(tab.page, started.stack.key);
      await tab.page.waitForURL(url);
      await tab.page.click(`role=tab[name="${label}"]`);
      await tab.page.waitForURL(new RegExp(`[?&]tab=${label.toLowerCase()}`));
      return tab;
    },
  };
}
