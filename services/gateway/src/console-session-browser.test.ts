/**
 * The console session in a real browser (Chromium), from the attacker's side: a page another
 * deployment serves at its deployment URL (the gateway's own origin) and a page of another origin of
 * the same site (another port of the same host: SameSite=Strict lets the cookie through there) both
 * try to read the session's CSRF token and create an API key with the visitor's session.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { silentLogger } from '@berth/log';
import { createTestDatabase, launchChromium, type TestDatabase } from '@berth/testing';
import { FakeDeploymentService } from './__tests__/fake-deployments.js';
import { testGatewayConfig } from './__tests__/test-config.js';
import { start, type RunningGateway } from './index.js';

let testDb: TestDatabase;
let fake: FakeDeploymentService;
let gateway: RunningGateway;
let browser: Browser;
let attacker: http.Server;
let attackerUrl: string;
let tenantId: string;
let adminKey: string;

/**
 * The attacker's script: read the session (for its CSRF token), then create an API key with it.
 * Writes what happened into the page's body and sets the title to "done".
 */
const attack = (gatewayUrl: string) => `<!doctype html><html><head><title>attack</title></head><body><script>
(async () => {
  const out = {};
  let csrf = '';
  try {
    const res = await fetch('${gatewayUrl}/v1/auth/session', { credentials: 'include' });
    out.session = res.status;
    csrf = (await res.json()).csrf_token || '';
  } catch (error) { out.session = 'failed'; }
  out.csrf = csrf;
  try {
    const res = await fetch('${gatewayUrl}/v1/tenants/${tenantId}/api-keys', {
      method: 'POST', credentials: 'include',
      headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
      body: JSON.stringify({ name: 'stolen' }),
    });
    out.create = res.status;
  } catch (error) { out.create = 'failed'; }
  // Without reading the answer: a "simple" request, sent without a preflight.
  try {
    await fetch('${gatewayUrl}/v1/tenants/${tenantId}/api-keys', { method: 'POST', mode: 'no-cors', credentials: 'include', body: '{"name":"stolen"}' });
  } catch (error) {}
  document.body.textContent = JSON.stringify(out);
  document.title = 'done';
})();
</script></body></html>`;

beforeAll(async () => {
  testDb = await createTestDatabase('gw_session_browser');
  fake = await new FakeDeploymentService().start();
  gateway = await start(testGatewayConfig(testDb.url, fake.address), silentLogger());
  tenantId = (await gateway.store.createTenant({ name: 'victim' })).id;
  adminKey = (await gateway.store.createApiKey({ tenantId, name: 'console', role: 'admin' })).key;
  // Serves the attack page: as a deployment's agent server (relative URLs: the gateway's origin) and as another origin.
  attacker = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(attack(req.url === '/other-origin' ? gateway.url : ''));
  });
  await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
  attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => attacker?.close(resolve));
  await gateway?.close();
  await fake?.close();
  await testDb?.drop();
});

/** Signs the browser in from a gateway page, as the console does; the session's CSRF token. */
async function signIn(tab: Page): Promise<string> {
  await tab.goto(`${gateway.url}/healthz`);
  const body = (await tab.evaluate(
    `fetch('/v1/auth/session', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ api_key: ${JSON.stringify(adminKey)} }) }).then((r) => r.json())`,
  )) as { csrf_token: string };
  return body.csrf_token;
}

async function attackFrom(tab: Page, url: string): Promise<Record<string, unknown>> {
  await tab.goto(url);
  await tab.waitForFunction(`document.title === 'done'`, undefined, { timeout: 10_000 });
  return JSON.parse((await tab.textContent('body')) ?? '{}') as Record<string, unknown>;
}

const stolenKeys = async () => (await gateway.store.listApiKeys(tenantId)).filter((key) => key.name === 'stolen');

describe('a console session in Chromium', () => {
  it('works from the gateway’s pages, is HttpOnly and Strict, and needs the CSRF token to write', async () => {
    const context = await browser.newContext();
    const tab = await context.newPage();
    const csrf = await signIn(tab);
    const [cookie] = await context.cookies(gateway.url);
    expect(cookie).toMatchObject({ name: 'berth_session', httpOnly: true, sameSite: 'Strict', path: '/' });
    expect(await tab.evaluate('document.cookie')).not.toContain('berth_session');
    const create = (headers: Record<string, string>) =>
      tab.evaluate(
        `fetch('/v1/tenants/${tenantId}/api-keys', { method: 'POST', headers: ${JSON.stringify({ 'content-type': 'application/json', ...headers })}, body: '{"name":"ci"}' }).then((r) => r.status)`,
      );
    expect(await create({})).toBe(403);
    expect(await create({ 'x-csrf-token': csrf })).toBe(201);
    await context.close();
  });

  it('is of no use to a page a deployment serves at its deployment URL (the gateway’s origin)', async () => {
    const context = await browser.newContext();
    const tab = await context.newPage();
    await signIn(tab);
    // A project with its own auth: anyone can open its pages, and the project chooses what they contain.
    const deploymentId = randomUUID();
    fake.routes.set(deploymentId, { tenantId: randomUUID(), upstreamUrl: attackerUrl, customAuth: true });
    const seen = await attackFrom(tab, `${gateway.url}/d/${deploymentId}/pwn`);
    expect(seen).toEqual({ session: 'failed', csrf: '', create: 'failed' });
    expect(await stolenKeys()).toEqual([]);
    await context.close();
  });

  it('is of no use to a page of another origin of the same site', async () => {
    const context = await browser.newContext();
    const tab = await context.newPage();
    await signIn(tab);
    const seen = await attackFrom(tab, `${attackerUrl}/other-origin`);
    expect(seen).toEqual({ session: 'failed', csrf: '', create: 'failed' });
    expect(await stolenKeys()).toEqual([]);
    await context.close();
  });
});
