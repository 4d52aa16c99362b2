/**
 * A browser app on another origin (real Chromium) using the classic `useStream` hook of
 * `@langchain/langgraph-sdk/react` against a deployment through the gateway with an API key
 * (issue 25): send, tokens stream, an interrupt shown and answered, reload and rehydrate, fork
 * from a checkpoint (edit a message). The deployment's graph streams a fake chat model's tokens and interrupts
 * (test-projects/browser); its `http.cors` allows loopback pages.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { createTestDatabase, launchChromium, servePage, type ServedPage, type TestDatabase } from '@berth/testing';
import { startAgentStack, type AgentStack } from './__tests__/agent-stack.js';

const browserProject = fileURLToPath(new URL('../test-projects/browser/langgraph.json', import.meta.url));

let testDb: TestDatabase;
let stack: AgentStack;
let browser: Browser;
let served: ServedPage;

beforeAll(async () => {
  testDb = await createTestDatabase('gw_browser');
  stack = await startAgentStack(testDb.url, { agent: { configPath: browserProject, deploymentCredential: 'browser-credential' } });
  served = await servePage({ entry: fileURLToPath(new URL('./__tests__/chat.page.tsx', import.meta.url)) });
  browser = await launchChromium();
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await served?.close();
  await stack?.close();
  await testDb?.drop();
});

async function waitForMessages(page: Page, expected: string[]): Promise<void> {
  // An expression, not a function: tests are not typed with the DOM.
  try {
    await page.waitForFunction(`JSON.stringify([...document.querySelectorAll('#messages > li > .text')].map((text) => text.textContent)) === ${JSON.stringify(JSON.stringify(expected))}`, undefined, { timeout: 10_000 });
  } catch (error) {
    // Say what the page shows instead.
    expect(await page.locator('#messages > li > .text').allTextContents()).toEqual(expected);
    throw error;
  }
}

describe('the classic useStream hook through the gateway, from another origin', () => {
  it('sends, streams tokens, answers an interrupt, rehydrates after a reload and forks from a checkpoint', async () => {
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    page.on('requestfailed', (request) => {
      // A reload cancels the calls under way (ERR_ABORTED); a CORS refusal is ERR_FAILED.
      if (request.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`${request.method()} ${request.url()}: ${request.failure()?.errorText}`);
    });
    const query = new URLSearchParams({ api: stack.deploymentUrl, key: stack.key });
    await page.goto(`${served.url}?${query}`);

    // Send: the reply streams token by token, then the graph asks.
    await page.fill('#text', 'hello');
    await page.click('#compose button');
    await page.waitForSelector('#interrupt .question:text("Send it?")');
    await waitForMessages(page, ['human: hello', 'ai: You said: hello']);
    expect(Number(await page.textContent('#partials'))).toBeGreaterThan(3);

    // Answer the interrupt: the run resumes and finishes.
    await page.click('#approve');
    await waitForMessages(page, ['human: hello', 'ai: You said: hello', 'ai: Approved: yes']);
    await page.waitForSelector('#status:text("idle")');
    expect(await page.$('#interrupt')).toBeNull();
    const threadId = new URL(page.url()).searchParams.get('thread');
    expect(threadId).toMatch(/^[0-9a-f-]{36}$/);

    // Reload: the thread's messages come back from the deployment.
    await page.reload();
    await waitForMessages(page, ['human: hello', 'ai: You said: hello', 'ai: Approved: yes']);
    await page.waitForSelector('#status:text("idle")');

    // Fork: edit the first message; a new branch from the checkpoint before it.
    await page.fill('#messages > li:first-child input[name="edit"]', 'hola');
    await page.click('#messages > li:first-child button');
    await page.waitForSelector('#interrupt .question:text("Send it?")');
    await waitForMessages(page, ['human: hola', 'ai: You said: hola']);
    await page.click('#approve');
    await waitForMessages(page, ['human: hola', 'ai: You said: hola', 'ai: Approved: yes']);
    // It is the thread's state now, also after a reload.
    await page.reload();
    await waitForMessages(page, ['human: hola', 'ai: You said: hola', 'ai: Approved: yes']);

    expect(await page.textContent('#error')).toBe('');
    expect(problems).toEqual([]);
    await page.close();
  }, 90_000);
});
