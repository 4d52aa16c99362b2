/**
 * A private Podman engine serving the Docker Engine API on a Unix socket (`podman system service`),
 * for tests and for trying sandboxes locally. Everything it keeps — images, containers, volumes,
 * its lock and runtime files — lives under a folder of ours, so it never touches the system's
 * containers. Rootful only: it needs root (cgroups limits, bind mounts of the agent).
 *
 * `storage: 'btrfs-loop'` puts the storage on a btrfs file system in a loop-mounted image file:
 * only there (or on XFS with project quotas) can Podman enforce a container's storage size
 * (`HostConfig.StorageOpt.size`); on overlay over ext4 it cannot.
 *
 * Tests start a throwaway engine (the default); the embedded platform a `persistent` one, whose
 * images, containers and volumes outlive a restart of the platform.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import { chmod, mkdir, readFile, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { inheritedEnv, searchPath } from './env.js';
import { run, sleep } from './run.js';

export interface PodmanServiceOptions {
  /** Folder of ours for the configuration and the storage (images, containers, volumes). */
  directory: string;
  /**
   * Folder for what must not outlive a reboot: the engine's runroot, lock and state files, its
   * socket and pid file. Best on a tmpfs (`/run`): Podman then notices a reboot and resets the
   * state of containers that no longer run. Its runroot (`<volatileDirectory>/run`) may be at most
   * 50 characters long.
   * @default directory
   */
  volatileDirectory?: string;
  /**
   * A long-lived engine (the platform's): an existing btrfs image is reused (and a mount left by a
   * crash kept), a service left running by a crashed predecessor is stopped first, the service runs
   * in its own process group (a terminal's Ctrl-C reaches the platform, which stops it in order),
   * and stop() keeps stopped containers and volumes. Otherwise (tests) stop() removes them all.
   * @default false
   */
  persistent?: boolean;
  /**
   * `overlay`: storage in `<directory>/storage` (no storage quotas on ext4).
   * `btrfs-loop`: a btrfs image file of `btrfsSizeBytes` loop-mounted at `<directory>/storage`
   * (storage quotas work; needs root, loop devices and mkfs.btrfs from btrfs-progs).
   * @default 'overlay'
   */
  storage?: 'overlay' | 'btrfs-loop';
  /** @default 4 GiB (sparse: only what is written takes disk space) */
  btrfsSizeBytes?: number;
  /** @default 'podman' on PATH */
  binary?: string;
  /**
   * File the service's messages are appended to. A long-lived engine wants one: its messages are
   * kept, and it does not depend on a pipe to the process that started it (which may end first).
   * @default a pipe to this process, kept in memory for the error of a failed start
   */
  logFile?: string;
}

/** Why Podman cannot run here, or undefined when it can (root and the binaries are present). */
export function podmanUnavailableReason(binary = 'podman'): string | undefined {
  if (process.getuid?.() !== 0) return 'the private Podman engine needs root (rootful containers with cgroup limits)';
  const onPath = (name: string) => searchPath().some((dir) => existsSync(join(dir, name)));
  const missing = [binary, 'runc'].filter((name) => !(name.startsWith('/') ? existsSync(name) : onPath(name)));
  if (missing.length) return `${missing.join(' and ')} not found: run scripts/ensure-podman.sh (as root)`;
  return undefined;
}

export class PodmanService {
  private child?: ChildProcess;
  private mounted = false;
  readonly socketPath: string;
  readonly storage: 'overlay' | 'btrfs-loop';
  private readonly binary: string;
  private readonly volatileDir: string;

  constructor(private readonly options: PodmanServiceOptions) {
    this.volatileDir = options.volatileDirectory ?? options.directory;
    this.socketPath = join(this.volatileDir, 'docker.sock');
    this.storage = options.storage ?? 'overlay';
    this.binary = options.binary ?? 'podman';
  }

  /** Storage quotas (`StorageOpt.size`) are enforced by this engine. */
  get enforcesStorageQuota(): boolean {
    return this.storage === 'btrfs-loop';
  }

  private get runRoot(): string {
    return join(this.volatileDir, 'run');
  }

  private get storageDir(): string {
    return join(this.options.directory, 'storage');
  }

  /** The btrfs image file of `btrfs-loop` storage. */
  get btrfsImage(): string {
    return join(this.options.directory, 'storage.btrfs');
  }

  private get pidFile(): string {
    return join(this.volatileDir, 'service.pid');
  }

  /** Environment for every podman command of this engine (the service and the CLI). */
  get env(): NodeJS.ProcessEnv {
    const dir = this.options.directory;
    return {
      ...inheritedEnv(),
      CONTAINERS_CONF: join(dir, 'containers.conf'),
      CONTAINERS_REGISTRIES_CONF: join(dir, 'registries.conf'),
      CONTAINERS_STORAGE_CONF: join(dir, 'storage.conf'),
    };
  }

