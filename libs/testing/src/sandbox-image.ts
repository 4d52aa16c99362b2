/**
 * The sandbox test images: busybox images (see buildBusyboxImages) imported into the private
 * Podman engine and pushed to the test registries, so that tests pull them like any template image.
 *
 * Built by global setup; tests read the references with {@link testSandbox}.
 */
import { BUSYBOX_USER_UID, buildBusyboxImages, type PodmanService } from '@berth/local-stack';
import { testEnv } from './env.js';

/** Uid/gid of the non-root image's USER. */
export const SANDBOX_TEST_UID = BUSYBOX_USER_UID;

export interface SandboxImages {
  /** Runs as root. */
  root: string;
  /** USER 1000:1000, WORKDIR /home/user. */
  user: string;
}

/** Builds both images in the engine's storage, tagged `localhost/berth-test/…:1`. */
export async function buildSandboxImages(podman: PodmanService, dir: string): Promise<SandboxImages> {
  const images: SandboxImages = { root: 'localhost/berth-test/busybox:1', user: 'localhost/berth-test/busybox-user:1' };
  await buildBusyboxImages(podman, dir, [{ reference: images.root }, { reference: images.user, asUser: true }]);
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
  /** The podman CLI against the engine (its flags and configuration), as the control plane runs it. */
  podman: { args: string[]; env: Record<string, string> };
}

export function testSandbox(): TestSandbox {
  return JSON.parse(testEnv('sandbox')) as TestSandbox;
}
