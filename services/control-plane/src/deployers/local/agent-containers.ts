/**
 * Local agent servers in containers, contained as the Kubernetes deployer's pods are: each
 * revision's agent server runs on the platform's private Podman engine with
 *
 * - its own pid, mount, ipc, uts and cgroup namespaces (no host process is visible), the
 *   deployment's uid (never root), no capabilities and no privilege escalation;
 * - a read-only root: an empty image whose system folders are the host's (`/usr`, `/lib*`…),
 *   mounted read-only with the node binary, CA certificates and Berth's installation (the state
 *   folder inside it hidden under an empty tmpfs), and the revision's build read-only at
 *   `/srv/project` (as in a pod); a private `/tmp` (tmpfs, size-limited) and a writable HOME of
 *   the deployment's own;
 * - memory (no swap), CPU and process limits from the deployment's resources, with defaults;
 * - no network but loopback (`--network none`). The control plane binds the agent server's TCP
 *   port on host loopback and passes the listening socket in (`--preserve-fds`): the gateway
 *   reaches it directly and the host never connects into the container. What it may reach goes
 *   through Unix sockets the control plane serves (host-links.ts): its own Postgres, its Redis,
 *   the gateway for traces, and the egress proxy for everything else.
 *
 * Its environment (secrets included) reaches it through a pipe, never a command line: bash
 * exports it and execs node. Every container carries this installation's label, so that the
 * reconciler removes those of revisions no longer running (a control plane killed with SIGKILL
 * leaves its containers behind).
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, lstat, mkdir, mkdtemp, readdir, readlink, realpath, rm, rmdir, stat, symlink, writeFile } from 'node:fs/promises';
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, posix, relative, resolve, sep } from 'node:path';
import type { Logger } from '@berth/log';
import { create as createTar } from 'tar';
import { DeployFailedError, type DeployLog, type RevisionSpec } from '../deployer.js';
import { HostLinks, PROXY_SOCKET, type LinkTarget } from './host-links.js';
import { Podman, type PodmanCommand } from './podman.js';

/** Limits of one agent server's container. */
export interface ContainerLimits {
  /** Memory (no swap) when the deployment's resources set none, in MiB. @default 1024 */
  memoryMb?: number;
  /** CPU cores when the deployment's resources set none. @default 1 */
  cpu?: number;
  /**
   * Most memory a deployment's resources may ask, in MiB: the API refuses more (422); a deployment
   * that asked more before the maximum was lowered gets the maximum. @default 16384
   */
  maxMemoryMb?: number;
  /** Most CPU cores a deployment's resources may ask (as `maxMemoryMb`). @default 8 */
  maxCpu?: number;
  /** Processes and threads. @default 1024 */
  pids?: number;
  /** Size of the private /tmp, in MiB (it counts against the memory limit). @default 256 */
  tmpMb?: number;
}

export const DEFAULT_CONTAINER_LIMITS: Required<ContainerLimits> = { memoryMb: 1024, cpu: 1, maxMemoryMb: 16_384, maxCpu: 8, pids: 1024, tmpMb: 256 };

export interface AgentContainersOptions {
  podman: PodmanCommand;
  /** This installation's id, on every container's labels: the reconciler removes only its own. */
  installation: string;
  /** A root-only folder of the revisions' socket folders (short: a Unix socket path holds 107 bytes). */
  socketsDir: string;
  /** The agent server script (`AGENT_SERVE_SCRIPT`). */
  serveScript: string;
  /** @default this process's node binary */
  nodePath?: string;
  /** Folders inside Berth's installation the containers must not see (the state folder). */
  hidden: string[];
  limits?: ContainerLimits;
  /** Private CIDRs the containers' egress may reach (BERTH_DEPLOYMENT_PRIVATE_EGRESS). */
  privateEgress: string[];
  logger: Logger;
}

/** Where things are inside every container. */
const HOME = '/home/berth';
const PROJECT_DIR = '/srv/project';
const LINKS_DIR = '/run/berth';
/** Loopback ports inside, below Linux's ephemeral range, so that they never meet the agent server's own. */
const INSIDE_PORTS = { redis: 6379, gateway: 8080, proxy: 3128 } as const;
/** The agent server's inherited descriptors: its listening socket, then the pipe of its environment. */
const LISTEN_FD = 3;
const LABELS = { installation: 'berth.installation', deployment: 'berth.deployment', revision: 'berth.revision' } as const;
/**
 * Reads the environment (NUL-separated NAME=VALUE) from descriptor 4, exports it and becomes node.
 * bash refuses to export its read-only names (UID, EUID, PPID, SHELLOPTS, BASHOPTS), saying so.
 */
