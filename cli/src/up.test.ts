/**
 * `berth up` through the built binary, on a test Postgres (DATABASE_URL): it reports only the
 * platform process it started — never another process that answers on the port, never one that
 * died — and it keeps the gateway's port across `down`/`up`, so deployment URLs stay valid.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, isMountPoint } from '@berth/local-stack';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { SandboxClient } from 'langsmith/sandbox';
import { DEFAULT_SANDBOX_IMAGE, privateEngine } from './sandbox-engine.js';
import { StateDir } from './state.js';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
let testDb: TestDatabase;
let temp: string;
let stateDir: string;
let impostor: Server | undefined;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

function collect(child: ReturnType<typeof spawn>): Promise<Result> {
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += String(d)));
  child.stderr!.on('data', (d) => (stderr += String(d)));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code: code ?? 1, stdout, stderr })));
}

function berth(args: string[], env: Record<string, string> = {}): ReturnType<typeof spawn> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('BERTH_')));
  return spawn(process.execPath, [bin, ...args], {
    env: { ...inherited, BERTH_STATE_DIR: stateDir, DATABASE_URL: testDb.url, LOG_LEVEL: 'warn', BERTH_SANDBOXES: 'off', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

const run = (args: string[], env: Record<string, string> = {}) => collect(berth(args, env));

/** A plain loopback server that answers 200 `{"status":"ok"}` to everything, `/readyz` included. */
function listenImpostor(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: 'ok', checks: {} }));
    });
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

async function credentials(): Promise<{ gateway_url: string; api_key: string }> {
  return JSON.parse(await readFile(join(stateDir, 'credentials.json'), 'utf8'));
}

beforeAll(async () => {
  testDb = await createTestDatabase('cli_up');
  temp = await mkdtemp(join(tmpdir(), 'berth-up-'));
});
afterEach(async () => {
  await run(['down']);
  await new Promise((resolve) => (impostor ? impostor.close(resolve) : resolve(undefined)));
  impostor = undefined;
});
afterAll(async () => {
  await testDb?.drop();
  if (temp) await rm(temp, { recursive: true, force: true });
});

