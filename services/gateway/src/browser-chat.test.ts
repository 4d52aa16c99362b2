/**
 * Browser apps on another origin (real Chromium) against a deployment through the gateway with an
 * API key (issue 25), with the classic `useStream` hook of `@langchain/langgraph-sdk/react`
 * (chat.page.tsx) and with the current official one (`useStream` of `@langchain/react` 1.x, which
 * speaks only protocol v2; react-chat.page.tsx) over SSE and over WebSocket: send, tokens stream,
 * an interrupt shown and answered, reload and rehydrate (also while the graph waits for an answer),
 * fork from a checkpoint (the classic page edits the first message, the other sends another instead
 * of the last).
 * The deployment's graph streams a fake chat model's tokens and interrupts (test-projects/browser);
 * its `http.cors` allows loopback pages of 127.0.0.1 — not of `localhost`, the attacker's page.
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
let classicPage: ServedPage;
let reactPage: ServedPage;

beforeAll(async () => {
  testDb = await createTestDatabase('gw_browser');
  stack = await startAgentStack(testDb.url, { agent: { configPath: browserProject, deploymentCredential: 'browser-credential' } });
  classicPage = await servePage({ entry: fileURLToPath(new URL('./__tests__/chat.page.tsx', import.meta.url)) });
  reactPage = await servePage({ entry: fileURLToPath(new URL('./__tests__/react-chat.page.tsx', import.meta.url)) });
  browser = await launchChromium();
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await reactPage?.close();
  await classicPage?.close();
  await stack?.close();
  await testDb?.drop();
});

async function waitForMessages(page: Page, expected: string[]): Promise<void> {
  // An expression, not a function: tests are not typed with the DOM.
  try {
    await page.waitForFunction(
      `JSON.stringify([...document.querySelectorAll('#messages > li > .text')].map((text) => text.textContent)) === ${JSON.stringify(JSON.stringify(expected))}`,
      undefined,
      { timeout: 10_000 },
    );
  } catch (error) {
    // Say what the page shows instead.
    expect({ messages: await page.locator('#messages > li > .text').allTextContents(), error: await page.textContent('#error') }).toEqual({
      messages: expected,
      error: '',
    });
    throw error;
  }
}

/** A tab that records what went wrong in it: console errors and failed requests. */
async function newTab(): Promise<{ page: Page; problems: string[] }> {
  const page = await browser.newPage();
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(message.text());
  });
  page.on('requestfailed', (request) => {
    // A reload cancels the calls under way (ERR_ABORTED); a CORS refusal is ERR_FAILED.
    if (request.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`${request.method()} ${request.url()}: ${request.failure()?.errorText}`);
  });
  return { page, problems };
}