const LAUNCHER = 'mapfile -d "" -u 4 berth_env; exec 4<&-; (( ${#berth_env[@]} )) && export -- "${berth_env[@]}"; exec "$@"';
/** Folders of the image besides the system ones (/tmp: 1777). */
const IMAGE_FOLDERS = ['etc', 'tmp', 'proc', 'dev', 'sys', 'run', 'home/berth', 'srv/project', 'var'];
/** Top-level folders that are the host's own in every container (mounted when real folders, copied when links). */
const SYSTEM_DIRS = ['usr', 'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32'];

/** An installation's id (of its state folder): its containers' label, its sockets' folder. */
export function installationId(stateDir: string): string {
  return createHash('sha256').update(resolve(stateDir)).digest('hex').slice(0, 12);
}

/**
 * Where an installation's containers' socket folders go: on /run (a tmpfs, gone at reboot), and
 * short, whatever the state folder's path (a Unix socket's path holds 107 bytes).
 */
export function agentSocketsDir(installation: string): string {
  return join(existsSync('/run') ? '/run' : tmpdir(), `berth-agents-${installation}`);
}

/** The container name of a revision's agent server. */
export function containerName(revisionId: string): string {
  return `berth-agent-${revisionId}`;
}

/** A revision's container, ready to start (and restart) on a port. */
export interface AgentContainer {
  name: string;
  /** Binds 127.0.0.1:port and starts the container on that socket; the `podman run` attached to it is returned. */
  spawn(port: number): Promise<ChildProcess>;
  /** Removes the container (stopped or not) and its sockets. */
  close(): Promise<void>;
}

export class AgentContainers {
  private readonly podman: Podman;
  private readonly limits: Required<ContainerLimits>;
  private prepared: Promise<{ image: string; mounts: string[]; bash: string }> | undefined;

  constructor(private readonly options: AgentContainersOptions) {
    this.podman = new Podman(options.podman, options.socketsDir);
    this.limits = { ...DEFAULT_CONTAINER_LIMITS, ...options.limits };
  }

  /**
   * Checks that containers can run here and makes the image once (no registry: an empty root file
   * system imported into the engine). Rejects with the reason when they cannot.
   */
  prepare(): Promise<{ image: string; mounts: string[]; bash: string }> {
    this.prepared ??= this.makeReady();
    this.prepared.catch(() => (this.prepared = undefined));
    return this.prepared;
  }

