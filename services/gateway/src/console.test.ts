/**
 * The web console (console/, built by `make build`) served by the gateway at `/`, in real Chromium:
 * what the gateway answers for its pages and files (CSP, caching, deep links, API paths untouched),
 * and the pages as a user meets them — sign-in with an API key (the key kept nowhere), the
 * deployments list with its search, platform status — each with an axe-core check (no serious or
 * critical violation, light and dark), and no request to any host but the gateway.
 * The deployments come from a fake control plane over real gRPC; keys and sessions from Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { captureLogger, createTestDatabase, launchChromium, type CapturedLogs, type TestDatabase } from '@berth/testing';
import type { Browser, Page } from 'playwright-core';
import { accessibilityProblems, newConsoleTab, signIn as signInWith } from './__tests__/console-browser.js';
import { FakeDeploymentService } from './__tests__/fake-deployments.js';
import { testGatewayConfig } from './__tests__/test-config.js';
import { CONSOLE_CSP } from './console.js';
import { start, type RunningGateway } from './index.js';
import { BERTH_VERSION } from './version.js';

let testDb: TestDatabase;
let fake: FakeDeploymentService;
let gateway: RunningGateway;
let browser: Browser;
let logs: CapturedLogs;
let platformKey: string;
let tenantId: string;
let key: string;

type Json = Record<string, any>;

async function call(path: string, init: { method?: string; key?: string; json?: unknown } = {}): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${gateway.url}${path}`, {
    method: init.method ?? 'GET',
    headers: { ...(init.key ? { 'x-api-key': init.key } : {}), ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json };
}

/** A deployment of the test tenant, its status set as the control plane would. */
async function deployment(name: string, status = 'READY', statusMessage = ''): Promise<string> {
  const created = await call('/v2/deployments', {
    method: 'POST',
    key,
    json: { name, source: 'external_docker', source_revision_config: { image_uri: 'example/agent:1' } },
  });
  expect(created.status).toBe(201);
  Object.assign(fake.deployments.get(created.body.id as string)!, { status, statusMessage });
  return created.body.id as string;
}

beforeAll(async () => {
  testDb = await createTestDatabase('gw_console');
  fake = await new FakeDeploymentService().start();
  logs = captureLogger('gateway');
  gateway = await start(testGatewayConfig(testDb.url, fake.address), logs.logger);
  platformKey = (await gateway.store.bootstrap()).key;
  const tenant = await call('/v1/tenants', { method: 'POST', key: platformKey, json: { name: 'console' } });
  tenantId = tenant.body.tenant.tenant_id as string;
  const created = await call(`/v1/tenants/${tenantId}/api-keys`, { method: 'POST', key: platformKey, json: { name: 'laptop' } });
  key = created.body.key as string;
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await gateway?.close();
  await fake?.close();
  await testDb?.drop();
});

const newTab = (colorScheme: 'light' | 'dark' = 'light') => newConsoleTab(browser, gateway.url, colorScheme);
const signIn = (page: Page, apiKey = key) => signInWith(page, apiKey);

