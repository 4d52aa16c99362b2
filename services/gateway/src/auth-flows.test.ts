/**
 * Login flows through the gateway's HTTP API, against a real control plane and Postgres: start a
 * flow, wait on it, approve it on the HTML page, and what happens on every wrong turn. The control
 * plane's time is a ManualClock the tests move (timeouts and expiries at exact instants).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import { PassThrough } from 'node:stream';
import { ManualClock } from '@berth/clock';
import { start as startControlPlane, type RunningControlPlane } from '@berth/control-plane';
import { createLogger, silentLogger } from '@berth/log';
import { createTestDatabase, testRedisUrl, until, type TestDatabase } from '@berth/testing';
import { loadGatewayConfig, start, type GatewayConfig, type RunningGateway } from './index.js';

let testDb: TestDatabase;
let controlPlane: RunningControlPlane;
let gateway: RunningGateway;
let adminKey: string;
let tenantId: string;
let memberKey: string;
const logLines: string[] = [];
const clock = new ManualClock(Date.now());

/** Resolves once a timer more than `before` is pending on the clock: the control plane's wait sleeps. */
const asleep = (before: number) => until('the wait to sleep', () => (clock.pending > before ? true : undefined), 10_000, 10);

const gatewayConfig = (extra: Partial<GatewayConfig> = {}): GatewayConfig => ({
  databaseUrl: testDb.url,
  host: '127.0.0.1',
  port: 0,
  logLevel: 'info',
  queue: { kind: 'redis', url: testRedisUrl() },
  services: { 'control-plane': controlPlane.address },
  // Every request of this file comes from 127.0.0.1; the limit has its own test below.
  loginRateLimit: 1000,
  ...extra,
});

beforeAll(async () => {
  testDb = await createTestDatabase('gw_login');
  controlPlane = await startControlPlane({ databaseUrl: testDb.url, grpcHost: '127.0.0.1', grpcPort: 0, logLevel: 'silent', clock }, silentLogger());
  const logStream = new PassThrough();
  logStream.on('data', (chunk: Buffer) => logLines.push(...chunk.toString().split('\n').filter(Boolean)));
  gateway = await start(gatewayConfig(), createLogger({ name: 'gateway', destination: logStream }));
  const boot = await gateway.store.bootstrap();
  const tenant = await gateway.store.createTenant({ name: 'acme <b>corp</b>' });
  tenantId = tenant.id;
  adminKey = (await gateway.store.createApiKey({ tenantId, name: 'admin', role: 'admin' })).key;
  memberKey = (await gateway.store.createApiKey({ tenantId, name: 'dev' })).key;
  expect(boot.key).toBeTruthy();
});
afterAll(async () => {
  await gateway.close();
  await controlPlane.close();
  await testDb.drop();
});

type Json = Record<string, unknown>;

async function startLogin(body?: unknown): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${gateway.url}/v2/auth/login`, {
    method: 'POST',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

async function wait(authId: string, query = ''): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${gateway.url}/v2/auth/wait/${encodeURIComponent(authId)}${query}`);
  return { status: res.status, body: (await res.json()) as Json };
}

/** Opens the approval page like a browser: its HTML, the form's CSRF token and the cookie. */
async function openPage(url: string): Promise<{ status: number; html: string; csrf: string; cookie: string; headers: Headers }> {
  const res = await fetch(url);
  const html = await res.text();
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(html)?.[1] ?? '';
  const cookie = (res.headers.getSetCookie()[0] ?? '').split(';')[0]!;
  return { status: res.status, html, csrf, cookie, headers: res.headers };
}

async function approve(url: string, form: Record<string, string>, headers: Record<string, string>): Promise<{ status: number; html: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gateway.url, ...headers },
    body: new URLSearchParams(form).toString(),
  });
  return { status: res.status, html: await res.text() };
}

