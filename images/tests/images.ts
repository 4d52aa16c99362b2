/**
 * The image tests' engine and images, shared by every file in images/tests: images/build.sh (what
 * `make images` runs) builds images/Containerfile unchanged with Podman against a stand-in for the
 * Node base (this machine cannot pull it).
 *
 * The engine's storage is kept in node_modules/.cache/berth-images between runs, so the stand-in
 * base and unchanged layers (the npm installs) are built once. Within one jest run the images are
 * built once: the first file builds them and leaves a mark in the run's own temporary folder; the
 * files take turns on the engine (a lock folder), since each file's engine removes its containers
 * and volumes when it stops.
 */
import { afterAll, beforeAll } from '@jest/globals';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { PodmanService, ensureNodeBaseImage, podmanUnavailableReason, run } from '@berth/local-stack';
import { testEnv } from '@berth/testing';

export const root = fileURLToPath(new URL('../..', import.meta.url));
const cacheDir = join(root, 'node_modules/.cache/berth-images');
const lockDir = join(cacheDir, 'lock');
const repository = 'localhost/berth-test';
const tag = 'test';
export const platformImage = `${repository}/platform:${tag}`;
export const agentServerImage = `${repository}/agent-server:${tag}`;
export const BERTH_UID = '10001';

/** Takes the engine for this file; a lock left by a process that is gone is taken over. */
async function lock(): Promise<void> {
  await mkdir(cacheDir, { recursive: true });
  for (;;) {
    try {
      await mkdir(lockDir);
      await writeFile(join(lockDir, 'pid'), String(process.pid));
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number(await readFile(join(lockDir, 'pid'), 'utf8').catch(() => '0'));
      if (holder && !existsSync(`/proc/${holder}`)) await rm(lockDir, { recursive: true, force: true });
      else await sleep(1_000);
    }
  }
}

/**
 * The engine with both images built, for the calling test file (registers its beforeAll/afterAll).
 * The returned object's `podman` is usable from the file's own beforeAll on.
 */
export function useImages(): { podman: PodmanService } {
  const unavailable = podmanUnavailableReason();
  if (unavailable) throw new Error(`the image tests need the private Podman engine: ${unavailable}`);
  // The runroot under tmpdir() stays short (podman allows 50 characters).
  const podman = new PodmanService({ directory: join(cacheDir, 'engine'), volatileDirectory: join(tmpdir(), 'berth-images-engine') });
  const builtMark = join(testEnv('tmpDir'), 'berth-images-built');
  let locked = false;

  beforeAll(async () => {
    await lock();
    locked = true;
    await podman.start();
    if (existsSync(builtMark)) return;
    const base = await ensureNodeBaseImage(podman, join(cacheDir, 'base-work'));
    console.log(`stand-in base image: ${base}`);
    const started = Date.now();
    await run(join(root, 'images/build.sh'), [], {
      env: {
        ...podman.env,
        CONTAINER_ENGINE: ['podman', ...podman.cliArgs].join(' '),
        // Debian's podman builds without a container runtime of its own only with chroot isolation.
        BUILD_ARGS: '--isolation=chroot',
        IMAGE_REPOSITORY: repository,
        IMAGE_TAG: tag,
      },
      timeoutMs: 30 * 60_000,
    });
    const sizes = await podman.podman(['images', '--format', '{{.Repository}}:{{.Tag}} {{.Size}}', '--filter', `reference=${repository}/*`]);
    console.log(`images built in ${Math.round((Date.now() - started) / 1000)} s:\n${sizes.stdout.trim()}`);
    await writeFile(builtMark, '');
  }, 60 * 60_000);

  afterAll(async () => {
    try {
      await podman.stop();
    } finally {
      if (locked) await rm(lockDir, { recursive: true, force: true });
    }
  }, 120_000);

  return { podman };
}