describe('the gateway serving the console', () => {
  it('says where the console is in its start-up line', () => {
    expect(logs.lines().find((line) => line.console)).toMatchObject({
      console: `${gateway.url}/`,
      msg: `gateway listening; the console is at ${gateway.url}/`,
    });
  });

  it('answers its pages with index.html, not cached, under a self-only CSP; deep links too', async () => {
    const index = await fetch(`${gateway.url}/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toMatch(/^text\/html/);
    expect(index.headers.get('cache-control')).toBe('no-store');
    expect(index.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
    expect(CONSOLE_CSP).toContain("default-src 'self'");
    expect(CONSOLE_CSP).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
    const html = await index.text();
    expect(html).toContain('<div id="root">');
    for (const path of [
      '/sign-in',
      '/deployments?q=alpha',
      '/deployments/',
      '/deployments/00000000-0000-4000-8000-000000000000?log=build',
      '/deployments/00000000-0000-4000-8000-000000000000/studio',
      '/status',
      '/traces?range=7d',
      `/traces/00000000-0000-4000-8000-000000000000?filter=${encodeURIComponent('eq(thread_id, "t")')}`,
      '/traces/p/t?run=r',
    ]) {
      const page = await fetch(`${gateway.url}${path}`);
      expect({ path, status: page.status, csp: page.headers.get('content-security-policy'), same: (await page.text()) === html }).toEqual({
        path,
        status: 200,
        csp: CONSOLE_CSP,
        same: true,
      });
    }
  });

  it('leaves every API path to the API: JSON answers, never the console', async () => {
    for (const path of [
      '/runs',
      '/sessions',
      '/info',
      '/v2/deployments',
      '/v1/me',
      '/healthz',
      '/readyz',
      '/api/v1/sessions',
      '/deployments/x/y',
      '/nowhere',
      '/d/00000000-0000-4000-8000-000000000000/ok',
    ]) {
      const res = await fetch(`${gateway.url}${path}`);
      expect({ path, type: res.headers.get('content-type') }).toEqual({ path, type: expect.stringMatching(/^application\/json/) });
      expect(await res.text()).not.toContain('<div id="root">');
    }
  });

  it('serves the hashed files cached for good (gzipped when asked), and nothing outside them', async () => {
    const html = await (await fetch(`${gateway.url}/`)).text();
    const assets = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets.some((a) => a.endsWith('.js'))).toBe(true);
    expect(assets.some((a) => a.endsWith('.css'))).toBe(true);
    let firstLoadBytes = 0;
    for (const asset of assets) {
      expect(asset).toMatch(/-[A-Za-z0-9_-]{6,}\.\w+$/); // a content hash in the name
      const res = await fetch(`${gateway.url}${asset}`, { headers: { 'accept-encoding': 'gzip' } });
      expect({ asset, status: res.status, cache: res.headers.get('cache-control') }).toEqual({
        asset,
        status: 200,
        cache: 'public, max-age=31536000, immutable',
      });
      if (/\.(js|css)$/.test(asset)) {
        expect(res.headers.get('content-encoding')).toBe('gzip');
        firstLoadBytes += Number(res.headers.get('content-length'));
      }
    }
    // The budget for the first load: 300 KB of JS and CSS, gzipped.
    expect(firstLoadBytes).toBeGreaterThan(0);
    expect(firstLoadBytes).toBeLessThanOrEqual(300_000);
    for (const path of ['/assets/..%2Fpackage.json', '/assets/..%2Findex.html', '/assets/index.html', '/assets/nope-12345678.js', '/index.html']) {
      const res = await fetch(`${gateway.url}${path}`);
      expect({ path, status: res.status, type: res.headers.get('content-type') }).toEqual({
        path,
        status: 404,
        type: expect.stringMatching(/^application\/json/),
      });
    }
  });
});

describe('the console in a browser, before signing in', () => {
  it('opens at / on the sign-in page, from the gateway alone, with no accessibility problem in either theme', async () => {
    for (const scheme of ['light', 'dark'] as const) {
      const { page, context, problems } = await newTab(scheme);
      const response = await page.goto(`${gateway.url}/`);
      expect(response?.headers()['content-security-policy']).toBe(CONSOLE_CSP);
      await page.waitForSelector('h1:text("Sign in to Berth")');
      expect(new URL(page.url()).pathname).toBe('/sign-in');
      expect(await page.evaluate('document.documentElement.dataset.theme')).toBe(scheme);
      expect(await accessibilityProblems(page)).toEqual([]);
      expect(problems).toEqual([]);
      await context.close();
    }
  }, 30_000);
  it("shows no page without a session: each of the console's pages, as the API lists them, sends the visitor to sign in and asks for nothing else", async () => {
    const doc = (await (await fetch(`${gateway.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, { tags?: string[] }>> };
    const pages = Object.entries(doc.paths)
      .filter(([path, methods]) => methods.get?.tags?.includes('console') && path !== '/sign-in' && !path.startsWith('/assets/'))
      .map(([path]) => path.replace(/\{[a-z_]+\}/g, '00000000-0000-4000-8000-000000000000'));
    expect(pages).toEqual(expect.arrayContaining(['/', '/deployments', '/status', '/traces']));
    const { page, context, problems, requests } = await newTab();
    for (const path of pages) {
      requests.length = 0;
      await page.goto(`${gateway.url}${path}`);
      await page.waitForSelector('h1:text("Sign in to Berth")');
      expect({ path, at: new URL(page.url()).pathname, redirect: new URL(page.url()).searchParams.get('redirect') }).toEqual({
        path,
        at: '/sign-in',
        redirect: path === '/' ? '/' : path,
      });
      // The session check is the one API call a page makes before there is a session.
      const apiCalls = requests.map((r) => new URL(r.url()).pathname).filter((p) => p !== path && !p.startsWith('/assets/') && p !== '/sign-in');
      expect({ path, apiCalls: [...new Set(apiCalls)] }).toEqual({ path, apiCalls: ['/v1/auth/session'] });
    }
    expect(problems).toEqual([]);
    await context.close();
  }, 60_000);
});

// These need the session API (`/v1/auth/session`, issue 27 item 2).
describe('the console signed in', () => {
  it('signs in with a key it keeps nowhere, shows the tenant and key name, survives a reload, and signs out with the CSRF token', async () => {
    const { page, context, problems, requests } = await newTab();
    await page.goto(`${gateway.url}/status`);
    await page.waitForSelector('h1:text("Sign in to Berth")');
    expect(new URL(page.url()).searchParams.get('redirect')).toBe('/status');
    await signIn(page, 'brt_key_notarealkeynotarealkeynotarealk');
    await page.waitForSelector('[role=alert]:text("not valid")');
    expect(await page.inputValue('#api_key')).toBe('');

    const posted = page.waitForResponse((r) => r.url().endsWith('/v1/auth/session') && r.request().method() === 'POST' && r.status() === 200);
    await signIn(page);
    const csrfToken = ((await (await posted).json()) as Json).csrf_token as string;
    // Back where the visitor was going.
    await page.waitForSelector('h1:text("Platform status")');
    const identity = page.getByTestId('identity');
    await expect(identity.textContent()).resolves.toContain(tenantId);
    await expect(identity.textContent()).resolves.toContain('laptop');

    const kept = (await page.evaluate(
      `JSON.stringify([{ ...localStorage }, { ...sessionStorage }, document.cookie, location.href, document.body.innerHTML])`,
    )) as string;
    expect(kept).not.toContain(key);
    expect(kept).not.toContain(key.slice(-16));
    expect((await context.cookies()).find((c) => c.name === 'berth_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict' });

    await page.reload();
    await page.waitForSelector('h1:text("Platform status")');
    const signedOut = page.waitForRequest((r) => r.url().endsWith('/v1/auth/session') && r.method() === 'DELETE');
    await page.click('button:text("Sign out")');
    // The token of this session: a reload got it back from GET /v1/auth/session.
    expect((await signedOut).headers()['x-csrf-token']).toBe(csrfToken);
    await page.waitForSelector('h1:text("Sign in to Berth")');
    await page.goto(`${gateway.url}/deployments`);
    await page.waitForSelector('h1:text("Sign in to Berth")');

    // Every unsafe call the console made carried the token (sign-in itself has none yet).
    for (const request of requests.filter((r) => !['GET', 'HEAD'].includes(r.method()) && !(r.method() === 'POST' && r.url().endsWith('/v1/auth/session')))) {
      expect({ url: request.url(), csrf: request.headers()['x-csrf-token'] }).toEqual({ url: request.url(), csrf: expect.any(String) });
    }
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it('lists the deployments with status, reason, revision, URL and time, and searches them by name (a link keeps the search)', async () => {
    await deployment('alpha-agent', 'READY');
    const betaId = await deployment('beta-agent', 'FAILED', 'revision 2 failed: the build could not install its dependencies');
    for (const scheme of ['light', 'dark'] as const) {
      const { page, context, problems } = await newTab(scheme);
      await page.goto(`${gateway.url}/sign-in`);
      await signIn(page);
      await page.waitForSelector('h1:text("Deployments")');
      const row = page.locator('tr', { has: page.locator('th a:text-is("beta-agent")') });
      await row.waitFor();
      await expect(row.textContent()).resolves.toMatch(/FAILED.*the build could not install its dependencies/);
      await expect(row.textContent()).resolves.toContain('/d/');
      // The name links to the deployment's page.
      expect(await row.locator('th a').getAttribute('href')).toBe(`/deployments/${betaId}`);
      expect(await accessibilityProblems(page)).toEqual([]);

      await page.fill('#deployment-search', 'alp');
      // (Locators, not waitForFunction: the page's CSP allows no eval.)
      await page.locator('th a:text-is("beta-agent")').waitFor({ state: 'detached' });
      expect(new URL(page.url()).searchParams.get('q')).toBe('alp');
      await page.goto(`${gateway.url}/deployments?q=beta`);
      await page.waitForSelector('th a:text-is("beta-agent")');
      expect(await page.locator('th a:text-is("alpha-agent")').count()).toBe(0);
      expect(await page.inputValue('#deployment-search')).toBe('beta');
      expect(problems).toEqual([]);
      await context.close();
    }
  }, 30_000);

  it('shows platform status: each service ready, the version, the unhealthy deployments; by keyboard from the navigation', async () => {
    await deployment('gamma-agent', 'UNHEALTHY', 'the agent server does not answer /ok');
    await deployment('delta-agent', 'LATEST_FAILED', 'revision 3 failed; revision 2 still serves');
    await deployment('epsilon-agent', 'READY');
    const { page, context, problems } = await newTab('dark');
    await page.goto(`${gateway.url}/sign-in`);
    await signIn(page);
    await page.waitForSelector('h1:text("Deployments")');
    // Keyboard, on a fresh load (the session cookie stays): the skip link comes first, then the navigation.
    await page.goto(`${gateway.url}/deployments`);
    await page.waitForSelector('h1:text("Deployments")');
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.textContent')).toBe('Skip to content');
    await page.locator('nav[aria-label=Main] a:text("Platform status")').focus();
    await page.keyboard.press('Enter');
    await page.waitForSelector('h1:text("Platform status")');
    await expect(page.getByTestId('overall').textContent()).resolves.toMatch(/^ok\b/);
    for (const service of ['postgres', 'queue', 'control-plane']) {
      await expect(page.locator('tr', { has: page.locator(`th:text-is("${service}")`) }).textContent()).resolves.toContain('ok');
    }
    await page.waitForSelector(`[data-testid=version]:text("${BERTH_VERSION}")`);
    const unhealthy = page.locator('[aria-label="Unhealthy deployments"] li');
    await unhealthy.first().waitFor();
    const texts = await unhealthy.allTextContents();
    expect(texts.find((t) => t.includes('gamma-agent'))).toMatch(/UNHEALTHY.*does not answer \/ok/);
    expect(texts.find((t) => t.includes('delta-agent'))).toMatch(/LATEST FAILED.*revision 2 still serves/);
    expect(texts.some((t) => t.includes('epsilon-agent'))).toBe(false);
    expect(await accessibilityProblems(page)).toEqual([]);
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it('is signed out when its key is revoked', async () => {
    const spare = await call(`/v1/tenants/${tenantId}/api-keys`, { method: 'POST', key: platformKey, json: { name: 'spare' } });
    const { page, context } = await newTab();
    await page.goto(`${gateway.url}/sign-in`);
    await signIn(page, spare.body.key as string);
    await page.waitForSelector('h1:text("Deployments")');
    expect((await call(`/v1/tenants/${tenantId}/api-keys/${spare.body.id as string}`, { method: 'DELETE', key: platformKey })).status).toBe(200);
    await page.click('nav[aria-label=Main] a:text("Platform status")');
    await page.waitForSelector('h1:text("Sign in to Berth")');
    expect(new URL(page.url()).searchParams.get('redirect')).toBe('/status');
    await context.close();
  }, 30_000);
});