describe('berth up', () => {
  it('keeps the gateway on its port across down/up, so deployment URLs stay valid', async () => {
    stateDir = join(temp, 'keeps-port');
    const first = await run(['up'], { BERTH_PORT: '0' });
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const { gateway_url: url, api_key: key } = await credentials();
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await run(['down'])).code).toBe(0);
    await expect(fetch(`${url}/v1/me`)).rejects.toThrow();

    // No BERTH_PORT now: the port of the last start, not 8080 or any free one.
    const second = await run(['up']);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain(`gateway    ${url} `);
    // The console, at the gateway's root, named first.
    expect(second.stdout).toContain(`console    ${url}/ `);
    const page = await fetch(`${url}/`);
    expect({ status: page.status, type: page.headers.get('content-type') }).toEqual({ status: 200, type: expect.stringMatching(/^text\/html/) });
    expect((await credentials()).gateway_url).toBe(url);
    expect((await fetch(`${url}/v1/me`, { headers: { 'x-api-key': key } })).status).toBe(200);
  }, 120_000);

  it('does not start, and says why, when another process holds the port it had', async () => {
    stateDir = join(temp, 'held');
    const port = await freePort();
    const first = await run(['up'], { BERTH_PORT: String(port) });
    expect(first.code).toBe(0);
    expect((await run(['down'])).code).toBe(0);
    impostor = await listenImpostor(port);

    const again = await run(['up']);
    expect(again.code).toBe(1);
    expect(again.stdout).not.toContain('Berth is up');
    expect(again.stderr).toContain(`port ${port} is taken by another process`);
    expect(again.stderr).toContain('BERTH_PORT=<port>');
    expect(existsSync(join(stateDir, 'platform.json'))).toBe(false);
  }, 120_000);

  it('does not take a process that grabbed the port while the platform started for the platform', async () => {
    stateDir = join(temp, 'race');
    const port = await freePort();
    const child = berth(['up'], { BERTH_PORT: String(port) });
    const result = collect(child);
    // `up` opens the platform's log just before it starts the process, after looking at the port:
    // take the port now, before the platform binds it (which takes it a few seconds).
    const log = join(stateDir, 'logs', 'platform.log');
    await until('the platform log to be opened', () => existsSync(log) || child.exitCode !== null, 60_000, 5);
    impostor = await listenImpostor(port);

    const { code, stdout, stderr } = await result;
    expect(stdout).not.toContain('Berth is up');
    expect(code).toBe(1);
    expect(stderr).toContain(`port ${port} (BERTH_PORT) is taken by another process`);
    // Nothing of the platform is left running.
    expect(existsSync(join(stateDir, 'platform.json'))).toBe(false);
    const status = await run(['status']);
    expect(status.code).toBe(1);
  }, 120_000);

  it('status does not take another program on the recorded port for the platform', async () => {
    stateDir = join(temp, 'gone');
    await mkdir(stateDir, { recursive: true });
    const state = new StateDir(stateDir);
    const port = await freePort();
    impostor = await listenImpostor(port);
    // What an earlier `berth up` recorded, with a process id that is alive again (reused).
    await state.writePlatform({
      pid: process.pid,
      port,
      url: `http://127.0.0.1:${port}`,
      instance_id: 'a-start-that-is-gone',
      started_at: new Date().toISOString(),
    });
    try {
      const status = await run(['status']);
      expect(status.code).toBe(1);
      expect(status.stdout).toContain(`Berth is not running: another program answers at http://127.0.0.1:${port}`);
    } finally {
      // `down` after each test must not take this test's own process for the platform.
      await state.clearPlatform();
    }
  });

  it('runs sandboxes on a private Podman engine that keeps their files across down/up', async () => {
    stateDir = join(temp, 'sbx');
    try {
      const first = await run(['up'], { BERTH_PORT: '0', BERTH_SANDBOXES: 'on' });
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(
        new RegExp(
          `  sandboxes  on: private Podman engine \\(${join(stateDir, 'podman')}\\), storage quotas (enforced \\(btrfs\\)|NOT enforced .*), default image ${DEFAULT_SANDBOX_IMAGE}\n`,
        ),
      );
      const { gateway_url: url, api_key: key } = await credentials();
      // A template of the default image, as docs/guides/sandboxes.md makes it with curl.
      const template = await fetch(`${url}/api/v2/sandboxes/templates`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'busybox', image: DEFAULT_SANDBOX_IMAGE, resources: { cpu: '500m', memory: '256Mi', storage: '1Gi' } }),
      });
      expect(template.status).toBe(201);
      const status = async () =>
        ((await (await fetch(`${url}/api/v2/sandboxes/templates/busybox`, { headers: { 'x-api-key': key } })).json()) as { status: string }).status;
      expect(await until('template ready', async () => ((await status()) === 'building' ? undefined : status()), 30_000)).toBe('ready');

      const client = new SandboxClient({ apiEndpoint: `${url}/api/v2/sandboxes`, apiKey: key });
      const snapshot = await client.createSnapshot('busybox', DEFAULT_SANDBOX_IMAGE, 1 << 30, { timeout: 60 });
      const sandbox = await client.createSandbox(snapshot.id, { name: 'kept', timeout: 60 });
      expect((await sandbox.run('echo hello')).stdout).toBe('hello\n');
      await sandbox.write('/root/note', 'still here');

      expect((await run(['down'])).code).toBe(0);
      // The engine stopped with the platform: nothing mounted, no service left.
      expect(await isMountPoint(join(stateDir, 'podman', 'storage'))).toBe(false);
      expect(await privateEngine(stateDir).leftBehind()).toBe(false);

      expect((await run(['up'], { BERTH_SANDBOXES: 'on' })).code).toBe(0);
      const again = await client.getSandbox('kept');
      expect(new TextDecoder().decode(await again.read('/root/note'))).toBe('still here');
      await client.deleteSandbox('kept');
    } finally {
      await run(['down']);
      // Its folder on /run too.
      await privateEngine(stateDir).destroy();
    }
  }, 180_000);

  it('shows the end of the platform log when the platform dies during start', async () => {
    stateDir = join(temp, 'dies');
    // An address of no interface here: the gateway cannot listen.
    const { code, stdout, stderr } = await run(['up'], { BERTH_PORT: '0', BERTH_HOST: '192.0.2.1' });
    expect(code).toBe(1);
    expect(stdout).not.toContain('Berth is up');
    expect(stderr).toContain('the platform failed to start: listen EADDRNOTAVAIL');
    expect(stderr).toContain(`the end of ${join(stateDir, 'logs', 'platform.log')}:`);
  }, 120_000);
});
