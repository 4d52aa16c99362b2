/**
 * Sandboxes of the embedded platform: a private Podman engine under the state folder (its images,
 * containers and volumes in `<state>/podman`, the sandboxes' run folders in `<state>/sandboxes`).
 * Under `berth up` the supervisor starts it before the platform, restarts it when it crashes and
 * stops it after the platform; `berth serve` alone starts it with the platform and stops it with
 * it. Stopped containers keep their files for the next start. Where no engine can run (not root,
 * Podman missing, the engine fails), the platform starts anyway and sandbox calls answer 503 with
 * the reason and how to fix it.
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
import { ConfigError } from '@berth/config';
import { z } from 'zod';

/** The image of sandboxes created without a template or snapshot; built from busybox on first start. */
export const DEFAULT_SANDBOX_IMAGE = 'localhost/berth/busybox:1';

/**
 * An engine that already runs (tests share theirs; under `berth up` the supervisor runs the private
 * one): the platform neither starts nor stops it.
 */
export interface ExternalEngine {
  socketPath: string;
  storageQuota: 'enforce' | 'ignore';
  defaultImage?: string;
  /** What `berth up` says of it. @default its socket and whether storage quotas are enforced */
  summary?: string;
  /** The podman CLI against it: deployments' agent servers then run in containers there. */
  podmanCommand?: PodmanCommand;
}

export interface PlatformSandboxConfig {
  /** `private`: a Podman engine of the platform's own (needs root); `off`: sandbox calls answer 503. */
  engine: 'private' | 'off' | ExternalEngine;
  /** Why sandboxes are off (engine `off`). @default turned off with BERTH_SANDBOXES=off */
  offReason?: string;
}

/**
 * What the supervisor of `berth up` tells the platform it starts (BERTH_SUPERVISED_SANDBOXES, as
 * JSON): the engine it runs, or why there is none.
 */
const supervisedSandboxes = z.union([
  z.strictObject({
    engine: z.strictObject({
      socketPath: z.string().min(1),
      storageQuota: z.enum(['enforce', 'ignore']),
      defaultImage: z.string().min(1).optional(),
      summary: z.string().optional(),
      podmanCommand: z.strictObject({ args: z.array(z.string()), env: z.record(z.string(), z.string()) }).optional(),
    }),
  }),
  z.strictObject({ off: z.string().min(1) }),
]);
export type SupervisedSandboxes = z.infer<typeof supervisedSandboxes>;

/** @throws ConfigError naming BERTH_SUPERVISED_SANDBOXES when it is not the JSON of a SupervisedSandboxes */
export function parseSupervisedSandboxes(json: string): SupervisedSandboxes {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (error) {
    throw new ConfigError([`BERTH_SUPERVISED_SANDBOXES: not JSON (${(error as Error).message})`], { cause: error });
  }
  const result = supervisedSandboxes.safeParse(value);
  if (result.success) return result.data;
  throw new ConfigError(
    result.error.issues.map((issue) => `BERTH_SUPERVISED_SANDBOXES${issue.path.map((key) => `.${String(key)}`).join('')}: ${issue.message}`),
    { cause: result.error },
  );
}

export interface SandboxEngine {
  /** What the sandbox-manager gets from the engine (its other settings come from its own environment). */
  settings: SandboxSettings;
  /** One line for people: the engine and its storage quotas, or OFF and why. */
  summary: string;
  /** The podman CLI against the engine, for the deployments' containers; unset without an engine. */
  podmanCommand?: PodmanCommand;
  close(): Promise<void>;
}

/** The private engine once started: how to reach it, and the service to stop. */
export interface PrivateEngine extends ExternalEngine {
  podman: PodmanService;
  summary: string;
}

/** Sandbox btrfs storage (a sparse file: only what is written takes disk space). */
const BTRFS_SIZE_BYTES = 32 * 1024 ** 3;
/** Unix socket paths hold at most 107 bytes. */
const MAX_SOCKET_PATH = 107;
const HOW_TO_ENABLE = 'to run sandboxes, start Berth as root on a machine with Podman and runc (`make up` as root installs them with apt-get on Debian/Ubuntu)';

export async function startSandboxEngine(config: PlatformSandboxConfig | undefined, stateDir: string, logger: Logger): Promise<SandboxEngine> {
  const shared = { stopSandboxesOnClose: true };
  const off = (why: string): SandboxEngine => {
    const reason = `sandboxes are off: ${why}`;
    logger.warn({ reason }, 'sandboxes are off');
    return { settings: { ...shared, unavailableReason: reason }, summary: `OFF: ${why}`, close: async () => undefined };
  };
  const engine = config?.engine ?? 'off';
  if (engine === 'off') return off(config?.offReason ?? 'turned off with BERTH_SANDBOXES=off: start Berth without it to run them');
  const runDir = join(stateDir, 'sandboxes');
  const tooLong = socketPathProblem(stateDir);
  if (tooLong) return off(tooLong);
  await mkdir(runDir, { recursive: true, mode: 0o700 });
  if (engine !== 'private') {
    return {
      settings: {
        ...shared,
        driver: { kind: 'container', socketPath: engine.socketPath, runDir, storageQuota: engine.storageQuota },
        ...(engine.defaultImage ? { defaultImage: engine.defaultImage } : {}),
      },
      summary: engine.summary ?? `on: the engine at ${engine.socketPath}, storage quotas ${engine.storageQuota === 'enforce' ? 'enforced' : 'not enforced'}`,
      ...(engine.podmanCommand ? { podmanCommand: engine.podmanCommand } : {}),
      close: async () => undefined,
    };
  }
  const problem = privateEngineUnavailable(stateDir);
  if (problem) return off(problem);
  let started: PrivateEngine;
  try {
    started = await startPrivateEngine(stateDir, logger);
  } catch (error) {
    return off(`${(error as Error).message}; see the platform log, fix the cause and restart Berth`);
  }
  return {
    settings: {
      ...shared,
      driver: { kind: 'container', socketPath: started.socketPath, runDir, storageQuota: started.storageQuota },
      ...(started.defaultImage ? { defaultImage: started.defaultImage } : {}),
    },
    summary: started.summary,
    podmanCommand: started.podman.command,
    close: () => started.podman.stop(),
  };
}

