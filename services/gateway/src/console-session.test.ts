/**
 * Console sessions (`/v1/auth/session` and the `berth_session` cookie) from the attacker's side:
 * another tenant's resources, cross-site and cross-origin requests, a stolen session token used
 * as a key, a revoked key's session, guessing keys at the sign-in endpoint, secrets in logs and
 * answers, bad input. Real Postgres; sessions expire on a ManualClock the tests move.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DEFAULT_SESSION_LIMITS } from '@berth/auth';
import { ManualClock } from '@berth/clock';
import { silentLogger } from '@berth/log';
import { createPool } from '@berth/db';
import { captureLogger, createTestDatabase, testRedisUrl, until, type TestDatabase } from '@berth/testing';
import { loadGatewayConfig, start, type GatewayConfig, type RunningGateway } from './index.js';

let testDb: TestDatabase;
/** Straight at the gateway's tables, to look at what is stored. */
let pool: ReturnType<typeof createPool>;
let gateway: RunningGateway;
const logs = captureLogger('gateway');
const clock = new ManualClock(Date.now());
let tenantA: string;
let tenantB: string;
let adminKeyA: string;
let memberKeyA: string;
let keyB: string;

const MINUTE = 60_000;
const config = (extra: Partial<GatewayConfig> = {}): GatewayConfig => ({
  databaseUrl: testDb.url,
  host: '127.0.0.1',
  port: 0,
  logLevel: 'debug',
  queue: { kind: 'redis', url: testRedisUrl() },
  services: {},
  // Every request of this file comes from 127.0.0.1; the limit has its own test.
  loginRateLimit: 1000,
  corsAllowOrigins: ['http://allowed.example'],
  consoleSessions: { idleSeconds: 600, maxSeconds: 1800, perKey: 3 },
  clock,
  ...extra,
});

beforeAll(async () => {
  testDb = await createTestDatabase('gw_session');
  gateway = await start(config(), logs.logger);
  pool = createPool({ connectionString: testDb.url, schema: 'gateway' });
  tenantA = (await gateway.store.createTenant({ name: 'a' })).id;
  tenantB = (await gateway.store.createTenant({ name: 'b' })).id;
  adminKeyA = (await gateway.store.createApiKey({ tenantId: tenantA, name: 'console', role: 'admin' })).key;
  memberKeyA = (await gateway.store.createApiKey({ tenantId: tenantA, name: 'dev' })).key;
  keyB = (await gateway.store.createApiKey({ tenantId: tenantB, name: 'b-admin', role: 'admin' })).key;
});
afterAll(async () => {
  await pool.end();
  await gateway.close();
  await testDb.drop();
});

type Json = Record<string, unknown>;
interface Answer {
  status: number;
  body: Json;
  headers: Headers;
}

