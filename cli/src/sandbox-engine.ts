/**
 * Sandboxes of the embedded platform: a private Podman engine under the state folder (its images,
 * containers and volumes in `<state>/podman`, the sandboxes' run folders in `<state>/sandboxes`),
 * started with the platform and stopped with it — stopped containers keep their files for the next
 * start. Where no engine can run (not root, Podman missing, the engine fails), the platform starts
 * anyway and sandbox calls answer 503 with the reason and how to fix it.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PodmanService, buildBusyboxImages, podmanUnavailableReason, run } from '@berth/local-stack';
import type { PodmanCommand } from '@berth/control-plane';
import type { Logger } from '@berth/log';
import { LONGEST_SOCKET_SUFFIX, type SandboxSettings } from '@berth/sandbox-manager';

/** The image of sandboxes created without a template or snapshot; built from busybox on first start. */
export const DEFAULT_SANDBOX_IMAGE = 'localhost/berth/busybox:1';

/** An engine that already runs (tests share theirs): the platform neither starts nor stops it. */
export interface ExternalEngine {
  socketPath: string;
  storageQuota: 'enforce' | 'ignore';
  defaultImage?: string;
  /** The podman CLI against it: deployments' agent servers then run in containers there. */
  podman?: PodmanCommand;
}

export interface PlatformSandboxConfig {
  /** `private`: a Podman engine of the platform's own (needs root); `off`: sandbox calls answer 503. */
  engine: 'private' | 'off' | ExternalEngine;
}

export interface SandboxEngine {
  /** What the sandbox-manager gets from the engine (its other settings come from its own environment). */
  settings: SandboxSettings;
  /** One line for people: the engine and its storage quotas, or OFF and why. */
  summary: string;
  /** The podman CLI against the engine, for the deployments' containers; unset without an engine. */
  podman?: PodmanCommand;
  close(): Promise<void>;
}

/** Sandbox btrfs storage (a sparse file: only what is written takes disk space). */
const BTRFS_SIZE_BYTES = 32 * 1024 ** 3;
/** Unix socket paths hold at most 107 bytes. */
const MAX_SOCKET_PATH = 107;
const HOW_TO_ENABLE =
  'to run sandboxes, start Berth as root on a machine with Podman and runc (`make up` as root installs them with apt-get on Debian/Ubuntu)';

export async function startSandboxEngine(config: PlatformSandboxConfig | undefined, stateDir: string, logger: Logger): Promise<SandboxEngine> {
  const shared = { stopSandboxesOnClose: true };
  const off = (why: string): SandboxEngine => {
    const reason = `sandboxes are off: ${why}`;
    logger.warn({ reason }, 'sandboxes are off');
    return { settings: { ...shared, unavailableReason: reason }, summary: `OFF: ${why}`, close: async () => undefined };
  };
  const engine = config?.engine ?? 'off';
  if (engine === 'off') return off('turned off with BERTH_SANDBOXES=off: start Berth without it to run them');
  const runDir = join(stateDir, 'sandboxes');
  const longest = Buffer.byteLength(runDir + LONGEST_SOCKET_SUFFIX);
  if (longest > MAX_SOCKET_PATH) {
    return off(
      `the state folder's path is too long for the sandboxes' sockets (Unix socket paths hold at most ${MAX_SOCKET_PATH} bytes): ` +
        `use a BERTH_STATE_DIR of at most ${Buffer.byteLength(stateDir) - (longest - MAX_SOCKET_PATH)} bytes`,
    );
  }
  await mkdir(runDir, { recursive: true, mode: 0o700 });
  if (engine !== 'private') {
    return {
      settings: { ...shared, driver: { kind: 'container', socketPath: engine.socketPath, runDir, storageQuota: engine.storageQuota }, ...(engine.defaultImage ? { defaultImage: engine.defaultImage } : {}) },
      summary: `on: the engine at ${engine.socketPath}, storage quotas ${engine.storageQuota === 'enforce' ? 'enforced' : 'not enforced'}`,
      ...(engine.podman ? { podman: engine.podman } : {}),
      close: async () => undefined,
    };
  }
  const problem = podmanUnavailableReason();
  if (problem) return off(`${problem}; ${HOW_TO_ENABLE}`);
  let podman: PodmanService;
  let quotaNote = 'storage quotas enforced (btrfs)';
  try {
    ({ podman, quotaNote } = await startPrivateEngine(stateDir, logger));
  } catch (error) {
    logger.error({ err: error }, 'the private Podman engine did not start');
    return off(`the private Podman engine did not start (${(error as Error).message}); see the platform log, fix the cause and restart Berth`);
  }
  let defaultImage: string | undefined = DEFAULT_SANDBOX_IMAGE;
  try {
    await ensureDefaultImage(podman, stateDir);
  } catch (error) {
    // Sandboxes from templates still work: only `POST /boxes` without one needs the default image.
    logger.error({ err: error }, `cannot build the default sandbox image ${DEFAULT_SANDBOX_IMAGE}`);
    defaultImage = undefined;
  }
  const storageQuota = podman.enforcesStorageQuota ? 'enforce' : 'ignore';
  return {
    settings: { ...shared, driver: { kind: 'container', socketPath: podman.socketPath, runDir, storageQuota }, ...(defaultImage ? { defaultImage } : {}) },
    summary: `on: private Podman engine (${join(stateDir, 'podman')}), ${quotaNote}, default image ${defaultImage ?? 'NONE (see the platform log)'}`,
    podman: podman.command,
    close: () => podman.stop(),
  };
}