/** Why the private engine cannot run here (not root, Podman missing, the state folder's path too long), or undefined. */
export function privateEngineUnavailable(stateDir: string): string | undefined {
  const problem = podmanUnavailableReason();
  return socketPathProblem(stateDir) ?? (problem ? `${problem}; ${HOW_TO_ENABLE}` : undefined);
}

/** Sandboxes' sockets live under the state folder: its path may be too long for them. */
function socketPathProblem(stateDir: string): string | undefined {
  const longest = Buffer.byteLength(join(stateDir, 'sandboxes') + LONGEST_SOCKET_SUFFIX);
  if (longest <= MAX_SOCKET_PATH) return undefined;
  return (
    `the state folder's path is too long for the sandboxes' sockets (Unix socket paths hold at most ${MAX_SOCKET_PATH} bytes): ` +
    `use a BERTH_STATE_DIR of at most ${Buffer.byteLength(stateDir) - (longest - MAX_SOCKET_PATH)} bytes`
  );
}

/**
 * Starts the platform's private engine on its storage of before (see {@link startPodman}) and builds
 * the default sandbox image the first time. `berth serve` on its own starts it so; under `berth up`,
 * the supervisor does, and restarts it when it crashes. Throws, saying why, when it does not start.
 * @param options.logFile where the service's messages go (the supervisor's engine outlives a pipe to it)
 */
export async function startPrivateEngine(stateDir: string, logger: Logger, options: { logFile?: string } = {}): Promise<PrivateEngine> {
  let podman: PodmanService;
  let quotaNote: string;
  try {
    ({ podman, quotaNote } = await startPodman(stateDir, logger, options.logFile));
  } catch (error) {
    logger.error({ err: error }, 'the private Podman engine did not start');
    throw new Error(`the private Podman engine did not start (${(error as Error).message})`, { cause: error });
  }
  let defaultImage: string | undefined = DEFAULT_SANDBOX_IMAGE;
  try {
    await ensureDefaultImage(podman, stateDir);
  } catch (error) {
    // Sandboxes from templates still work: only `POST /boxes` without one needs the default image.
    logger.error({ err: error }, `cannot build the default sandbox image ${DEFAULT_SANDBOX_IMAGE}`);
    defaultImage = undefined;
  }
  return {
    podman,
    socketPath: podman.socketPath,
    storageQuota: podman.enforcesStorageQuota ? 'enforce' : 'ignore',
    ...(defaultImage ? { defaultImage } : {}),
    summary: `on: private Podman engine (${join(stateDir, 'podman')}), ${quotaNote}, default image ${defaultImage ?? 'NONE (see the platform log)'}`,
  };
}

/**
 * The platform's private engine: its storage under the state folder, its volatile files (runroot,
 * socket) on /run, so that Podman notices a reboot and the paths stay short whatever the state
 * folder. `berth down` uses it too, to stop what a crashed platform left running.
 */
export function privateEngine(stateDir: string, storage?: 'overlay' | 'btrfs-loop', logFile?: string): PodmanService {
  const id = createHash('sha256').update(stateDir).digest('hex').slice(0, 12);
  const volatileBase = existsSync('/run') ? '/run' : tmpdir();
  const options = {
    directory: join(stateDir, 'podman'),
    volatileDirectory: join(volatileBase, `berth-${id}`),
    persistent: true,
    btrfsSizeBytes: BTRFS_SIZE_BYTES,
    ...(logFile ? { logFile } : {}),
  };
  // Once chosen, the storage stays: the engine's database records its driver.
  const btrfs = new PodmanService({ ...options, storage: 'btrfs-loop' });
  const chosen = storage ?? (existsSync(btrfs.btrfsImage) ? 'btrfs-loop' : 'overlay');
  return chosen === 'btrfs-loop' ? btrfs : new PodmanService({ ...options, storage: 'overlay' });
}

/** Starts the engine on its storage of before; the first time on btrfs (quotas) when it works, else overlay. */
async function startPodman(stateDir: string, logger: Logger, logFile?: string): Promise<{ podman: PodmanService; quotaNote: string }> {
  const before = privateEngine(stateDir, undefined, logFile);
  const fresh = !existsSync(before.btrfsImage) && !existsSync(join(stateDir, 'podman', 'storage', 'root'));
  const btrfsWorks =
    fresh &&
    (await run('mkfs.btrfs', ['--version']).then(
      () => true,
      () => false,
    ));
  const podman = fresh && btrfsWorks ? privateEngine(stateDir, 'btrfs-loop', logFile) : before;
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
    const overlay = privateEngine(stateDir, 'overlay', logFile);
    await overlay.start();
    return { podman: overlay, quotaNote: `storage quotas NOT enforced (overlay: ${why.split('\n')[0]})` };
  }
}

async function ensureDefaultImage(podman: PodmanService, stateDir: string): Promise<void> {
  const present = await podman.podman(['image', 'exists', DEFAULT_SANDBOX_IMAGE]).then(
    () => true,
    () => false,
  );
  if (!present) await buildBusyboxImages(podman, join(stateDir, 'podman', 'image-build'), [{ reference: DEFAULT_SANDBOX_IMAGE }]);
}
