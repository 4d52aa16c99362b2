/**
 * End to end through the built `berth` binary, as `make up` / `make down` run it: a private
 * Postgres under a fresh state folder, the platform as a detached process, and the printed key.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, realpath, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
let stateDir: string;

function berth(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return berthWith({}, ...args);
}

function berthWith(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { env: { ...process.env, BERTH_STATE_DIR: stateDir, BERTH_PORT: '0', LOG_LEVEL: 'warn', BERTH_SANDBOXES: 'off', ...env }, timeout: 90_000 },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function credentials(): Promise<{ gateway_url: string; tenant_id: string; api_key: string }> {
  return JSON.parse(await readFile(join(stateDir, 'credentials.json'), 'utf8'));
}

beforeAll(async () => {
  // mkdtemp makes a private (0700) folder, like a checkout under /root: as root, Postgres (which
  // runs as another user) cannot enter it, so this also covers the cluster moving out of it.
  stateDir = await mkdtemp(join(tmpdir(), 'berth-cli-'));
});
afterAll(async () => {
  await berth('down');
  const postgres = await realpath(join(stateDir, 'postgres')).catch(() => undefined);
  if (postgres && !postgres.startsWith(stateDir)) await rm(postgres, { recursive: true, force: true });
  await rm(stateDir, { recursive: true, force: true });
});

describe('berth up / down', () => {
  it('starts the platform, prints URL and key, and keeps tenants and keys across down/up', async () => {
    const first = await berth('up');
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const creds = await credentials();
    expect(first.stdout).toContain(creds.gateway_url);
    expect(first.stdout).toContain(creds.api_key);
    expect(first.stdout).toContain(creds.tenant_id);
    // A line as each part starts (the first start takes a while).
    expect(first.stdout).toMatch(/^starting Postgres…\npostgres \d+ .*\nstarting the platform…\n/);
    expect((await stat(join(stateDir, 'credentials.json'))).mode & 0o077).toBe(0);

    // The newcomer's curl checks: no key → 401, the printed key → 200, a malformed body → 422.
    expect((await fetch(`${creds.gateway_url}/v1/me`)).status).toBe(401);
    const me = await fetch(`${creds.gateway_url}/v1/me`, { headers: { 'X-Api-Key': creds.api_key } });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ tenant_id: creds.tenant_id });
    const bad = await fetch(`${creds.gateway_url}/v1/tenants`, {
      method: 'POST',
      headers: { 'X-Api-Key': creds.api_key, 'content-type': 'application/json' },
      body: JSON.stringify({ nam: 'typo' }),
    });
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as { detail: unknown[] }).detail).toEqual(
      expect.arrayContaining([{ loc: ['body', 'nam'], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' }]),
    );

    const created = await berth('keys', 'create', '--name', 'ci-bot', '--json');
    expect(created.code).toBe(0);
    const key = JSON.parse(created.stdout) as { id: string; key: string };
    const tenant = await berth('tenants', 'create', 'acme', '--json');
    expect(tenant.code).toBe(0);
    const acme = JSON.parse(tenant.stdout) as { tenant: { tenant_id: string } };

    const status = await berth('status');
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/queue\s+ok \(postgres\)/);
    expect(status.stdout).toMatch(/control-plane\s+ok/);

    // Running `up` again while up reuses the running platform.
    const again = await berth('up');
    expect(again.stdout).toContain('already running');

    expect((await berth('down')).code).toBe(0);
    await expect(fetch(`${creds.gateway_url}/v1/me`)).rejects.toThrow();
    expect((await berth('status')).code).toBe(1);

    // Behind a proxy: the links the gateway hands out use BERTH_PUBLIC_URL.
    const restarted = await berthWith({ BERTH_PUBLIC_URL: 'https://berth.example.com' }, 'up');
    expect(restarted.code).toBe(0);
    expect(restarted.stdout).toContain('https://berth.example.com');
    const after = await credentials();
    expect(after.api_key).toBe(creds.api_key);
    expect(after.tenant_id).toBe(creds.tenant_id);
    const login = (await (await fetch(`${after.gateway_url}/v2/auth/login`, { method: 'POST' })).json()) as { url: string };
    expect(login.url).toMatch(/^https:\/\/berth\.example\.com\/login\//);
    const keyStillWorks = await fetch(`${after.gateway_url}/v1/me`, { headers: { 'X-Api-Key': key.key } });
    expect(keyStillWorks.status).toBe(200);
    const listed = await berth('keys', 'list', '--json');
    expect((JSON.parse(listed.stdout) as { name: string }[]).map((k) => k.name)).toEqual(['bootstrap', 'ci-bot']);
    const tenants = await berth('tenants', 'list', '--json');
    expect((JSON.parse(tenants.stdout) as { tenant_id: string }[]).map((t) => t.tenant_id)).toContain(acme.tenant.tenant_id);

    const revoked = await berth('keys', 'revoke', key.id);
    expect(revoked.stdout).toContain(`revoked API key ${key.id}`);
    expect((await fetch(`${after.gateway_url}/v1/me`, { headers: { 'X-Api-Key': key.key } })).status).toBe(401);
    const twice = await berth('keys', 'revoke', key.id);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toMatch(/409.*already revoked/);
  }, 120_000);

  it('explains what to do when there are no credentials', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'berth-empty-'));
    const res = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(process.execPath, [bin, 'keys', 'list'], { env: { ...process.env, BERTH_STATE_DIR: empty, XDG_CONFIG_HOME: empty } }, (error, _out, stderr) =>
        resolve({ code: error ? 1 : 0, stderr }),
      ),
    );
    await rm(empty, { recursive: true, force: true });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('no credentials for http://127.0.0.1:8080: pass --api-key or set BERTH_API_KEY, or run `berth login`');
  });
});