  /**
   * Opens the revision's host links and returns its container, to start with `spawn`. `env` is the
   * agent server's environment as a process on the host would have it (addresses are moved here).
   */
  async open(
    spec: RevisionSpec & { artifact: { kind: 'directory' } },
    user: { uid: number; gid: number; home: string },
    processEnv: Record<string, string>,
    log: DeployLog,
  ): Promise<AgentContainer> {
    const { image, mounts, bash } = await this.prepare();
    const name = containerName(spec.revisionId);
    const { env, bridges } = containerEnv({ ...processEnv, BERTH_AGENT_CONFIG: posix.join(PROJECT_DIR, spec.artifact.configPath) });
    const memoryMb = Math.min(spec.resources.memoryMb ?? this.limits.memoryMb, this.limits.maxMemoryMb);
    const cpu = Math.min(spec.resources.cpu ?? this.limits.cpu, this.limits.maxCpu);
    const args = [
      'run',
      '--name',
      name,
      '--pull',
      'never',
      '--interactive',
      '--log-driver',
      'passthrough',
      '--label',
      `${LABELS.installation}=${this.options.installation}`,
      '--label',
      `${LABELS.deployment}=${spec.deploymentId}`,
      '--label',
      `${LABELS.revision}=${spec.revisionId}`,
      // Nothing of podman's own environment (proxy settings, sd-notify socket) reaches the container.
      '--unsetenv-all',
      '--http-proxy=false',
      '--sdnotify',
      'ignore',
      '--network',
      'none',
      '--pid',
      'private',
      '--ipc',
      'private',
      '--uts',
      'private',
      '--cgroupns',
      'private',
      '--hostname',
      'agent',
      '--user',
      `${user.uid}:${user.gid}`,
      '--cap-drop',
      'all',
      '--security-opt',
      'no-new-privileges',
      '--memory',
      `${memoryMb}m`,
      '--memory-swap',
      `${memoryMb}m`,
      '--cpus',
      String(cpu),
      '--pids-limit',
      String(this.limits.pids),
      '--read-only',
      '--read-only-tmpfs=false',
      '--tmpfs',
      `/tmp:rw,nosuid,nodev,size=${this.limits.tmpMb}m,mode=1777`,
      ...mounts,
      ...bind(spec.artifact.path, PROJECT_DIR, true),
      ...bind(user.home, HOME, false),
      ...bind(join(this.options.socketsDir, spec.revisionId), LINKS_DIR, true),
      '--workdir',
      PROJECT_DIR,
      '--preserve-fds',
      '2',
      image,
      bash,
      '-c',
      LAUNCHER,
      'berth-agent',
      this.options.nodePath ?? process.execPath,
      this.options.serveScript,
    ];
    const links = await HostLinks.open({
      dir: join(this.options.socketsDir, spec.revisionId),
      owner: user,
      bridges,
      privateEgress: this.options.privateEgress,
      logger: this.options.logger.child({ deploymentId: spec.deploymentId, revisionId: spec.revisionId, egress: 'deployment' }),
    });
    log(
      `running in container ${name}: ${memoryMb} MiB, ${cpu} CPU, ${this.limits.pids} processes, no network but its links to the platform and the egress proxy`,
    );
    let closing = false;
    return {
      name,
      spawn: async (port) => {
        // As a process's would: a build that is gone is the reason, not podman's failed mount.
        await stat(spec.artifact.path).catch((error: Error) => {
          throw new DeployFailedError(`the agent server could not be started (${error.message})`, { cause: error });
        });
        // One left by a process that died without it (its podman run killed) holds the name.
        await this.remove([name]);
        const listener = await bindLoopback(port);
        // From here to close() is one turn of the event loop: this process never accepts on it.
        const handle = (listener as unknown as { _handle?: { fd?: number } })._handle;
        if (typeof handle?.fd !== 'number' || handle.fd < 0) {
          listener.close();
          throw new DeployFailedError('cannot pass the listening socket to the container (this Node.js has no descriptor for it)');
        }
        const child = this.podman.spawn(args, ['pipe', 'pipe', 'pipe', handle.fd, 'pipe']);
        listener.close();
        const envPipe = child.stdio[4] as NodeJS.WritableStream | null;
        envPipe?.on('error', () => undefined);
        envPipe?.end(
          Object.entries({ ...env, PORT: String(port) })
            .map(([key, value]) => `${key}=${value}\0`)
            .join(''),
        );
        // 137: its process was killed with SIGKILL inside (a stop or a timeout kills the podman run instead).
        child.once('exit', (code) => {
          if (code === 137 && !closing) void this.explainKill(name, memoryMb).then((why) => log(why, 'error'));
        });
        return child;
      },
      close: async () => {
        closing = true;
        try {
          await this.remove([name]);
        } finally {
          await links.close();
        }
      },
    };
  }

  /**
   * Removes this installation's containers whose revision is not in `live`, and their socket
   * folders: what a control plane that died without stopping them left. Returns the names removed.
   */
  async reconcile(live: ReadonlySet<string>): Promise<string[]> {
    await this.prepare();
    const listed = await this.podman.run([
      'ps',
      '--all',
      '--filter',
      `label=${LABELS.installation}=${this.options.installation}`,
      '--format',
      `{{.Names}} {{index .Labels "${LABELS.revision}"}}`,
    ]);
    const orphans = listed
      .split('\n')
      .map((line) => line.trim().split(' '))
      .filter(([name, revision]) => name && revision && !live.has(revision))
      .map(([name]) => name!);
    if (orphans.length) await this.remove(orphans);
    for (const entry of await readdir(this.options.socketsDir)) {
      if (/^[0-9a-f-]{36}$/.test(entry) && !live.has(entry)) await rm(join(this.options.socketsDir, entry), { recursive: true, force: true });
    }
    return orphans;
  }