  /** Global podman flags that point the CLI at this engine's storage (for `podman build`, `push`). */
  get cliArgs(): string[] {
    return ['--root', join(this.storageDir, 'root'), '--runroot', this.runRoot, '--storage-driver', this.storage === 'btrfs-loop' ? 'btrfs' : 'overlay'];
  }

  /**
   * How another process runs the CLI against this engine (the control plane, for its agent
   * servers' containers): the flags and the configuration variables, PATH, nothing else of ours.
   */
  get command(): { args: string[]; env: Record<string, string> } {
    const env = Object.entries(this.env).filter((e): e is [string, string] => e[1] !== undefined && (e[0] === 'PATH' || e[0].startsWith('CONTAINERS_')));
    return { args: this.cliArgs, env: Object.fromEntries(env) };
  }

  /** Runs the podman CLI against this engine's storage. */
  podman(args: string[], timeoutMs?: number): Promise<{ stdout: string; stderr: string }> {
    return run(this.binary, [...this.cliArgs, ...args], { env: this.env, timeoutMs });
  }

  async start(): Promise<{ socketPath: string }> {
    const dir = this.options.directory;
    if (this.runRoot.length > 50) {
      throw new Error(`podman refuses a runroot path over 50 characters (${this.runRoot}): give PodmanService a shorter directory`);
    }
    await mkdir(join(this.volatileDir, 'tmp'), { recursive: true, mode: 0o700 });
    // The engine's API socket lives here, and it is as good as root: nobody else may enter.
    await chmod(this.volatileDir, 0o700);
    await mkdir(join(dir, 'net'), { recursive: true });
    await mkdir(this.storageDir, { recursive: true });
    // The storage holds every sandbox's files: no other user (a deployed graph's uid) may look in.
    await chmod(dir, 0o700);
    if (this.options.persistent) await this.stopLeftoverService();
    if (this.storage === 'btrfs-loop') await this.mountBtrfs();
    await this.writeConfig();
    const { logFile } = this.options;
    const logFrom = logFile
      ? await stat(logFile).then(
          (s) => s.size,
          () => 0,
        )
      : 0;
    const log = logFile ? openSync(logFile, 'a') : undefined;
    let child: ChildProcess;
    try {
      // --time=0: serve until stopped (the default ends the service after 5 s without requests).
      child = spawn(this.binary, [...this.cliArgs, 'system', 'service', '--time=0', `unix://${this.socketPath}`], {
        env: this.env,
        // conmon leaves an `oom` marker file in its working directory after an OOM kill: not in ours.
        cwd: dir,
        stdio: ['ignore', 'ignore', log ?? 'pipe'],
        detached: this.options.persistent === true,
      });
    } finally {
      if (log !== undefined) closeSync(log);
    }
    this.child = child;
    if (child.pid !== undefined) await writeFile(this.pidFile, `${child.pid}\n`);
    let piped = '';
    child.stderr?.on('data', (chunk) => (piped = (piped + String(chunk)).slice(-4000)));
    const said = async () => (logFile ? (await readFile(logFile).catch(() => Buffer.alloc(0))).subarray(logFrom).toString('utf8').slice(-4000) : piped).trim();
    const deadline = Date.now() + 20_000;
    while (!(await ping(this.socketPath))) {
      if (child.exitCode !== null) throw new Error(`podman system service exited: ${await said()}`);
      if (Date.now() > deadline) throw new Error(`podman system service did not answer on ${this.socketPath}: ${await said()}`);
      await sleep(50);
    }
    return { socketPath: this.socketPath };
  }

  /**
   * Kills the API service alone (SIGKILL), as a crash would: its containers run on under conmon,
   * and `start()` serves them again. For tests of a platform whose engine goes away.
   */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  /**
   * Stops the service, then every container it ran (they outlive the service: conmon keeps them),
   * and unmounts its storage. A persistent engine keeps the stopped containers and volumes (and
   * also stops a service and unmounts storage that a crashed predecessor left); otherwise they are
   * removed.
   */
  async stop(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    this.child = undefined;
    if (this.options.persistent) {
      await this.stopLeftoverService();
      this.mounted = await isMountPoint(this.storageDir);
    }
    const errors: unknown[] = [];
    // No storage yet (a start that failed early), or btrfs storage not mounted (stopped before):
    // no containers to stop, and Podman could not open the storage; but a storage mount to undo.
    const cleanup =
      !existsSync(join(this.storageDir, 'root')) || (this.storage === 'btrfs-loop' && !this.mounted)
        ? []
        : this.options.persistent
          ? [['stop', '--all', '--time', '5']]
          : [
              ['rm', '--all', '--force', '--time', '0'],
              ['volume', 'rm', '--all', '--force'],
            ];
    for (const args of cleanup) {
      await this.podman(args).catch((error: unknown) => errors.push(error));
    }
    if (this.mounted) {
      await this.unmountStorage().catch((error: unknown) => errors.push(error));
      this.mounted = false;
    }
    if (errors.length) throw new AggregateError(errors, 'podman cleanup failed');
  }

