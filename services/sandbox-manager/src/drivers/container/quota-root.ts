/**
 * A sandbox root file system the size of its storage limit, so that `df /` inside shows the limit
 * (btrfs qgroups, which enforce `StorageOpt.size`, are invisible to statfs: df showed the whole
 * engine storage). Each limited instance gets a sparse ext4 image of its limit (at its first start,
 * in `berth-sandbox-roots/` next to the engine's graph root); while it runs, an
 * overlay is mounted over its container's root (lower: the container's own root, as the engine
 * made it; upper and work: on the ext4), and overlayfs reports the statfs of its upper layer.
 * Writes past the limit fail with ENOSPC.
 *
 * No mount of ours is left anywhere but on the container's root path inside the engine's storage:
 * the ext4 is mounted at a scratch folder only while the overlay is made, then unmounted (the
 * overlay keeps its own reference). Its loop device is set up with autoclear (`mount -o loop`),
 * so it goes when the overlay is unmounted — at stop, at removal (by the engine too), or when the
 * engine's storage is unmounted. Start mounts it again (after a reboot, or a manager restart
 * that found it stopped).
 *
 * Only on a rootful Podman with btrfs storage, run by root: there the container's root is a plain
 * folder (a btrfs subvolume) that the engine never mounts or unmounts itself, so an overlay over
 * it stays until we remove it. Elsewhere the driver keeps `StorageOpt.size`.
 */