describe('the classic useStream hook through the gateway, from another origin', () => {
  it('sends, streams tokens, answers an interrupt, rehydrates after a reload and forks from a checkpoint', async () => {
    const { page, problems } = await newTab();
    const query = new URLSearchParams({ api: stack.deploymentUrl, key: stack.key });
    await page.goto(`${classicPage.url}?${query}`);

    // Send: the reply, then the graph asks. (A new thread's events are subscribed to once its run
    // started: the first tokens may come in one replayed burst; the second turn shows them streaming.)
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

describe.each(['sse', 'websocket'])('useStream of @langchain/react through the gateway over %s, from another origin', (transport) => {
  it('sends, streams tokens, answers an interrupt, rehydrates after a reload and forks from a checkpoint', async () => {
    const { page, problems } = await newTab();
    const sockets: string[] = [];
    page.on('websocket', (socket) => sockets.push(socket.url()));
    await page.goto(`${reactPage.url}?${new URLSearchParams({ api: stack.deploymentUrl, key: stack.key, transport })}`);

    // Send: the reply, then the graph asks. (A new thread's events are subscribed to once its run
    // started: the first tokens may come in one replayed burst; the second turn shows them streaming.)
    await page.fill('#text', 'hello');
    await page.click('#compose button[type="submit"]');
    await page.waitForSelector('#interrupt .question:text("Send it?")');
    await waitForMessages(page, ['human: hello', 'ai: You said: hello']);
    const threadId = new URL(page.url()).searchParams.get('thread');
    expect(threadId).toMatch(/^[0-9a-f-]{36}$/);

    // Reload while the graph waits: the messages and the pending interrupt come back from the deployment.
    await page.reload();
    await waitForMessages(page, ['human: hello', 'ai: You said: hello']);
    await page.waitForSelector('#interrupt .question:text("Send it?")');

    // Answer the interrupt: the run resumes and finishes.
    await page.click('#approve');
    const firstTurn = ['human: hello', 'ai: You said: hello', 'ai: Approved: yes'];
    await waitForMessages(page, firstTurn);
    await page.waitForSelector('#status:text("idle")');
    expect(await page.$('#interrupt')).toBeNull();

    // A second turn; then, instead of approving its message, another one: a fork from the
    // checkpoint before the last message, which drops the old branch's answer.
    await page.fill('#text', 'again');
    await page.click('#compose button[type="submit"]');
    await page.waitForSelector('#interrupt .question:text("Send it?")');
    // The reply came token by token: it had texts before its last (how many depends on rendering).
    expect(Number(await page.textContent('#partials'))).toBeGreaterThan(1);
    await page.click('#approve');
    await waitForMessages(page, [...firstTurn, 'human: again', 'ai: You said: again', 'ai: Approved: yes']);
    await page.waitForSelector('#status:text("idle")');
    await page.fill('#text', 'hola');
    await page.click('#redo:not([disabled])');
    await page.waitForSelector('#interrupt .question:text("Send it?")');
    await waitForMessages(page, [...firstTurn, 'human: again', 'ai: You said: again', 'human: hola', 'ai: You said: hola']);
    await page.click('#approve');
    const forked = [...firstTurn, 'human: again', 'ai: You said: again', 'human: hola', 'ai: You said: hola', 'ai: Approved: yes'];
    await waitForMessages(page, forked);
    // It is the thread's state now, also after a reload.
    await page.reload();
    await waitForMessages(page, forked);
    await page.waitForSelector('#status:text("idle")');

    expect(await page.textContent('#error')).toBe('');
    expect(problems).toEqual([]);
    // The transport asked for is the one used: the events came over the gateway's WebSocket tunnel, or not at all.
    const threadSocket = `${stack.deploymentUrl.replace(/^http/, 'ws')}/threads/${threadId}/stream/events`;
    if (transport === 'websocket') expect(sockets).toContain(threadSocket);
    else expect(sockets).toEqual([]);
    await page.close();
  }, 90_000);
});

it('a page of an origin the deployment’s http.cors does not allow cannot open its WebSocket, even with a key', async () => {
  const { page } = await newTab();
  const frames: string[] = [];
  page.on('websocket', (socket) => socket.on('framereceived', (frame) => frames.push(String(frame.payload))));
  // The same page, from http://localhost:<port>: not an origin test-projects/browser allows.
  const attacker = reactPage.url.replace('127.0.0.1', 'localhost');
  await page.goto(`${attacker}?${new URLSearchParams({ api: stack.deploymentUrl, key: stack.key, transport: 'websocket' })}`);
  await page.fill('#text', 'hello');
  await page.click('#compose button[type="submit"]');
  await page.waitForFunction(`document.querySelector('#error').textContent !== ''`, undefined, { timeout: 10_000 });
  expect(await page.textContent('#error')).toBe('Error: Failed to open protocol WebSocket.');
  expect(frames).toEqual([]);
  // Nothing ran: the thread the page named does not exist.
  const threadId = String(await page.evaluate('new URL(location.href).searchParams.get("thread")'));
  expect(threadId).toMatch(/^[0-9a-f-]{36}$/);
  expect((await fetch(`${stack.deploymentUrl}/threads/${threadId}`, { headers: { 'x-api-key': stack.key } })).status).toBe(404);
  await page.close();
}, 30_000);
