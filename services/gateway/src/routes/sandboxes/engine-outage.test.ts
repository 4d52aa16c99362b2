/**
 * The sandbox engine (Podman's API service) dies under a running platform and comes back: meanwhile
 * `/readyz` shows sandboxes failing (200: the rest of the platform serves on), every sandbox call
 * that needs the engine answers 503 with Retry-After and a plain message, a delete is accepted and
 * its container goes once the engine is back; sandboxes that were running keep running and work
 * again without a restart of anything. The engine is a private one of this test, so that stopping
 * it disturbs no other test.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import { PodmanService } from '@berth/local-stack';
import { SandboxPlatform, images, type Json } from './__tests__/sandbox-platform.js';

let engine: PodmanService;
let platform: SandboxPlatform;
let keep: Json;
let doomed: Json;
/** The engine's API service is killed (and not yet started again). */
let down = false;

/** Text that would tell a tenant how the platform is built. */
const INTERNAL = /\/run|\/tmp|\.sock|ECONN|ENOENT|podman|docker|127\.0\.0\.1/i;

async function readyz(): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${platform.gateway.url}/readyz`);
  return { status: res.status, body: (await res.json()) as Json };
}

/** The sandboxes (ids) whose containers the private engine has, asked of its storage (works while its API service is down). */
async function containers(): Promise<string[]> {
  const { stdout } = await engine.podman(['ps', '--all', '--format', '{{index .Labels "berth.dev/sandbox-id"}}']);
  return stdout.split('\n').filter(Boolean).sort();
}

beforeAll(async () => {
  engine = new PodmanService({ directory: await mkdtemp(join(tmpdir(), 'bpe-')) });
  await engine.start();
  platform = await SandboxPlatform.start({ db: 'gw_sbx_outage', engine: { socketPath: engine.socketPath, storageQuota: engine.enforcesStorageQuota } });
  await platform.template('tpl');
  keep = (await platform.call('/boxes', { json: { name: 'keep', template_name: 'tpl', timeout: 60 } })).body;
  doomed = (await platform.call('/boxes', { json: { name: 'doomed', template_name: 'tpl', timeout: 60 } })).body;
  expect([keep.status, doomed.status]).toEqual(['ready', 'ready']);
}, 120_000);
afterAll(async () => {
  if (down) await engine.start();
  await platform?.close();
  await engine?.destroy();
}, 60_000);

it('reports the engine down, answers 503 meanwhile, and removes what was deleted once it is back', async () => {
  const before = await readyz();
  expect(before).toMatchObject({ status: 200, body: { status: 'ok', checks: { sandboxes: { status: 'ok' } } } });
  expect(await containers()).toEqual([keep.id, doomed.id].sort());

  await engine.kill();
  down = true;
  // The manager checks its engine every few seconds; a test does not wait for that.
  await platform.manager.engine.check();

  const during = await readyz();
  expect(during).toMatchObject({ status: 200, body: { status: 'degraded', checks: { sandboxes: { status: 'failing' }, postgres: { status: 'ok' } } } });

  const answers = {
    create: await platform.call('/boxes', { json: { name: 'new', template_name: 'tpl', timeout: 60 } }),
    stop: await platform.call('/boxes/keep/stop', { json: {} }),
    template: await platform.call('/templates', { json: { name: 'tpl2', image: images.image } }),
    execute: await fetchJson(`${keep.dataplane_url}/execute`, { command: 'echo hi' }),
  };
  for (const [name, answer] of Object.entries(answers)) {
    expect({ name, status: answer.status, retryAfter: answer.retryAfter }).toEqual({ name, status: 503, retryAfter: '5' });
    expect({ name, internal: INTERNAL.exec(JSON.stringify(answer.body))?.[0] }).toEqual({ name, internal: undefined });
  }
  // Reads of what is recorded go on.
  expect((await platform.call('/boxes/keep')).body).toMatchObject({ status: 'ready' });
  // A delete is taken: the sandbox is gone for its tenant at once, its container once the engine is back.
  expect((await platform.call('/boxes/doomed', { method: 'DELETE' })).status).toBe(204);
  expect((await platform.call('/boxes/doomed')).status).toBe(404);
  expect(await containers()).toEqual([keep.id, doomed.id].sort());

  await engine.start();
  down = false;
  await platform.manager.engine.check();

  expect(await readyz()).toMatchObject({ status: 200, body: { status: 'ok', checks: { sandboxes: { status: 'ok' } } } });
  const docker = new Dockerode({ socketPath: engine.socketPath });
  expect((await docker.listContainers({ all: true })).map((c) => c.Labels['berth.dev/sandbox-id'])).toEqual([keep.id]);
  // The sandbox that ran on runs on, and new ones start.
  expect((await fetchJson(`${keep.dataplane_url}/execute`, { command: 'echo still here' })).body).toMatchObject({ stdout: 'still here\n', exit_code: 0 });
  expect((await platform.call('/boxes', { json: { name: 'new', template_name: 'tpl', timeout: 60 } })).body).toMatchObject({ status: 'ready' });
}, 120_000);

async function fetchJson(url: string, json: unknown): Promise<{ status: number; retryAfter: string | null; body: Json }> {
  const res = await fetch(url, { method: 'POST', headers: { 'x-api-key': platform.keyA, 'content-type': 'application/json' }, body: JSON.stringify(json) });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Json };
}
