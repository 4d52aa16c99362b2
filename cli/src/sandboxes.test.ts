/**
 * Sandboxes on the embedded platform: with an engine, a template made over HTTP and the
 * `langsmith` SandboxClient run commands end to end through the gateway; without one, the platform
 * starts all the same and sandbox calls answer 503 saying why and how to turn them on. Real
 * Postgres, real gRPC, the test Podman engine.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { testSandbox, until } from '@berth/testing';
import { SandboxClient } from 'langsmith/sandbox';
import { startTestPlatform, type TestPlatform } from './__tests__/test-platform.js';

const engine = testSandbox();

async function call(test: TestPlatform, path: string, init: { method?: string; json?: unknown } = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(`${test.platform.url}/api/v2/sandboxes${path}`, {
    method: init.method ?? (init.json === undefined ? 'GET' : 'POST'),
    headers: { 'x-api-key': test.adminKey, ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

describe('with a container engine', () => {
  let test: TestPlatform;
  beforeAll(async () => {
    test = await startTestPlatform('sandboxes-on', {
      sandboxes: {
        engine: { socketPath: engine.socketPath, storageQuota: engine.storageQuota ? 'enforce' : 'ignore', defaultImage: engine.image },
      },
      // Read by the sandbox-manager's own loader, as `berth up` passes its environment on.
      serviceEnv: {
        SANDBOX_INSECURE_REGISTRIES: engine.registry,
        SANDBOX_DEFAULT_MEMORY: '128Mi',
        SANDBOX_DEFAULT_CPU: '500m',
        SANDBOX_TENANT_MAX_SANDBOXES: '5',
      },
    });
  }, 120_000);
  afterAll(async () => {
    await test?.close();
  });

  it('reports the engine it runs sandboxes on', () => {
    expect(test.platform.sandboxes).toBe(`on: the engine at ${engine.socketPath}, storage quotas ${engine.storageQuota ? 'enforced' : 'not enforced'}`);
  });

  it('makes a template over HTTP and runs a command in a sandbox of it', async () => {
    const created = await call(test, '/templates', { json: { name: 'busybox', image: engine.image, resources: { cpu: '500m', memory: '256Mi' } } });
    expect(created.status).toBe(201);
    await until('template ready', async () => ((await call(test, '/templates/busybox')).body.status === 'ready' ? true : undefined), 30_000);
    const box = await call(test, '/boxes', { json: { name: 'from-template', template_name: 'busybox' } });
    expect(box.body).toMatchObject({ status: 'ready', template_name: 'busybox' });
    const ran = await fetch(`${box.body.dataplane_url}/execute`, {
      method: 'POST',
      headers: { 'x-api-key': test.adminKey, 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'echo from the template' }),
    });
    expect(await ran.json()).toEqual({ stdout: 'from the template\n', stderr: '', exit_code: 0 });
    expect((await call(test, '/boxes/from-template', { method: 'DELETE' })).status).toBe(204);
  }, 60_000);

  it('serves the langsmith SandboxClient: snapshot, sandbox, run, write, read', async () => {
    const client = new SandboxClient({ apiEndpoint: `${test.platform.url}/api/v2/sandboxes`, apiKey: test.adminKey });
    const snapshot = await client.createSnapshot('busybox', engine.image, 1 << 30, { timeout: 60 });
    const sandbox = await client.createSandbox(snapshot.id, { name: 'client', timeout: 60 });
    try {
      expect(await sandbox.run('echo hello')).toEqual({ stdout: 'hello\n', stderr: '', exit_code: 0 });
      await sandbox.write('/tmp/note.txt', 'through Berth');
      expect(new TextDecoder().decode(await sandbox.read('/tmp/note.txt'))).toBe('through Berth');
    } finally {
      await client.deleteSandbox('client');
    }
  }, 90_000);

  it('creates a sandbox of the default image when given no template, with the operator’s default limits', async () => {
    const box = await call(test, '/boxes', { json: { name: 'plain' } });
    expect(box.body).toMatchObject({ status: 'ready', mem_bytes: 128 * 1024 ** 2, vcpus: 0.5 });
    expect((await call(test, '/boxes/plain', { method: 'DELETE' })).status).toBe(204);
  }, 60_000);
});

describe('without an engine', () => {
  it('starts, and sandbox calls answer 503 saying why and how to turn them on', async () => {
    // A state folder too deep for the sandboxes' socket paths: the engine cannot be used there.
    const test = await startTestPlatform('sandboxes-off', { sandboxes: { engine: 'private' }, stateDirName: 'deep/'.repeat(16) + 'state' });
    try {
      expect(test.platform.sandboxes).toMatch(
        /^OFF: the state folder's path is too long for the sandboxes' sockets .* use a BERTH_STATE_DIR of at most \d+ bytes$/,
      );
      for (const [path, json] of [
        ['/boxes', { name: 'x' }],
        ['/templates', { name: 'x', image: engine.image }],
      ] as const) {
        const { status, body } = await call(test, path, { json });
        expect(status).toBe(503);
        expect(body.detail).toBe(`sandboxes are off: ${test.platform.sandboxes.slice('OFF: '.length)}`);
      }
      // The rest of the platform is unaffected.
      expect((await fetch(`${test.platform.url}/v1/me`, { headers: { 'x-api-key': test.adminKey } })).status).toBe(200);
      expect((await fetch(`${test.platform.url}/readyz`)).status).toBe(200);
    } finally {
      await test.close();
    }
  }, 120_000);

  it('says how to turn them on when they were turned off', async () => {
    const test = await startTestPlatform('sandboxes-turned-off', { sandboxes: { engine: 'off' } });
    try {
      const { status, body } = await call(test, '/boxes', { json: { name: 'x' } });
      expect(status).toBe(503);
      expect(body.detail).toBe('sandboxes are off: turned off with BERTH_SANDBOXES=off: start Berth without it to run them');
    } finally {
      await test.close();
    }
  }, 120_000);
});