/** A request as a browser page would send it: `cookie` is the session token, `csrf` the header. */
async function call(
  method: string,
  path: string,
  options: { session?: string; csrf?: string; headers?: Record<string, string>; body?: unknown; base?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.session !== undefined) headers.cookie = `theme=dark; berth_session=${options.session}`;
  if (options.csrf !== undefined) headers['x-csrf-token'] = options.csrf;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${options.base ?? gateway.url}${path}`, {
    method,
    headers,
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Json) : {}, headers: res.headers };
}

/** Signs in; the session token (from Set-Cookie, as the browser keeps it) and the CSRF token. */
async function signIn(apiKey: string, base?: string): Promise<{ session: string; csrf: string; answer: Answer }> {
  const answer = await call('POST', '/v1/auth/session', { body: { api_key: apiKey }, ...(base ? { base } : {}) });
  expect(answer.status).toBe(200);
  const session = /^berth_session=([^;]+)/.exec(answer.headers.getSetCookie()[0] ?? '')?.[1] ?? '';
  return { session, csrf: answer.body.csrf_token as string, answer };
}

describe('signing in', () => {
  it('sets an HttpOnly, SameSite=Strict cookie and answers the tenant, key name and CSRF token; GET gives them back', async () => {
    const { session, csrf, answer } = await signIn(adminKeyA);
    expect(answer.headers.getSetCookie()).toEqual([`berth_session=${session}; Path=/; HttpOnly; SameSite=Strict`]);
    expect(answer.headers.get('cache-control')).toBe('no-store');
    expect(answer.body).toEqual({ tenant_id: tenantA, key_name: 'console', csrf_token: csrf, expires_at: new Date(clock.now() + 1800_000).toISOString() });
    // Neither the key nor the session token is ever in an answer's body.
    expect(JSON.stringify(answer.body)).not.toContain(adminKeyA);
    expect(JSON.stringify(answer.body)).not.toContain(session);
    const again = await call('GET', '/v1/auth/session', { session });
    expect(again).toMatchObject({ status: 200, body: answer.body });
    const me = await call('GET', '/v1/me', { session });
    expect(me.body).toMatchObject({ tenant_id: tenantA, role: 'admin', credential: { type: 'session' } });
  });

  it('marks the cookie Secure when the public URL is https', async () => {
    const tls = await start(config({ publicUrl: 'https://console.example', migrate: false, logLevel: 'silent' }), silentLogger());
    try {
      const { session, answer } = await signIn(memberKeyA, tls.url);
      expect(answer.headers.getSetCookie()).toEqual([`berth_session=${session}; Path=/; HttpOnly; Secure; SameSite=Strict`]);
      // The page at the public URL may use it; so may the gateway's own address (no Origin: not a cross-origin page).
      expect((await call('GET', '/v1/me', { session, base: tls.url, headers: { origin: 'https://console.example' } })).status).toBe(200);
      expect((await call('GET', '/v1/me', { session, base: tls.url, headers: { origin: 'http://console.example' } })).status).toBe(403);
    } finally {
      await tls.close();
    }
  });

  it('refuses a bad, revoked or expired key with 401, and a sign-in from another origin with 403', async () => {
    const revoked = await gateway.store.createApiKey({ tenantId: tenantA, name: 'old' });
    await gateway.store.revokeApiKey(tenantA, revoked.record.id);
    const expired = await gateway.store.createApiKey({ tenantId: tenantA, name: 'exp', expiresAt: new Date(Date.now() - 1000) });
    for (const apiKey of ['brt_key_' + 'x'.repeat(32), revoked.key, expired.key, 'nonsense', '']) {
      const answer = await call('POST', '/v1/auth/session', { body: { api_key: apiKey } });
      expect(answer.status).toBe(401);
      expect(answer.body.detail).toMatch(/not valid/);
      expect(answer.headers.getSetCookie()).toEqual([]);
    }
    // Login CSRF: another site signing the visitor's browser in to the attacker's tenant.
    for (const origin of ['http://evil.example', 'http://allowed.example', 'null']) {
      const answer = await call('POST', '/v1/auth/session', { body: { api_key: keyB }, headers: { origin } });
      expect(answer.status).toBe(403);
      expect(answer.headers.getSetCookie()).toEqual([]);
    }
    // A form post (no JSON) never gets that far.
    const form = await fetch(`${gateway.url}/v1/auth/session`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: `{"api_key":"${keyB}"}` });
    expect(form.status).toBe(415);
  });

  it('refuses bad input with 422, never a 500', async () => {
    for (const body of [{}, { api_key: adminKeyA, remember: true }, { api_key: 42 }, { api_key: 'k'.repeat(201) }, [adminKeyA], 'text']) {
      const answer = await call('POST', '/v1/auth/session', { body });
      expect(answer.status).toBe(422);
      expect(answer.body.detail).toContainEqual(expect.objectContaining({ loc: expect.any(Array), msg: expect.any(String), type: expect.any(String) }));
    }
    for (const cookie of ['berth_session=', 'berth_session=%00%ff', `berth_session=${'a'.repeat(5000)}`, 'berth_session=brt_ses_x; berth_session=y']) {
      expect((await fetch(`${gateway.url}/v1/me`, { headers: { cookie } })).status).toBe(401);
    }
  });

  it('rate-limits sign-in attempts per client address, as other key checks are', async () => {
    const limited = await start(config({ loginRateLimit: 3, migrate: false, logLevel: 'silent' }), silentLogger());
    try {
      for (let i = 0; i < 3; i++)
        expect((await call('POST', '/v1/auth/session', { base: limited.url, body: { api_key: `brt_key_guess${i}` } })).status).toBe(401);
      const limitedAnswer = await call('POST', '/v1/auth/session', { base: limited.url, body: { api_key: adminKeyA } });
      expect(limitedAnswer.status).toBe(429);
      expect(limitedAnswer.body.detail).toMatch(/Too many sign-in attempts/);
    } finally {
      await limited.close();
    }
  });
});

describe('what a session may do', () => {
  it('acts as its key within its tenant, and never reaches another tenant', async () => {
    const { session, csrf } = await signIn(adminKeyA);
    expect((await call('GET', `/v1/tenants/${tenantA}/api-keys`, { session })).status).toBe(200);
    expect((await call('GET', `/v1/tenants/${tenantB}/api-keys`, { session })).status).toBe(403);
    expect((await call('GET', `/v1/tenants/${tenantB}`, { session })).status).toBe(403);
    expect((await call('POST', `/v1/tenants/${tenantB}/api-keys`, { session, csrf, body: { name: 'stolen' } })).status).toBe(403);
    expect((await call('GET', '/v1/me', { session, headers: { 'x-tenant-id': tenantB } })).status).toBe(403);
    // A member key's session has the member's rights only.
    const member = await signIn(memberKeyA);
    expect((await call('POST', `/v1/tenants/${tenantA}/api-keys`, { ...member, body: { name: 'escalate' } })).status).toBe(403);
  });

  it('needs X-CSRF-Token on unsafe methods: a cross-site POST without it, or with another session’s, is a 403', async () => {
    const { session, csrf } = await signIn(adminKeyA);
    const other = await signIn(keyB);
    const create = (headers: { csrf?: string }) => call('POST', `/v1/tenants/${tenantA}/api-keys`, { session, ...headers, body: { name: 'ci' } });
    for (const forged of [{}, { csrf: '' }, { csrf: other.csrf }, { csrf: csrf.slice(0, -1) }]) {
      const answer = await create(forged);
      expect(answer.status).toBe(403);
      expect(answer.body.detail).toMatch(/X-CSRF-Token/i);
    }
    expect((await call('DELETE', '/v1/auth/session', { session })).status).toBe(403);
    expect((await call('GET', '/v1/auth/session', { session })).status).toBe(200);
    expect((await create({ csrf })).status).toBe(201);
  });

  it('is refused from pages of other origins, even ones CORS allows for header credentials', async () => {
    const { session } = await signIn(adminKeyA);
    const refusals: Record<string, string>[] = [
      { origin: 'http://evil.example' },
      { origin: 'http://allowed.example' },
      { origin: 'null' },
      { origin: gateway.url.replace('127.0.0.1', 'localhost') },
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
    ];
    for (const headers of refusals) {
      const answer = await call('GET', '/v1/auth/session', { session, headers });
      expect(answer.status).toBe(403);
      expect(answer.headers.get('access-control-allow-credentials')).toBeNull();
      expect(answer.body).not.toHaveProperty('csrf_token');
    }
    for (const headers of [{ origin: gateway.url }, { 'sec-fetch-site': 'same-origin' }, {}] as Record<string, string>[]) {
      expect((await call('GET', '/v1/auth/session', { session, headers })).status).toBe(200);
    }
    // A preflight from an allowed origin never lets credentials through.
    const preflight = await fetch(`${gateway.url}/v1/me`, {
      method: 'OPTIONS',
      headers: { origin: 'http://allowed.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-csrf-token' },
    });
    expect(preflight.headers.get('access-control-allow-credentials')).toBeNull();
  });

  it('is not a key or a bearer token, and a key is not a session', async () => {
    const { session } = await signIn(adminKeyA);
    expect((await call('GET', '/v1/me', { headers: { authorization: `Bearer ${session}` } })).status).toBe(401);
    expect((await call('GET', '/v1/me', { headers: { 'x-api-key': session } })).status).toBe(401);
    expect((await call('GET', '/v1/me', { session: adminKeyA })).status).toBe(401);
    // A session mints no bearer token: one would outlive its sign-out.
    expect(
      (await call('POST', '/v1/auth/tokens', { session, csrf: (await call('GET', '/v1/auth/session', { session })).body.csrf_token as string })).status,
    ).toBe(403);
    // Key-only routes of the session itself: a key is not a session.
    expect((await call('GET', '/v1/auth/session', { headers: { 'x-api-key': adminKeyA } })).status).toBe(403);
  });
});

describe('how a session ends', () => {
  it('ends at once when its key is revoked', async () => {
    const key = await gateway.store.createApiKey({ tenantId: tenantA, name: 'short-lived' });
    const { session } = await signIn(key.key);
    expect((await call('GET', '/v1/me', { session })).status).toBe(200);
    // Revoked through the API by an admin's own session.
    const admin = await signIn(adminKeyA);
    expect((await call('DELETE', `/v1/tenants/${tenantA}/api-keys/${key.record.id}`, admin)).status).toBe(200);
    const after = await call('GET', '/v1/me', { session });
    expect(after.status).toBe(401);
    expect(after.body.detail).toMatch(/session has ended/);
    expect((await call('GET', '/v1/auth/session', { session })).status).toBe(401);
  });

  it('goes with its key when the key is deleted (as a tenant’s deletion deletes its keys)', async () => {
    const key = await gateway.store.createApiKey({ tenantId: tenantA, name: 'deleted' });
    const { session } = await signIn(key.key);
    await pool.query('DELETE FROM api_keys WHERE id = $1', [key.record.id]);
    expect((await call('GET', '/v1/me', { session })).status).toBe(401);
    const { rows } = await pool.query('SELECT 1 FROM console_sessions WHERE api_key_id = $1', [key.record.id]);
    expect(rows).toEqual([]);
  });

  it('signs out: 204, the cookie cleared, the session refused after', async () => {
    const { session, csrf } = await signIn(adminKeyA);
    const out = await call('DELETE', '/v1/auth/session', { session, csrf });
    expect(out.status).toBe(204);
    expect(out.headers.getSetCookie()).toEqual(['berth_session=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; SameSite=Strict']);
    expect((await call('GET', '/v1/auth/session', { session })).status).toBe(401);
    expect((await call('GET', '/v1/auth/session', {})).status).toBe(401);
  });

  it('ends after the idle timeout without requests, and at the absolute expiry however busy', async () => {
    const idle = await signIn(adminKeyA);
    const busy = await signIn(adminKeyA);
    await clock.advance(9 * MINUTE);
    expect((await call('GET', '/v1/me', { session: busy.session })).status).toBe(200);
    await clock.advance(2 * MINUTE);
    // 11 minutes: past the 10-minute idle timeout of the one left alone, not of the one used at 9.
    expect((await call('GET', '/v1/me', { session: idle.session })).status).toBe(401);
    for (let elapsed = 11; elapsed < 29; elapsed += 6) {
      expect((await call('GET', '/v1/me', { session: busy.session })).status).toBe(200);
      await clock.advance(6 * MINUTE);
    }
    // 29 minutes, used every 6: alive one minute before the 30-minute expiry, ended at it.
    expect((await call('GET', '/v1/me', { session: busy.session })).status).toBe(200);
    await clock.advance(MINUTE);
    expect((await call('GET', '/v1/me', { session: busy.session })).status).toBe(401);
  });

  it('keeps at most the limit of live sessions per key: signing in again ends the oldest', async () => {
    const key = (await gateway.store.createApiKey({ tenantId: tenantA, name: 'many' })).key;
    const sessions = [];
    for (let i = 0; i < 4; i++) sessions.push((await signIn(key)).session);
    const statuses = await Promise.all(sessions.map(async (session) => (await call('GET', '/v1/me', { session })).status));
    expect(statuses).toEqual([401, 200, 200, 200]);
    const stored = await pool.query('SELECT count(*)::int AS n FROM console_sessions s JOIN api_keys k ON k.id = s.api_key_id WHERE k.name = $1', ['many']);
    expect(stored.rows[0].n).toBe(3);
  });
});

describe('secrets', () => {
  it('stores only a digest of the session token, and logs neither it, the key nor the CSRF token', async () => {
    const { session, csrf } = await signIn(memberKeyA);
    await call('GET', '/v1/me', { session });
    await call('POST', `/v1/tenants/${tenantA}/api-keys`, { session, body: { name: 'x' } });
    await call('DELETE', '/v1/auth/session', { session, csrf });
    const { rows } = await pool.query('SELECT * FROM console_sessions');
    expect(rows.length).toBeGreaterThan(0);
    expect(JSON.stringify(rows)).not.toContain(session.slice(8));
    const signedOut = (line: Json) => (line.req as Json | undefined)?.method === 'DELETE' && (line.res as Json | undefined)?.statusCode === 204;
    await until('the sign-out in the log', () => (logs.lines().some(signedOut) ? true : undefined));
    const log = JSON.stringify(logs.lines());
    for (const secret of [session, session.slice(8), memberKeyA, adminKeyA, keyB, csrf]) expect(log).not.toContain(secret);
  });
});

describe('settings', () => {
  it('reads the lifetimes and the limit from the environment, with defaults, and refuses nonsense', () => {
    const env = { DATABASE_URL: 'postgres://x/y' };
    expect(loadGatewayConfig(env).consoleSessions).toEqual({ idleSeconds: 3600, maxSeconds: 43200, perKey: 10 });
    expect(loadGatewayConfig(env).consoleSessions).toEqual(DEFAULT_SESSION_LIMITS);
    const set = { ...env, CONSOLE_SESSION_IDLE_SECONDS: '900', CONSOLE_SESSION_MAX_SECONDS: '7200', CONSOLE_SESSIONS_PER_KEY: '2' };
    expect(loadGatewayConfig(set).consoleSessions).toEqual({ idleSeconds: 900, maxSeconds: 7200, perKey: 2 });
    for (const [name, value] of [
      ['CONSOLE_SESSION_IDLE_SECONDS', '0'],
      ['CONSOLE_SESSION_MAX_SECONDS', 'forever'],
      ['CONSOLE_SESSIONS_PER_KEY', '0'],
    ] as const) {
      expect(() => loadGatewayConfig({ ...env, [name]: value })).toThrow(new RegExp(name));
    }
  });
});