describe('POST /v2/auth/login', () => {
  it('starts a flow without credentials: an auth_id to wait on and a different approval URL', async () => {
    const { status, body } = await startLogin();
    expect(status).toBe(201);
    expect(body.auth_id).toMatch(/^brt_auth_/);
    expect(body.url).toMatch(new RegExp(`^${gateway.url}/login/[A-Za-z0-9_-]{32}$`));
    expect(body.url as string).not.toContain(body.auth_id as string);
    expect(Date.parse(body.expires_at as string) - clock.now()).toBe(600_000);

    expect((await startLogin({ client_name: 'x'.repeat(201) })).status).toBe(422);
    const extra = await startLogin({ client_name: 'ok', scope: 'all' });
    expect(extra).toMatchObject({ status: 422, body: { detail: [{ loc: ['body', 'scope'], type: 'extra_forbidden' }] } });
  });
});

describe('approval links', () => {
  /** POST /v2/auth/login through node:http, which lets a client choose its Host and X-Forwarded-* headers. */
  const loginWithHeaders = (base: string, headers: Record<string, string>) =>
    new Promise<Json>((resolve, reject) => {
      const req = http.request(`${base}/v2/auth/login`, { method: 'POST', headers });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve(JSON.parse(text) as Json));
      });
      req.on('error', reject);
      req.end();
    });
  const spoofed = { host: 'evil.example', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' };

  it('point at the gateway’s own address, whatever Host and X-Forwarded-* the client sends', async () => {
    const body = await loginWithHeaders(gateway.url, spoofed);
    expect(body.url).toMatch(new RegExp(`^${gateway.url}/login/[A-Za-z0-9_-]{32}$`));
    expect(body.url as string).not.toContain('evil.example');
    // The page it links to shows and checks the same origin.
    const page = await openPage(body.url as string);
    expect(page.html).toContain(new URL(gateway.url).host);
  });

  it('use BERTH_PUBLIC_URL when set', async () => {
    const publicUrl = loadGatewayConfig({ DATABASE_URL: testDb.url, BERTH_PUBLIC_URL: 'https://berth.example.com/platform/' }).publicUrl;
    expect(publicUrl).toBe('https://berth.example.com/platform/');
    expect(() => loadGatewayConfig({ DATABASE_URL: testDb.url, BERTH_PUBLIC_URL: 'javascript:alert(1)' })).toThrow(/BERTH_PUBLIC_URL/);
    const behindIngress = await start(gatewayConfig({ logLevel: 'silent', publicUrl: publicUrl! }), silentLogger());
    try {
      const body = await loginWithHeaders(behindIngress.url, spoofed);
      expect(body.url).toMatch(/^https:\/\/berth\.example\.com\/platform\/login\/[A-Za-z0-9_-]{32}$/);
    } finally {
      await behindIngress.close();
    }
  });
});