  /**
   * Removes the sockets folder once no revision uses it (the control plane stops; another one on
   * the same installation may still be using it, which keeps it).
   */
  async close(): Promise<void> {
    // conmon's marker of an OOM kill, left in its working directory.
    await rm(join(this.options.socketsDir, 'oom'), { force: true });
    await rmdir(this.options.socketsDir).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT' && error.code !== 'ENOTEMPTY') throw error;
    });
  }

  /**
   * Removes containers, running or not. One that is stopping by itself meanwhile makes podman fail
   * ("container state improper"): it is tried again.
   */
  private async remove(names: string[]): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.podman.run(['rm', '--force', '--time', '0', '--ignore', ...names]);
        return;
      } catch (error) {
        if (attempt === 3) throw error;
        await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
      }
    }
  }

  /** Why a container ended with SIGKILL that nobody asked for. */
  private async explainKill(name: string, memoryMb: number): Promise<string> {
    const oom = await this.podman.run(['inspect', '--format', '{{.State.OOMKilled}}', name]).then(
      (out) => out.trim() === 'true',
      () => false,
    );
    return oom
      ? `the agent server was killed for using more than its memory limit (${memoryMb} MiB)`
      : `the agent server was killed (SIGKILL) — as the kernel does when it uses more than its memory limit (${memoryMb} MiB)`;
  }

  private async makeReady(): Promise<{ image: string; mounts: string[]; bash: string }> {
    if (process.getuid?.() !== 0) throw new Error('containers need root');
    await mkdir(this.options.socketsDir, { recursive: true, mode: 0o700 });
    const bash = ['/usr/bin/bash', '/bin/bash'].find((path) => existsSync(path));
    if (!bash) throw new Error('bash is not installed (the containers start node with it)');
    const { skeleton, mounts } = await runtimeLayout(this.options);
    const image = `localhost/berth/agent-root:${createHash('sha256').update(JSON.stringify({ IMAGE_FOLDERS, skeleton })).digest('hex').slice(0, 12)}`;
    const present = await this.podman.run(['image', 'exists', image]).then(
      () => true,
      () => false,
    );
    if (!present) await this.importImage(image, skeleton);
    return { image, mounts, bash };
  }

  /** Imports an image whose root holds only empty folders, the links of `skeleton`, and /etc/nsswitch.conf. */
  private async importImage(image: string, skeleton: Record<string, string | null>): Promise<void> {
    const work = await mkdtemp(join(this.options.socketsDir, '.image-'));
    try {
      const root = join(work, 'root');
      for (const folder of IMAGE_FOLDERS) await mkdir(join(root, folder), { recursive: true });
      // runc gives the tmpfs mounted there the mode of the folder it covers.
      await chmod(join(root, 'tmp'), 0o1777);
      for (const [name, target] of Object.entries(skeleton)) {
        if (target === null) await mkdir(join(root, name), { recursive: true });
        else await symlink(target, join(root, name));
      }
      // Names resolve from /etc/hosts only: there is no DNS in a container without a network.
      await writeFile(join(root, 'etc/nsswitch.conf'), 'passwd: files\ngroup: files\nhosts: files\n');
      const tarball = join(work, 'root.tar');
      await createTar({ cwd: root, file: tarball }, ['.']);
      await this.podman.run(['import', '--quiet', tarball, image]);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }
}

/**
 * The image's system folders (real folders become mount points, links stay links) and the
 * read-only mounts every container gets: those folders, CA certificates, the time zone, the node
 * binary, Berth's installation, and empty tmpfs over the hidden folders inside it.
 */
async function runtimeLayout(options: AgentContainersOptions): Promise<{ skeleton: Record<string, string | null>; mounts: string[] }> {
  const skeleton: Record<string, string | null> = {};
  const mounts: string[] = [];
  const mounted: string[] = [];
  for (const name of SYSTEM_DIRS) {
    const info = await lstat(`/${name}`).catch(() => undefined);
    if (info?.isSymbolicLink()) skeleton[name] = await readlink(`/${name}`);
    else if (info?.isDirectory()) {
      skeleton[name] = null;
      mounts.push(...bind(`/${name}`, `/${name}`, true));
      mounted.push(`/${name}`);
    }
  }
  for (const path of ['/etc/ssl/certs', '/etc/localtime']) {
    if (existsSync(path)) mounts.push(...bind(await realpath(path), path, true));
  }
  const node = options.nodePath ?? process.execPath;
  if (!mounted.some((dir) => inside(node, dir))) mounts.push(...bind(await realpath(node), node, true));
  const installation = installationRoot(options.serveScript);
  mounts.push(...bind(installation, installation, true));
  for (const hidden of options.hidden) {
    if (inside(hidden, installation)) mounts.push('--tmpfs', `${hidden}:ro,size=4k,mode=0711,notmpcopyup`);
  }
  return { skeleton, mounts };
}