import { execFile } from 'node:child_process';
import { chmod, chown, mkdir, readFile, rename, rm, rmdir, stat, truncate, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type Dockerode from 'dockerode';
import { InstanceError } from '../driver.js';

const exec = promisify(execFile);

/** Folder next to the engine's graph root where the instances' ext4 images live (on its storage). */
const IMAGES_FOLDER = 'berth-sandbox-roots';

/** The engine's storage as libpod reports it (`GET /libpod/info`). */
export interface EngineStore {
  graphRoot: string;
  graphDriverName: string;
}

/** Why limited sandboxes cannot have a root of their limit's size here, or undefined when they can. */
export async function quotaRootUnavailableReason(engine: { podman: boolean; rootless: boolean }, store: EngineStore | undefined): Promise<string | undefined> {
  if (!engine.podman || engine.rootless || !store) return 'the engine is not a rootful Podman';
  if (process.getuid?.() !== 0) return 'this process is not root (it mounts the roots)';
  if (store.graphDriverName !== 'btrfs') return `the engine's storage driver is ${store.graphDriverName}, not btrfs`;
  // Overlay options are comma-separated, its lower layers colon-separated.
  if (/[,:\s\\]/.test(store.graphRoot)) return `the engine's storage path ${store.graphRoot} has characters overlay options cannot carry`;
  if (!(await exists('/dev/loop-control'))) return 'no loop devices here (/dev/loop-control is missing)';
  return exec('mkfs.ext4', ['-V']).then(
    () => undefined,
    () => 'mkfs.ext4 is missing (e2fsprogs)',
  );
}

/** The storage of a Podman engine (libpod's `/info`). */
export async function engineStore(docker: Dockerode): Promise<EngineStore | undefined> {
  return (await libpod<{ store?: EngineStore }>(docker, 'GET', '/info')).store;
}

export class QuotaRoots {
  /** One operation at a time per instance: a start and a stop racing must not both mount. */
  private readonly busy = new Map<string, Promise<unknown>>();
  private readonly folder: string;

  constructor(
    private readonly docker: Dockerode,
    store: EngineStore,
  ) {
    this.folder = join(dirname(store.graphRoot), IMAGES_FOLDER);
  }

  /**
   * Mounts the instance's root over its container's, unless it is mounted already. Its image is
   * made (empty, sparse, of `sizeBytes`) when it has none: at its first start — so an instance is
   * never left without one, whenever a create is cut short — or the first start of an instance
   * made before roots of their limit's size. Without either, nothing: the instance has no limit.
   */
  mount(instance: string, sizeBytes: number | undefined): Promise<void> {
    return this.serial(instance, async () => {
      if (await this.mountPoint(instance)) return;
      const image = this.image(instance);
      const made = await exists(image);
      if (!made && !sizeBytes) return;
      const [root] = await Promise.all([this.containerRoot(instance), made ? undefined : this.makeImage(image, sizeBytes!)]);
      const scratch = this.scratch(instance);
      await mkdir(scratch, { recursive: true, mode: 0o700 });
      // The image must never be mounted twice at a time (two loop devices writing one ext4 corrupt it).
      await this.unmountScratch(instance);
      // nodev, nosuid: nothing on the image is taken as a device or a set-uid program by the host.
      await run('mount', ['-o', 'loop,nodev,nosuid', image, scratch]);
      try {
        const upper = join(scratch, 'upper');
        if (!(await exists(upper))) {
          // The overlay's root directory is the upper one: it must look like the image's.
          const lower = await stat(root);
          await mkdir(upper);
          await chown(upper, lower.uid, lower.gid);
          await chmod(upper, lower.mode & 0o7777);
        }
        await mkdir(join(scratch, 'work'), { recursive: true });
        await run('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${root},upperdir=${upper},workdir=${join(scratch, 'work')}`, root]);
      } finally {
        await run('umount', [scratch]);
        await rmdir(scratch);
      }
    });
  }

  /** Unmounts the instance's root (its loop device goes with it); nothing when it is not mounted. */
  unmount(instance: string): Promise<void> {
    return this.serial(instance, async () => {
      const mountPoint = await this.mountPoint(instance);
      if (mountPoint) await run('umount', [mountPoint]);
      await this.unmountScratch(instance);
    });
  }

  /** Unmounts the image from the scratch folder, where a manager that stopped while it made the overlay left it. */
  private async unmountScratch(instance: string): Promise<void> {
    const scratch = this.scratch(instance);
    if ((await mounts()).some((mount) => mount.mountPoint === scratch)) await run('umount', [scratch]);
  }

  /** Unmounts and deletes the instance's root image (its container is gone). */
  async remove(instance: string): Promise<void> {
    await this.unmount(instance);
    await rm(this.image(instance), { force: true });
    await rm(`${this.image(instance)}.new`, { force: true });
  }

  /** Where the engine has the container's root (its btrfs subvolume). */
  private async containerRoot(instance: string): Promise<string> {
    // Podman answers the path as plain text.
    const root = String(await libpod<Buffer | string>(this.docker, 'POST', `/containers/${instance}/mount`)).trim();
    if (!root.startsWith('/') || /[,:\s\\]/.test(root)) {
      throw new InstanceError(`cannot mount the root of sandbox ${instance}: the engine gave ${JSON.stringify(root)} as its root`);
    }
    return root;
  }

  private async makeImage(image: string, sizeBytes: number): Promise<void> {
    await mkdir(this.folder, { recursive: true, mode: 0o700 });
    const draft = `${image}.new`;
    await writeFile(draft, '', { mode: 0o600 });
    await truncate(draft, sizeBytes);
    // 4 KiB blocks and an inode per 8 KiB whatever the size: about 130,000 files per GiB, enough
    // for a node_modules of small files (ext4 cannot add inodes later; 3% of the space), where
    // mke2fs would pick 1 KiB blocks and an inode per 4 KiB for small images (6%); no journal
    // (the image goes with the sandbox) and no reserved blocks: df shows nearly the whole limit.
    await run('mkfs.ext4', ['-q', '-F', '-b', '4096', '-i', '8192', '-m', '0', '-O', '^has_journal,^resize_inode', draft]);
    // Complete or absent: a crash while it was made leaves a draft that the next start replaces.
    await rename(draft, image);
  }

  private image(instance: string): string {
    return join(this.folder, `${instance}.ext4`);
  }

  private scratch(instance: string): string {
    return join(this.folder, `${instance}.mnt`);
  }

  /** Where this instance's overlay is mounted: the overlay whose upper layer was on its scratch folder. */
  private async mountPoint(instance: string): Promise<string | undefined> {
    const upper = `upperdir=${join(this.scratch(instance), 'upper')}`;
    return (await mounts()).find((mount) => mount.type === 'overlay' && mount.options.includes(upper))?.mountPoint;
  }

  private serial<T>(instance: string, operation: () => Promise<T>): Promise<T> {
    const previous = this.busy.get(instance) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(operation);
    this.busy.set(instance, next);
    const forget = () => {
      if (this.busy.get(instance) === next) this.busy.delete(instance);
    };
    next.then(forget, forget);
    return next;
  }
}

async function run(command: string, args: string[]): Promise<void> {
  try {
    await exec(command, args);
  } catch (error) {
    const stderr = String((error as { stderr?: unknown }).stderr ?? '').trim();
    throw new InstanceError(`${command} ${args.join(' ')} failed: ${stderr || (error as Error).message}`, { cause: error });
  }
}

/** Calls Podman's own API (it serves it under a version prefix only; v4.0.0 is its oldest). */
function libpod<T>(docker: Dockerode, method: 'GET' | 'POST', path: string): Promise<T> {
  return new Promise((resolve, reject) =>
    docker.modem.dial({ path: `/v4.0.0/libpod${path}`, method, statusCodes: { 200: true, 404: 'no such container', 500: 'server error' } }, (error, result) =>
      error ? reject(error) : resolve(result as T),
    ),
  );
}

/** The mounts this process sees (/proc/self/mountinfo): where, what type, its file system's options. */
async function mounts(): Promise<{ mountPoint: string; type: string; options: string[] }[]> {
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
  return mountinfo
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [mount, fs] = line.split(' - ');
      const [type, , options] = (fs ?? '').split(' ');
      // Spaces, tabs, newlines and backslashes in a mount point are octal escapes.
      const mountPoint = (mount!.split(' ')[4] ?? '').replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
      return { mountPoint, type: type ?? '', options: (options ?? '').split(',') };
    });
}

function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
