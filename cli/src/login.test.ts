/**
 * `berth login` end to end through the built binary, against a control plane and a gateway on a
 * real Postgres; the test plays the person who approves in the browser, over HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { start as startControlPlane, type RunningControlPlane } from '@berth/control-plane';
import { start as startGateway, type RunningGateway } from '@berth/gateway';
import { freePort } from '@berth/local-stack';
import { silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { testGatewayConfig } from '../../services/gateway/src/__tests__/test-config.js';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
let testDb: TestDatabase;
let controlPlane: RunningControlPlane;
let gateway: RunningGateway;
let home: string;
let adminKey: string;
let adminKeyId: string;
let tenantId: string;

const credentialsFile = () => join(home, 'config', 'berth', 'credentials.json');

function cliEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, 'config'), BERTH_STATE_DIR: join(home, 'state'), LOG_LEVEL: 'warn' };
  for (const name of ['BERTH_API_KEY', 'BERTH_HOST_URL', 'BERTH_TENANT_ID', 'DATABASE_URL']) delete env[name];
  return env;
}

function berth(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { env: cliEnv(), timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Approves a login link like a person in a browser: open the page, paste the key, submit. */
async function approveInBrowser(url: string, apiKey: string): Promise<number> {
  const page = await fetch(url);
  const html = await page.text();
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(html)![1]!;
  const cookie = page.headers.getSetCookie()[0]!.split(';')[0]!;
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, origin: new URL(url).origin },
    body: new URLSearchParams({ api_key: apiKey, csrf_token: csrf }).toString(),
  });
  return res.status;
}

/** Runs `berth login …`, approving the link it prints with `apiKey` (unless undefined). */
function loginApprovedWith(apiKey: string | undefined, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string; approval?: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, 'login', ...args], { env: cliEnv() });
    let stdout = '';
    let stderr = '';
    let approval: Promise<number> | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const url = /(http:\/\/\S+\/login\/\S+)/.exec(stdout)?.[1];
      if (url && apiKey && !approval) approval = approveInBrowser(url, apiKey);
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      void (approval ?? Promise.resolve(undefined)).then((status) => resolve({ code: code ?? 1, stdout, stderr, ...(status ? { approval: status } : {}) }));
    });
  });
}

beforeAll(async () => {
  testDb = await createTestDatabase('cli_login');
  controlPlane = await startControlPlane({ databaseUrl: testDb.url, grpcHost: '127.0.0.1', grpcPort: 0, logLevel: 'silent' }, silentLogger());
  gateway = await startGateway(testGatewayConfig(testDb.url, controlPlane.address), silentLogger());
  const tenant = await gateway.store.createTenant({ name: 'acme' });
  tenantId = tenant.id;
  const admin = await gateway.store.createApiKey({ tenantId, name: 'laptop-admin', role: 'admin' });
  adminKey = admin.key;
  adminKeyId = admin.record.id;
  home = await mkdtemp(join(tmpdir(), 'berth-login-'));
});
afterAll(async () => {
  await gateway.close();
  await controlPlane.close();
  await testDb.drop();
  await rm(home, { recursive: true, force: true });
});

describe('berth login', () => {
  it('prints a link, waits for its approval, stores the token, and later commands use it until logout', async () => {
    const result = await loginApprovedWith(adminKey, '--host', gateway.url);
    expect(result.stderr).toBe('');
    expect(result.approval).toBe(200);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`${gateway.url}/login/`);
    expect(result.stdout).toContain(`Logged in to ${gateway.url} as tenant "acme" (${tenantId}, admin).`);

    const stored = JSON.parse(await readFile(credentialsFile(), 'utf8')) as Record<string, string>;
    expect(stored).toMatchObject({ host: gateway.url, tenant_id: tenantId, tenant_name: 'acme', role: 'admin', token: expect.stringMatching(/^brt_tok_/) });
    expect(JSON.stringify(stored)).not.toContain(adminKey);
    expect((await stat(credentialsFile())).mode & 0o777).toBe(0o600);
    expect((await stat(dirname(credentialsFile()))).mode & 0o077).toBe(0);

    // No BERTH_API_KEY, no .berth: the stored bearer token authenticates.
    const listed = await berth('keys', 'list', '--json');
    expect(listed.stderr).toBe('');
    expect((JSON.parse(listed.stdout) as { name: string }[]).map((k) => k.name)).toEqual(['laptop-admin']);
    const created = await berth('keys', 'create', '--name', 'ci', '--json');
    expect(created.code).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ tenant_id: tenantId, name: 'ci' });

    // The token is never sent to another host.
    const elsewhere = await berth('keys', 'list', '--url', `http://127.0.0.1:${await freePort()}`);
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toContain('no credentials for');

    const out = await berth('logout');
    expect(out.stdout).toContain(`Logged out of ${gateway.url}`);
    await expect(stat(credentialsFile())).rejects.toThrow();
    const after = await berth('keys', 'list');
    expect(after.code).toBe(1);
    expect(after.stderr).toContain('or run `berth login`');
    expect((await berth('logout')).stdout).toContain('Not logged in.');
  }, 60_000);

  it('says when the stored token stopped working', async () => {
    const result = await loginApprovedWith(adminKey, '--host', gateway.url);
    expect(result.code).toBe(0);
    await gateway.store.revokeApiKey(tenantId, adminKeyId);
    const refused = await berth('keys', 'list');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('no longer valid');
    expect(refused.stderr).toContain('berth login');
    await berth('logout');
  }, 60_000);

  it('explains an unreachable host, a bad --url, and a link nobody approved', async () => {
    const port = await freePort();
    const unreachable = await berth('login', '--host', `http://127.0.0.1:${port}`);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain(`cannot reach Berth at http://127.0.0.1:${port} (ECONNREFUSED): check --url`);

    const bad = await berth('login', '--url', 'ftp://example.com');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--url must be an http(s) URL');

    const unapproved = await loginApprovedWith(undefined, '--host', gateway.url.replace('http://', ''), '--timeout', '1');
    expect(unapproved.code).toBe(1);
    expect(unapproved.stdout).toContain('/login/');
    expect(unapproved.stderr).toContain('not approved in time');
    await expect(stat(credentialsFile())).rejects.toThrow();
  }, 60_000);
});