/** The outermost folder above the script that has a node_modules: Berth's installation (the checkout). */
export function installationRoot(script: string): string {
  let root = dirname(script);
  for (let dir = dirname(script); dirname(dir) !== dir; dir = dirname(dir)) {
    if (existsSync(join(dir, 'node_modules'))) root = dir;
  }
  return root;
}

function inside(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !rel.startsWith(sep));
}

/** `--mount` flags of a bind mount (paths with commas cannot be said in them). */
function bind(source: string, target: string, readOnly: boolean): string[] {
  if (source.includes(',') || target.includes(',')) throw new DeployFailedError(`cannot mount ${source} into a container: its path has a comma`);
  return ['--mount', `type=bind,source=${source},destination=${target}${readOnly ? ',readonly=true' : ''}`];
}

/**
 * The agent server's environment inside, and the bridges it needs: Postgres by its socket, Redis
 * and an http tracing endpoint on loopback ports bridged to their hosts, `fetch` through the proxy.
 */
function containerEnv(env: Record<string, string>): { env: Record<string, string>; bridges: Record<string, LinkTarget> } {
  const inside: Record<string, string> = { ...env };
  const bridges: Record<string, LinkTarget> = {};
  if (env.DATABASE_URL) {
    // By its socket (`.s.PGSQL.5432` in the folder the host parameter names, which wins over the
    // URL's host for libpq and node-postgres alike): no hop inside.
    const url = new URL(env.DATABASE_URL);
    bridges['.s.PGSQL.5432'] = target(url, 5432);
    url.hostname = 'localhost';
    url.port = '';
    url.searchParams.set('host', LINKS_DIR);
    inside.DATABASE_URL = url.toString();
  }
  if (env.REDIS_URL) {
    const url = new URL(env.REDIS_URL);
    bridges['redis.sock'] = target(url, 6379);
    inside.REDIS_URL = onLoopback(url, INSIDE_PORTS.redis);
  }
  if (env.BERTH_TRACING_ENDPOINT?.startsWith('http:')) {
    const url = new URL(env.BERTH_TRACING_ENDPOINT);
    bridges['gateway.sock'] = target(url, 80);
    inside.BERTH_TRACING_ENDPOINT = onLoopback(url, INSIDE_PORTS.gateway);
  }
  const proxy = `http://127.0.0.1:${INSIDE_PORTS.proxy}`;
  const links = Object.entries({ 'redis.sock': INSIDE_PORTS.redis, 'gateway.sock': INSIDE_PORTS.gateway, [PROXY_SOCKET]: INSIDE_PORTS.proxy })
    .filter(([socket]) => socket === PROXY_SOCKET || bridges[socket])
    .map(([socket, port]) => `${port}=${LINKS_DIR}/${socket}`);
  return {
    env: {
      ...inside,
      HOME,
      TMPDIR: '/tmp',
      BERTH_LISTEN_FD: String(LISTEN_FD),
      BERTH_HOST_LINKS: links.join(','),
      BERTH_EGRESS_PROXY: proxy,
      // For the project's own HTTP clients that read them (axios, requests in a subprocess…).
      HTTP_PROXY: proxy,
      HTTPS_PROXY: proxy,
      http_proxy: proxy,
      https_proxy: proxy,
      NO_PROXY: 'localhost,127.0.0.1,::1',
      no_proxy: 'localhost,127.0.0.1,::1',
    },
    bridges,
  };
}

function target(url: URL, defaultPort: number): LinkTarget {
  return { host: url.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1', port: url.port ? Number(url.port) : defaultPort };
}

function onLoopback(url: URL, port: number): string {
  const moved = new URL(url);
  moved.hostname = '127.0.0.1';
  moved.port = String(port);
  return moved.toString();
}

/** A listening socket on 127.0.0.1:port; resolves from its 'listening' event, rejects when the port is taken. */
function bindLoopback(port: number): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (error) => reject(new DeployFailedError(`cannot listen on 127.0.0.1:${port}: ${error.message}`, { cause: error })));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => resolve(server));
  });
}