  /**
   * Unmounts the storage. A container just stopped may still be letting go of it (its conmon
   * exiting, its rootfs unmounting) on a busy machine: a busy target is tried again for a few
   * seconds. Never lazily: the next start mounts the same btrfs image again.
   */
  private async unmountStorage(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await run('umount', ['--recursive', this.storageDir]);
        return;
      } catch (error) {
        if (attempt >= 20 || !/busy/i.test((error as Error).message)) throw error;
        await sleep(250);
      }
    }
  }

  private async mountBtrfs(): Promise<void> {
    const image = this.btrfsImage;
    const reuse =
      this.options.persistent &&
      (await stat(image).then(
        (s) => s.size > 0,
        () => false,
      ));
    if (!reuse) {
      await writeFile(image, '');
      await run('truncate', ['-s', String(this.options.btrfsSizeBytes ?? 4 * 1024 ** 3), image]);
      await run('mkfs.btrfs', ['-q', image]);
    }
    // After a crash the file system may still be mounted: mounting it again would stack a second
    // loop device on the same image.
    if (!(reuse && (await isMountPoint(this.storageDir)))) await run('mount', ['-o', 'loop', image, this.storageDir]);
    this.mounted = true;
  }

  /** A service of this engine that runs without us (its platform crashed), or a storage mount it left. */
  async leftBehind(): Promise<boolean> {
    return (await this.runningPid()) !== undefined || (this.storage === 'btrfs-loop' && (await isMountPoint(this.storageDir)));
  }

  /** The pid of this engine's service while it runs (the pid file's, when that process still is the service). */
  async runningPid(): Promise<number | undefined> {
    const pid = Number((await readFile(this.pidFile, 'utf8').catch(() => '')).trim());
    if (!Number.isInteger(pid) || pid <= 0) return undefined;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    return cmdline.includes(`unix://${this.socketPath}`) ? pid : undefined;
  }

  /** Stops the service recorded in the pid file when it still runs (its platform crashed). */
  private async stopLeftoverService(): Promise<void> {
    const pid = await this.runningPid();
    if (pid !== undefined) {
      process.kill(pid, 'SIGTERM');
      const deadline = Date.now() + 10_000;
      while (existsSync(`/proc/${pid}`) && Date.now() < deadline) await sleep(50);
      if (existsSync(`/proc/${pid}`)) process.kill(pid, 'SIGKILL');
    }
    await rm(this.pidFile, { force: true });
  }

  private async writeConfig(): Promise<void> {
    const dir = this.options.directory;
    // Limits of the host's root (nofile 20000+, nproc 96000+) are far too generous for a sandbox;
    // runc instead of crun (Debian's podman defaults to crun, which may be absent). tmp_dir holds the
    // engine's lock and state: the system's /run/libpod must not be shared with another engine.
    const containersConf = [
      '[containers]',
      'default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]',
      '[engine]',
      'runtime = "runc"',
      'events_logger = "file"',
      `tmp_dir = ${JSON.stringify(join(this.volatileDir, 'tmp'))}`,
      '[network]',
      `network_config_dir = ${JSON.stringify(join(dir, 'net'))}`,
      '',
    ].join('\n');
    // Not the system's registries.conf: no short-name search (references are always full), and
    // plain-HTTP registries are chosen per pull (the driver's tlsVerify=false), not here.
    const registriesConf = 'unqualified-search-registries = []\n';
    const storageConf = [
      '[storage]',
      `driver = "${this.storage === 'btrfs-loop' ? 'btrfs' : 'overlay'}"`,
      `graphroot = ${JSON.stringify(join(this.storageDir, 'root'))}`,
      `runroot = ${JSON.stringify(this.runRoot)}`,
      '',
    ].join('\n');
    await writeFile(join(dir, 'containers.conf'), containersConf);
    await writeFile(join(dir, 'registries.conf'), registriesConf);
    await writeFile(join(dir, 'storage.conf'), storageConf);
  }

  /** Removes the folders too (after stop). */
  async destroy(): Promise<void> {
    await this.stop();
    await rm(this.options.directory, { recursive: true, force: true });
    await rm(this.volatileDir, { recursive: true, force: true });
  }
}

/** Whether a file system is mounted at `path` (per /proc/self/mountinfo). */
export async function isMountPoint(path: string): Promise<boolean> {
  const target = await realpath(path).catch(() => path);
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
  // Field 5 is the mount point, with spaces, tabs, newlines and backslashes as octal escapes.
  const unescape = (field: string) => field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
  return mountinfo.split('\n').some((line) => unescape(line.split(' ')[4] ?? '') === target);
}

function ping(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath, path: '/_ping', timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.once('error', () => resolve(false));
    req.once('timeout', () => {
      req.destroy();
      resolve(false);
    });
    req.end();
  });
}
