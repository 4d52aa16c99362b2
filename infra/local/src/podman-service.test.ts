/**
 * A persistent private Podman engine (the embedded platform's) keeps its images, stopped
 * containers and their files across a stop and a start, and takes over cleanly from a predecessor
 * that crashed (its service still running, its btrfs storage still mounted). A real engine under a
 * short temporary folder (Podman's runroot may be at most 50 characters).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { buildBusyboxImages } from './busybox-image.js';
import { PodmanService, isMountPoint, type PodmanServiceOptions } from './podman-service.js';
import { run } from './run.js';

let dir: string;
let options: PodmanServiceOptions;
const IMAGE = 'localhost/berth-test/persistent:1';

beforeAll(async () => {
  dir = await mkdtemp('/tmp/bps-');
  const btrfs = await run('mkfs.btrfs', ['--version']).then(
    () => true,
    () => false,
  );
  options = {
    directory: join(dir, 'engine'),
    volatileDirectory: join(dir, 'v'),
    storage: btrfs ? 'btrfs-loop' : 'overlay',
    persistent: true,
    btrfsSizeBytes: 1024 ** 3,
  };
});
afterAll(async () => {
  await new PodmanService(options).destroy();
  await rm(dir, { recursive: true, force: true });
});

const storage = () => join(dir, 'engine', 'storage');

describe('a persistent engine', () => {
  it('keeps images, stopped containers and their files across stop and start', async () => {
    const first = new PodmanService(options);
    await first.start();
    await buildBusyboxImages(first, join(dir, 'build'), [{ reference: IMAGE }]);
    await first.podman(['run', '--detach', '--name', 'kept', IMAGE, 'sh', '-c', 'echo survived > /root/file; trap "exit 0" TERM; sleep 600 & wait']);
    await first.stop();
    if (options.storage === 'btrfs-loop') expect(await isMountPoint(storage())).toBe(false);
    expect(existsSync(join(dir, 'build'))).toBe(false);

    const second = new PodmanService(options);
    await second.start();
    try {
      // The container was stopped, not removed; its file is still there when it starts again.
      expect((await second.podman(['inspect', '--format', '{{.State.Status}}', 'kept'])).stdout.trim()).toBe('exited');
      await second.podman(['start', 'kept']);
      expect((await second.podman(['exec', 'kept', 'cat', '/root/file'])).stdout).toBe('survived\n');
    } finally {
      await second.stop();
    }
  }, 120_000);

  it('takes over from a crashed predecessor: stops its service and reuses its mount', async () => {
    const crashed = new PodmanService(options);
    await crashed.start();
    await crashed.podman(['start', 'kept']);
    const mountsBefore = await mountsUnder(storage());
    // The platform died without stopping its engine: a new one starts on the same folders.
    const next = new PodmanService(options);
    expect(await next.leftBehind()).toBe(true);
    await next.start();
    try {
      expect(await mountsUnder(storage())).toBe(mountsBefore);
      expect((await next.podman(['exec', 'kept', 'cat', '/root/file'])).stdout).toBe('survived\n');
      const services = (await run('ps', ['-eo', 'args'])).stdout.split('\n').filter((line) => line.includes(`unix://${next.socketPath}`));
      expect(services).toHaveLength(1);
    } finally {
      await next.stop();
    }
    expect(await next.leftBehind()).toBe(false);
    if (options.storage === 'btrfs-loop') expect(await mountsUnder(storage())).toBe(0);
    else expect((await next.podman(['inspect', '--format', '{{.State.Status}}', 'kept'])).stdout.trim()).toBe('exited');
  }, 120_000);

  it('undoes the storage mount of a start that failed before the engine made its storage, however often it is retried', async () => {
    if (options.storage !== 'btrfs-loop') return;
    // A new engine whose service cannot run: it fails after its storage was mounted, before Podman wrote to it.
    const failing = { ...options, directory: join(dir, 'failing'), volatileDirectory: join(dir, 'vf'), binary: '/bin/false' };
    for (let attempt = 0; attempt < 3; attempt++) {
      const engine = new PodmanService(failing);
      await expect(engine.start()).rejects.toThrow('podman system service exited');
      await engine.stop();
      expect(await mountsUnder(join(dir, 'failing', 'storage'))).toBe(0);
    }
  }, 60_000);
});

/** How many mounts there are at or below `path`. */
async function mountsUnder(path: string): Promise<number> {
  const { stdout } = await run('findmnt', ['--list', '--noheadings', '--output', 'TARGET']);
  return stdout.split('\n').filter((target) => target === path || target.startsWith(`${path}/`)).length;
}