/**
 * The platform's private engine: its storage under the state folder, its volatile files (runroot,
 * socket) on /run, so that Podman notices a reboot and the paths stay short whatever the state
 * folder. `berth down` uses it too, to stop what a crashed platform left running.
 */
export function privateEngine(stateDir: string, storage?: 'overlay' | 'btrfs-loop'): PodmanService {
  const id = createHash('sha256').update(stateDir).digest('hex').slice(0, 12);
  const volatileBase = existsSync('/run') ? '/run' : tmpdir();
  const options = { directory: join(stateDir, 'podman'), volatileDirectory: join(volatileBase, `berth-${id}`), persistent: true, btrfsSizeBytes: BTRFS_SIZE_BYTES };
  // Once chosen, the storage stays: the engine's database records its driver.
  const btrfs = new PodmanService({ ...options, storage: 'btrfs-loop' });
  const chosen = storage ?? (existsSync(btrfs.btrfsImage) ? 'btrfs-loop' : 'overlay');
  return chosen === 'btrfs-loop' ? btrfs : new PodmanService({ ...options, storage: 'overlay' });
}

/** Starts the engine on its storage of before; the first time on btrfs (quotas) when it works, else overlay. */
async function startPrivateEngine(stateDir: string, logger: Logger): Promise<{ podman: PodmanService; quotaNote: string }> {
  const before = privateEngine(stateDir);
  const fresh = !existsSync(before.btrfsImage) && !existsSync(join(stateDir, 'podman', 'storage', 'root'));
  const btrfsWorks = fresh && (await run('mkfs.btrfs', ['--version']).then(() => true, () => false));
  const podman = fresh && btrfsWorks ? privateEngine(stateDir, 'btrfs-loop') : before;
  try {
    await podman.start();
    if (podman.enforcesStorageQuota) return { podman, quotaNote: 'storage quotas enforced (btrfs)' };
    const why = fresh ? 'mkfs.btrfs (btrfs-progs) is not installed' : 'its storage was made on overlay';
    logger.warn(`sandbox storage quotas are not enforced: ${why}`);
    return { podman, quotaNote: `storage quotas NOT enforced (overlay: ${why})` };
  } catch (error) {
    await podman.stop().catch((cleanup: unknown) => logger.error({ err: cleanup }, 'cleaning up after the engine failed to start failed'));
    if (!(fresh && podman.storage === 'btrfs-loop')) throw error;
    // A new btrfs storage that cannot be used (no loop devices, say): nothing to lose on overlay.
    const why = `btrfs storage failed: ${(error as Error).message}`;
    logger.warn({ err: error }, 'sandbox storage quotas are not enforced: btrfs storage failed; using overlay');
    await rm(podman.btrfsImage, { force: true });
    const overlay = privateEngine(stateDir, 'overlay');
    await overlay.start();
    return { podman: overlay, quotaNote: `storage quotas NOT enforced (overlay: ${why.split('\n')[0]})` };
  }
}

async function ensureDefaultImage(podman: PodmanService, stateDir: string): Promise<void> {
  const present = await podman.podman(['image', 'exists', DEFAULT_SANDBOX_IMAGE]).then(() => true, () => false);
  if (!present) await buildBusyboxImages(podman, join(stateDir, 'podman', 'image-build'), [{ reference: DEFAULT_SANDBOX_IMAGE }]);
}