describe('GET /v2/auth/wait/{auth_id}', () => {
  it('blocks until the approval page is posted, then answers completed with a working token, once', async () => {
    const login = await startLogin({ client_name: 'berth CLI on test' });
    const authId = login.body.auth_id as string;
    const url = login.body.url as string;
    const timers = clock.pending;
    const waiting = wait(authId, '?timeout=20');

    const page = await openPage(url);
    expect(page.status).toBe(200);
    expect(page.html).toContain('berth CLI on test');
    expect(page.csrf).toHaveLength(43);
    await asleep(timers);
    const approved = await approve(url, { api_key: memberKey, csrf_token: page.csrf }, { cookie: page.cookie });
    expect(approved.status).toBe(200);
    expect(approved.html).toContain('Login approved');
    // The tenant name is escaped where the page shows it.
    expect(approved.html).toContain('acme &#60;b&#62;corp&#60;/b&#62;');

    // The clock stood still: the approval's notification woke the wait.
    const answer = await waiting;
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ status: 'completed', token: expect.stringMatching(/^brt_tok_/) });

    const me = await fetch(`${gateway.url}/v1/me`, { headers: { Authorization: `Bearer ${answer.body.token as string}` } });
    expect(await me.json()).toMatchObject({ tenant_id: tenantId, role: 'member', credential: { type: 'access_token' } });

    // Handed out once: later answers say completed without the token; the page says approved.
    expect((await wait(authId, '?timeout=0')).body).toEqual({ status: 'completed', token: null });
    expect((await openPage(url)).status).toBe(409);
    const again = await approve(url, { api_key: adminKey, csrf_token: page.csrf }, { cookie: page.cookie });
    expect(again.status).toBe(409);
  });

  it('answers timeout at the instant the timeout ends, pending for timeout=0, not_found for unknown or expired ids', async () => {
    const { body } = await startLogin();
    const authId = body.auth_id as string;
    const timers = clock.pending;
    let timedOut: Json | undefined;
    const waiting = wait(authId, '?timeout=1').then((r) => (timedOut = r.body));
    await asleep(timers);
    await clock.advance(999);
    expect(timedOut).toBeUndefined();
    await clock.advance(1);
    await waiting;
    expect(timedOut).toEqual({ status: 'timeout', token: null });
    expect((await wait(authId, '?timeout=0')).body).toEqual({ status: 'pending', token: null });

    expect((await wait('brt_auth_' + 'x'.repeat(43), '?timeout=0')).body).toEqual({ status: 'not_found', token: null });
    expect((await wait('not-even-close')).body).toEqual({ status: 'not_found', token: null });

    await clock.advance(600_000);
    expect((await wait(authId, '?timeout=5')).body).toEqual({ status: 'not_found', token: null });
  });

  it('refuses a timeout that is not an integer from 0 to 300, and unknown query parameters, with 422', async () => {
    const { body } = await startLogin();
    const authId = body.auth_id as string;
    for (const [query, type] of [
      ['abc', 'number_type'],
      ['1.5', 'number_type'],
      ['', 'number_type'],
      ['-1', 'greater_than_equal'],
      ['301', 'less_than_equal'],
    ] as const) {
      const res = await wait(authId, `?timeout=${query}`);
      expect(res.status).toBe(422);
      expect(res.body).toEqual({ detail: [{ loc: ['query', 'timeout'], msg: expect.stringMatching(/^Input should be/), type }] });
    }
    const twice = await wait(authId, '?timeout=1&timeout=2');
    expect(twice.status).toBe(422);
    const unknown = await wait(authId, '?timeout=0&wait=1');
    expect(unknown).toMatchObject({ status: 422, body: { detail: [{ loc: ['query', 'wait'], type: 'extra_forbidden' }] } });
    expect((await wait(authId, '?timeout=300&timeout_ms=5')).status).toBe(422);
  });
});

