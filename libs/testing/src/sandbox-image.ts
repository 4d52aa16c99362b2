/**
 * The sandbox test images: a busybox root file system (Debian's static /bin/busybox and a link per
 * applet, `sh` included) imported into the private Podman engine and pushed to the test registries,
 * so that tests pull them like any template image. `/bin/bash` is deliberately absent: commands
 * that ask for bash exercise the fallback to /bin/sh.
 *
 * Built by global setup; tests read the references with {@link testSandbox}.
 */
import { existsSync } from 'node:fs';
import { chmod, chown, copyFile, mkdir, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { run, type PodmanService } from '@berth/local-stack';
import { testEnv } from './env.js';

const BUSYBOX = '/bin/busybox';
/** Uid/gid of the non-root image's USER. */
export const SANDBOX_TEST_UID = 1000;

export interface SandboxImages {
  /** Runs as root. */
  root: string;
  /** USER 1000:1000, WORKDIR /home/user. */
  user: string;
}

/**
 * Builds both images in the engine's storage from one root file system (`<dir>/rootfs`), tagged
 * `localhost/berth-test/…:1`. `podman import` of a tar is 4× faster than `podman build` here
 * (0.3 s against 1.1 s per image) and needs no build isolation.
 */
export async function buildSandboxImages(podman: PodmanService, dir: string): Promise<SandboxImages> {
  if (!existsSync(BUSYBOX)) throw new Error(`${BUSYBOX} is missing: run scripts/ensure-podman.sh (installs busybox-static)`);
  const rootfs = join(dir, 'rootfs');
  await mkdir(join(rootfs, 'bin'), { recursive: true });
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
  await chown(join(rootfs, 'home/user'), SANDBOX_TEST_UID, SANDBOX_TEST_UID);
  await writeFile(join(rootfs, 'etc/passwd'), `root:x:0:0:root:/root:/bin/sh\nuser:x:${SANDBOX_TEST_UID}:${SANDBOX_TEST_UID}:user:/home/user:/bin/sh\n`);
  await writeFile(join(rootfs, 'etc/group'), `root:x:0:\nuser:x:${SANDBOX_TEST_UID}:\n`);
  const tar = join(dir, 'rootfs.tar');
  await run('tar', ['-C', rootfs, '-cf', tar, '.']);
  const images: SandboxImages = { root: 'localhost/berth-test/busybox:1', user: 'localhost/berth-test/busybox-user:1' };
  await podman.podman(['import', '--quiet', '--change', 'CMD ["/bin/sh"]', tar, images.root]);
  await podman.podman([
    'import', '--quiet', '--change', 'CMD ["/bin/sh"]', '--change', `USER ${SANDBOX_TEST_UID}:${SANDBOX_TEST_UID}`,
    '--change', 'WORKDIR /home/user', tar, images.user,
  ]);
  return images;
}

/** Pushes a local image to a plain-HTTP registry as `<registry>/<name>`. */
export async function pushImage(
  podman: PodmanService,
  local: string,
  registry: string,
  name: string,
  credentials?: { username: string; password: string },
): Promise<string> {
  const target = `${registry}/${name}`;
  const creds = credentials ? ['--creds', `${credentials.username}:${credentials.password}`] : [];
  await podman.podman(['push', '--quiet', '--tls-verify=false', ...creds, local, target]);
  return target;
}

/** What the global setup provides for sandbox tests. */
export interface TestSandbox {
  /** The Docker Engine API socket of the private Podman engine. */
  socketPath: string;
  /** `127.0.0.1:PORT` of the open test registry (plain HTTP). */
  registry: string;
  /** Busybox image running as root, in the open registry. */
  image: string;
  /** Busybox image with USER 1000:1000, in the open registry. */
  userImage: string;
  /** A registry that needs basic auth, holding `image` as `<host>/berth-test/busybox:1`. */
  privateRegistry: { host: string; image: string; username: string; password: string };
  /** The engine enforces storage quotas (its storage is on btrfs). */
  storageQuota: boolean;
  /** A folder for the tests' own files (agent run folders). */
  tmpDir: string;
}

export function testSandbox(): TestSandbox {
  return JSON.parse(testEnv('sandbox')) as TestSandbox;
}
