/**
 * What every browser test of the console needs: a tab that records what a user would not want
 * (a request to another host, a script error, a CSP refusal), axe-core's serious and critical
 * violations, and signing in with an API key on the sign-in page.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Browser, BrowserContext, Page, Request } from 'playwright-core';

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface ConsoleTab {
  page: Page;
  context: BrowserContext;
  /** Requests to another host than the gateway, script errors and CSP refusals, as they happened. */
  problems: string[];
  requests: Request[];
}

/** A tab in a context of its own (its own cookies), 1280×800, on the gateway at `gatewayUrl`. */
export async function newConsoleTab(browser: Browser, gatewayUrl: string, colorScheme: 'light' | 'dark' = 'light'): Promise<ConsoleTab> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme });
  const page = await context.newPage();
  // Below the test's own timeout, so that a failure names the step that waited.
  page.setDefaultTimeout(10_000);
  const problems: string[] = [];
  const requests: Request[] = [];
  const origin = new URL(gatewayUrl).origin;
  page.on('request', (request) => {
    requests.push(request);
    if (new URL(request.url()).origin !== origin) problems.push(`request to another host: ${request.url()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy|Refused to/.test(message.text())) problems.push(message.text());
  });
  return { page, context, problems, requests };
}

/** axe-core's serious and critical violations on the page as it is (evaluated by the devtools protocol: the CSP stays on). */
export async function accessibilityProblems(page: Page): Promise<string[]> {
  await page.evaluate(axeSource);
  return (await page.evaluate(
    `axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id + ': ' + v.nodes.map((n) => n.target.join(' ')).join(', ')))`,
  )) as string[];
}

/** Fills the sign-in page's form with `apiKey` and submits it. */
export async function signIn(page: Page, apiKey: string): Promise<void> {
  await page.fill('#api_key', apiKey);
  await page.click('button[type=submit]');
}