describe('the approval page', () => {
  it('refuses a bad key without echoing input, and escapes the client name', async () => {
    const hostile = '<script>alert(1)</script>"><img src=x onerror=alert(2)>';
    const { body } = await startLogin({ client_name: hostile });
    const url = body.url as string;
    const page = await openPage(url);
    expect(page.html).not.toContain('<script>');
    expect(page.html).not.toContain('<img');
    expect(page.html).toContain('&#60;script&#62;alert(1)&#60;/script&#62;&#34;&#62;&#60;img src=x onerror=alert(2)&#62;');
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'/);
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(page.cookie).toMatch(/^berth_login_csrf=/);
    expect(page.headers.getSetCookie()[0]).toMatch(/HttpOnly/i);
    expect(page.headers.getSetCookie()[0]).toMatch(/SameSite=Strict/i);

    const badKey = `brt_key_<img src=x onerror=alert(3)>`;
    const refused = await approve(url, { api_key: badKey, csrf_token: page.csrf }, { cookie: page.cookie });
    expect(refused.status).toBe(401);
    expect(refused.html).toContain('That API key is not valid');
    expect(refused.html).not.toContain('onerror=alert(3)');
    expect(refused.html).not.toContain('<img');
    // A revoked key is refused the same way; the flow stays pending.
    const revokedKey = await gateway.store.createApiKey({ tenantId, name: 'old' });
    await gateway.store.revokeApiKey(tenantId, revokedKey.record.id);
    expect((await approve(url, { api_key: revokedKey.key, csrf_token: page.csrf }, { cookie: page.cookie })).status).toBe(401);
    expect((await wait(body.auth_id as string, '?timeout=0')).body.status).toBe('pending');
  });

  it('refuses posts without the page’s CSRF token and cookie, or from another origin', async () => {
    const { body } = await startLogin();
    const url = body.url as string;
    const page = await openPage(url);
    const form = { api_key: adminKey, csrf_token: page.csrf };
    expect((await approve(url, form, {})).status).toBe(403);
    expect((await approve(url, { api_key: adminKey }, { cookie: page.cookie })).status).toBe(403);
    expect((await approve(url, { ...form, csrf_token: 'x'.repeat(43) }, { cookie: page.cookie })).status).toBe(403);
    const foreign = await approve(url, form, { cookie: page.cookie, origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
    expect(foreign.html).toContain('not sent from its own page');
    expect((await approve(url, form, { cookie: page.cookie, origin: 'null' })).status).toBe(403);
    expect((await wait(body.auth_id as string, '?timeout=0')).body.status).toBe('pending');
    // The real page still works after all that, also when a TLS-terminating proxy makes the
    // browser's origin https while the gateway itself speaks http.
    expect((await approve(url, form, { cookie: page.cookie, origin: gateway.url.replace('http:', 'https:') })).status).toBe(200);
    expect((await wait(body.auth_id as string, '?timeout=0')).body.status).toBe('completed');
  });

  it('explains unknown and expired links', async () => {
    const unknown = await openPage(`${gateway.url}/login/${'A'.repeat(32)}`);
    expect(unknown.status).toBe(404);
    expect(unknown.html).toContain('not known');
    expect(unknown.html).toContain('berth login');
    const { body } = await startLogin();
    const url = body.url as string;
    const page = await openPage(url);
    await clock.advance(600_000);
    const expired = await openPage(url);
    expect(expired.status).toBe(410);
    expect(expired.html).toContain('has expired');
    expect((await approve(url, { api_key: adminKey, csrf_token: page.csrf }, { cookie: page.cookie })).status).toBe(410);
  });
});

describe('around the flow', () => {
  it('keeps the secrets out of the request log', async () => {
    const before = logLines.length;
    const { body } = await startLogin();
    await wait(body.auth_id as string, '?timeout=0');
    await openPage(body.url as string);
    // A request's line is written as its response finishes, which may be after the client read it.
    await until('both requests in the log', () => {
      const mine = logLines.slice(before).join('\n');
      return mine.includes('"route":"/v2/auth/wait/{auth_id}"') && mine.includes('"route":"/login/{approval_id}"') ? true : undefined;
    });
    const log = logLines.join('\n');
    expect(log).toContain('/v2/auth/wait/[redacted]');
    expect(log).toContain('/login/[redacted]');
    expect(log).not.toContain(body.auth_id as string);
    expect(log).not.toContain((body.url as string).split('/login/')[1]!);
  });

  it('lists the routes in the OpenAPI document, with the timeout range', async () => {
    const doc = (await (await fetch(`${gateway.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, Json>> };
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/v2/auth/login', '/v2/auth/wait/{auth_id}', '/login/{approval_id}']));
    const waitOp = doc.paths['/v2/auth/wait/{auth_id}']!.get!;
    expect(waitOp.security).toBeUndefined();
    expect(waitOp.parameters).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          name: 'timeout',
          in: 'query',
          required: false,
          schema: expect.objectContaining({ type: 'integer', minimum: 0, maximum: 300 }),
        }),
      ]),
    );
    expect(Object.keys(waitOp.responses as Json)).toEqual(expect.arrayContaining(['200', '422']));
  });

  it('limits how often one address starts logins, and answers 503 without a control plane', async () => {
    const limited = await start(gatewayConfig({ logLevel: 'silent', loginRateLimit: 2 }), silentLogger());
    const noControlPlane = await start(gatewayConfig({ logLevel: 'silent', services: {} }), silentLogger());
    try {
      const post = (base: string) => fetch(`${base}/v2/auth/login`, { method: 'POST' });
      expect((await post(limited.url)).status).toBe(201);
      expect((await post(limited.url)).status).toBe(201);
      const third = await post(limited.url);
      expect(third.status).toBe(429);
      expect(((await third.json()) as Json).detail).toMatch(/Too many login attempts/);
      const down = await post(noControlPlane.url);
      expect(down.status).toBe(503);
      expect(((await down.json()) as Json).detail).toMatch(/control plane is not configured/);
    } finally {
      await limited.close();
      await noControlPlane.close();
    }
  });
});
