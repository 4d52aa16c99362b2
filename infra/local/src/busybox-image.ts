/**
 * Busybox images made on this machine, without any registry: Debian's static /bin/busybox and a
 * link per applet (`sh` included) in an otherwise empty root file system, imported into a Podman
 * engine's storage. The embedded platform's default sandbox image and the tests' images are these.
 * `/bin/bash` is absent: commands that ask for bash fall back to /bin/sh.
 */
import { existsSync } from 'node:fs';
import { chmod, chown, copyFile, mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { PodmanService } from './podman-service.js';
import { run } from './run.js';

const BUSYBOX = '/bin/busybox';
/** Uid/gid of the images' unprivileged `user` (home /home/user). */
export const BUSYBOX_USER_UID = 1000;

export interface BusyboxImage {
  /** Local reference to tag it as, e.g. `localhost/berth/busybox:1`. */
  reference: string;
  /** Run as `user` (USER 1000:1000, WORKDIR /home/user) rather than root. */
  asUser?: boolean;
}

/**
 * Imports each image from one root file system built in `workDir` (removed afterwards).
 * `podman import` of a tar is 4× faster than `podman build` (0.3 s against 1.1 s) and needs no
 * build isolation.
 */
export async function buildBusyboxImages(podman: PodmanService, workDir: string, images: BusyboxImage[]): Promise<void> {
  if (!existsSync(BUSYBOX)) throw new Error(`${BUSYBOX} is missing: run scripts/ensure-podman.sh as root (it installs busybox-static)`);
  const rootfs = join(workDir, 'rootfs');
  await rm(workDir, { recursive: true, force: true });
  await mkdir(join(rootfs, 'bin'), { recursive: true });
  try {
    await copyFile(BUSYBOX, join(rootfs, 'bin/busybox'));
    await chmod(join(rootfs, 'bin/busybox'), 0o755);
    const { stdout } = await run(BUSYBOX, ['--list-full']);
    for (const applet of stdout.split('\n').filter(Boolean)) {
      const link = join(rootfs, applet);
      await mkdir(dirname(link), { recursive: true });
      if (!existsSync(link)) await symlink('/bin/busybox', link);
    }
    for (const folder of ['tmp', 'root', 'home/user', 'etc']) await mkdir(join(rootfs, folder), { recursive: true });
    await chmod(join(rootfs, 'tmp'), 0o1777);
    await chown(join(rootfs, 'home/user'), BUSYBOX_USER_UID, BUSYBOX_USER_UID);
    const uid = BUSYBOX_USER_UID;
    await writeFile(join(rootfs, 'etc/passwd'), `root:x:0:0:root:/root:/bin/sh\nuser:x:${uid}:${uid}:user:/home/user:/bin/sh\n`);
    await writeFile(join(rootfs, 'etc/group'), `root:x:0:\nuser:x:${uid}:\n`);
    const tar = join(workDir, 'rootfs.tar');
    await run('tar', ['-C', rootfs, '-cf', tar, '.']);
    for (const image of images) {
      const user = image.asUser ? ['--change', `USER ${uid}:${uid}`, '--change', 'WORKDIR /home/user'] : [];
      await podman.podman(['import', '--quiet', '--change', 'CMD ["/bin/sh"]', ...user, tar, image.reference]);
    }
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}
