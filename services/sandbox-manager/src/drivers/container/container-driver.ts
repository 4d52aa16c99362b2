/**
 * The `container` sandbox driver: one container per instance through the Docker Engine API over a
 * Unix socket (Docker, or Podman's `podman system service`). Commands and files never go through
 * the engine (its exec costs ~230 ms): the agent inside (PID 1) answers on a Unix socket in the
 * instance's run folder, which the host side reaches directly — only the very socket the agent made
 * when the instance started (instance-files.ts says where what lives, and why).
 */
import { access, chmod, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import type { Logger } from '@berth/log';
import { AgentClient, AgentError, AgentSocketReplacedError, agentBinaryPath, SpawnError } from '../../agent/agent-client.js';
import type { SocketIdentity } from '../../agent/socket-file.js';
import {
  CommandStartError,
  ImagePullError,
  InstanceError,
  InstanceNotFoundError,
  type EgressPolicy,
  type ExecSpec,
  type ImageInfo,
  type ImageSource,
  type InstanceSpec,
  type InstanceState,
  type SandboxDriver,
  type SandboxProcess,
} from '../driver.js';
import {
  AGENT_OOM_SCORE_ADJ,
  canLowerOomScore,
  containerCreateOptions,
  isRootUser,
  LABELS,
  PLATFORM_MOUNTS,
  PROXY_CA_FILE,
  PROXY_SOCKET,
} from './container-spec.js';
import { pullImage, registryOf, withTag } from './image-pull.js';
import { InstanceFiles, type RunFolderKind } from './instance-files.js';
import { engineStore, QuotaRoots, quotaRootUnavailableReason } from './quota-root.js';

/** The auth proxy of one instance, listening on `socketPath` (helper: src/proxy). */
export interface AuthProxyHandle {
  close(): Promise<void>;
}
export interface AuthProxy {
  open(instance: string, socketPath: string, policy: EgressPolicy): Promise<AuthProxyHandle>;
  /** The CA the proxy signs intercepted HTTPS with (PEM): sandboxes are made to trust it. */
  readonly caCertPem?: string;
}

export interface ContainerDriverOptions {
  /** The engine's API socket (`/var/run/docker.sock`, a `podman system service` socket). */
  socketPath: string;
  /** Host folder of what the host keeps of each instance (instance-files.ts); it must be on the engine's host. */
  runDir: string;
  /**
   * Where each instance's run folder lives (instance-files.ts): `volume`, a 1 MiB tmpfs volume of the
   * engine; `bind`, a folder in `runDir`, on the host's disk without a size limit. A rootless engine
   * mounts volumes where this process cannot see them.
   * @default 'volume' on a rootful engine, 'bind' on a rootless one
   */
  runFolders?: RunFolderKind;
  /** @default the built berth-sandboxd of this package */
  agentBinary?: string;
  /** Without one, sandboxes have no way out at all (the agent's proxy port leads nowhere). */
  proxy?: AuthProxy;
  logger: Logger;
  /**
   * What a storage limit does on an engine that cannot enforce one (overlay on ext4): `enforce`
   * fails the create with an InstanceError saying so; `ignore` creates the instance without the
   * limit and logs a warning once.
   * @default 'enforce'
   */
  storageQuota?: 'enforce' | 'ignore';
  /** Most processes one sandbox may run. @default 1024 */
  pidsLimit?: number;
  /** How long a new or restarted instance may take until its agent answers. @default 30000 */
  readyTimeoutMs?: number;
  /**
   * oom_score_adj of each sandbox's agent (PID 1), so that a memory hog rather than the agent is
   * killed. @default -998 when this process may lower OOM scores (see canLowerOomScore), else 0
   */
  agentOomScoreAdj?: number;
}

const INSTANCE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** A hung engine (stopped, swapping) counts as down after this long. */
const ENGINE_PING_TIMEOUT_MS = 3000;

const SOCKET_REPLACED = "its agent's socket was replaced from inside the sandbox (stop and start it to get its agent back)";

export class ContainerDriver implements SandboxDriver {
  readonly kind = 'container' as const;
  private readonly docker: Dockerode;
  private readonly proxies = new Map<string, AuthProxyHandle>();
  private readonly files: InstanceFiles;
  private engine?: Promise<{ podman: boolean; rootless: boolean }>;
  /** Roots the size of their storage limit (quota-root.ts); undefined where the engine cannot have them. */
  private quotaRoots?: Promise<QuotaRoots | undefined>;
  private warnedStorage = false;

  private readonly oomScoreAdj: number;

  constructor(private readonly options: ContainerDriverOptions) {
    this.docker = new Dockerode({ socketPath: options.socketPath });
    this.files = new InstanceFiles(options.runDir, this.docker);
    this.oomScoreAdj = options.agentOomScoreAdj ?? (canLowerOomScore() ? AGENT_OOM_SCORE_ADJ : 0);
    if (this.oomScoreAdj === 0) {
      options.logger.info('cannot lower OOM scores here (no CAP_SYS_RESOURCE): a sandbox agent is as likely an OOM victim as its commands');
    }
  }

  async unavailableReason(): Promise<string | undefined> {
    const agentBinary = this.options.agentBinary ?? agentBinaryPath();
    if (!(await exists(agentBinary))) {
      return `the sandbox agent ${agentBinary} is not built (it needs gcc): run \`apt-get install gcc libc6-dev\` as root, then \`make build\``;
    }
    try {
      // Asked every time (a cheap /_ping): the engine may have gone since the last call.
      // dockerode's ping takes options (an abort signal) that its types leave out.
      const ping = this.docker.ping.bind(this.docker) as unknown as (options: { abortSignal: AbortSignal }) => Promise<unknown>;
      await ping({ abortSignal: AbortSignal.timeout(ENGINE_PING_TIMEOUT_MS) });
      await this.engineInfo();
      return undefined;
    } catch (error) {
      this.engine = undefined;
      return (
        `no container engine answers on ${this.options.socketPath} (${(error as Error).message}): ` +
        'start Docker, or Podman with `podman system service --time=0 unix://<socket>`, and point the sandbox driver at its socket'
      );
    }
  }

  async pullImage(image: ImageSource): Promise<ImageInfo> {
    const reference = withTag(image.reference);
    // Only an image built on this engine (`localhost/…`, nothing to pull) is taken from its store as
    // it is. Any other is asked of its registry every time (layers it has are not fetched again), so
    // that the registry decides who may have it: an image pulled with one tenant's credentials is
    // not handed to another tenant who has none.
    if (registryOf(reference) === 'localhost') {
      const present = await this.imageInfo(reference);
      if (present) return present;
    }
    const { podman } = await this.engineInfo();
    await pullImage(this.docker, image, podman);
    const pulled = await this.imageInfo(reference);
    if (!pulled) throw new ImagePullError(`the engine pulled ${reference} but does not list it`);
    return pulled;
  }

  async create(spec: InstanceSpec): Promise<void> {
    checkName(spec.instance);
    for (const { mountPath } of spec.volumes) {
      // A volume over the agent, its run folder or the host's folder would stand in for them.
      if (mountPath === PLATFORM_MOUNTS || mountPath.startsWith(`${PLATFORM_MOUNTS}/`)) {
        throw new InstanceError(`cannot create sandbox ${spec.instance}: a volume cannot be mounted at ${mountPath} (${PLATFORM_MOUNTS} is the platform's)`);
      }
    }
    const rootUser = isRootUser(spec.image.user ?? (await this.imageInfo(withTag(spec.image.reference)))?.user ?? '');
    const runFolders = this.options.runFolders ?? ((await this.engineInfo()).rootless ? 'bind' : 'volume');
    try {
      const readOnlyFolder = this.files.readOnlyFolder(spec.instance);
      const layout = {
        agentBinary: this.options.agentBinary ?? agentBinaryPath(),
        runFolder: await this.files.prepare(spec.instance, runFolders),
        readOnlyFolder,
        pidsLimit: this.options.pidsLimit ?? 1024,
        proxyCa: await this.writeProxyCa(readOnlyFolder),
        oomScoreAdj: this.oomScoreAdj,
        rootUser,
      };
      const body = containerCreateOptions(spec, layout);
      // Its own root file system (made at its first start) is the limit: the engine's (btrfs
      // qgroups, invisible to df) is not needed.
      if (spec.resources.storageBytes && (await this.roots())) delete body.HostConfig!.StorageOpt;
      await this.createContainer(spec, body);
    } catch (error) {
      // Not made: what was prepared for it goes, unless it is an instance of that name that exists.
      const existing = await this.inspect(spec.instance).catch(() => undefined);
      if (existing?.state === 'missing') {
        await this.files
          .remove(spec.instance)
          .catch((cleanup: unknown) =>
            this.options.logger.error({ err: cleanup, instance: spec.instance }, 'removing the files of a sandbox that could not be created failed'),
          );
      }
      throw error;
    }
    try {
      await this.startAndWait(spec.instance, spec);
    } catch (error) {
      // A sandbox that never answered is of no use to anyone: do not leave it behind.
      await this.remove(spec.instance).catch((cleanup: unknown) =>
        this.options.logger.error({ err: cleanup, instance: spec.instance }, 'removing a sandbox that failed to start failed'),
      );
      throw error;
    }
  }

  /** Creates the container; without its storage limit when the engine cannot enforce one and that is allowed. */
  private async createContainer(spec: InstanceSpec, body: Dockerode.ContainerCreateOptions): Promise<void> {
    try {
      await this.docker.createContainer(body);
    } catch (error) {
      if (body.HostConfig?.StorageOpt && isStorageOptUnsupported(error)) {
        if ((this.options.storageQuota ?? 'enforce') === 'enforce') {
          throw new InstanceError(
            `cannot limit the storage of sandbox ${spec.instance}: the container engine cannot enforce storage quotas ` +
              `(${engineMessage(error)}); put its storage on btrfs or XFS with project quotas, or let the operator run sandboxes without storage limits (SANDBOX_STORAGE_QUOTA=ignore)`,
            { cause: error },
          );
        }
        if (!this.warnedStorage) {
          this.warnedStorage = true;
          this.options.logger.warn({ err: error }, 'the container engine cannot enforce storage quotas: sandboxes run without storage limits');
        }
        delete body.HostConfig.StorageOpt;
        await this.docker.createContainer(body).catch((retry: unknown) => {
          throw this.createError(spec, retry);
        });
      } else {
        throw this.createError(spec, error);
      }
    }
  }

  async stop(instance: string): Promise<void> {
    checkName(instance);
    await writeFile(this.files.marker(instance, 'stopped'), '').catch((error: unknown) => {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new InstanceNotFoundError(instance, { cause: error });
      throw error;
    });
    try {
      // The agent exits on SIGTERM at once (killing its commands); 10 s is for a wedged one.
      await this.docker.getContainer(instance).stop({ t: 10 });
    } catch (error) {
      if (statusOf(error) === 404) throw new InstanceNotFoundError(instance, { cause: error });
      if (statusOf(error) !== 304) throw new InstanceError(`cannot stop sandbox ${instance}: ${engineMessage(error)}`, { cause: error });
    } finally {
      await this.closeProxy(instance);
    }
    // A stopped sandbox holds no mount and no loop device: start mounts its root again.
    await (await this.roots())?.unmount(instance);
    await this.files.unpin(instance);
  }

  async start(instance: string, spec: InstanceSpec): Promise<void> {
    checkName(instance);
    await rm(this.files.marker(instance, 'stopped'), { force: true });
    await this.startAndWait(instance, spec);
  }

  async remove(instance: string): Promise<void> {
    checkName(instance);
    await this.closeProxy(instance);
    try {
      // v: the image's anonymous volumes go too; named volumes outlive the instance.
      await this.docker.getContainer(instance).remove({ force: true, v: true });
    } catch (error) {
      if (statusOf(error) !== 404) throw new InstanceError(`cannot remove sandbox ${instance}: ${engineMessage(error)}`, { cause: error });
    }
    await (await this.roots())?.remove(instance);
    await this.files.remove(instance);
  }

  async removeVolume(volume: string): Promise<void> {
    checkName(volume);
    try {
      await this.docker.getVolume(volume).remove();
    } catch (error) {
      if (statusOf(error) !== 404) throw new InstanceError(`cannot remove volume ${volume}: ${engineMessage(error)}`, { cause: error });
    }
  }

  async inspect(instance: string): Promise<InstanceState> {
    checkName(instance);
    let info: Dockerode.ContainerInspectInfo;
    try {
      info = await this.docker.getContainer(instance).inspect();
    } catch (error) {
      if (statusOf(error) === 404) return { state: 'missing' };
      throw new InstanceError(`cannot inspect sandbox ${instance}: ${engineMessage(error)}`, { cause: error });
    }
    const state = info.State;
    if (state.Running || state.Paused || state.Restarting) return { state: 'running' };
    if (await exists(this.files.marker(instance, 'stopped'))) return { state: 'stopped' };
    if (state.OOMKilled) {
      const limit = info.HostConfig.Memory ? ` (limit ${Math.round(info.HostConfig.Memory / 1024 / 1024)} MiB)` : '';
      return { state: 'failed', reason: `out of memory${limit}` };
    }
    if (state.Status === 'created') return { state: 'failed', reason: 'never started' };
    const detail = state.Error ? `: ${state.Error}` : '';
    return { state: 'failed', reason: `exited with code ${state.ExitCode}${detail}` };
  }

  async list(labels: Record<string, string> = {}): Promise<string[]> {
    const filter = [LABELS.instance, ...Object.entries(labels).map(([key, value]) => `${key}=${value}`)];
    const containers = await this.docker.listContainers({ all: true, filters: { label: filter } });
    return containers.map((container) => container.Labels[LABELS.instance]!).sort();
  }

  async claim(instance: string, sandboxId: string): Promise<boolean> {
    checkName(instance);
    // An agent that answers is a running instance: no engine inspect (~4 ms) needed.
    try {
      const socket = await this.files.agentSocket(instance);
      if (!socket) return false;
      await this.agent(instance, socket).ping(2000);
    } catch (error) {
      this.options.logger.warn({ err: error, instance }, 'a warm sandbox does not answer; not claiming it');
      return false;
    }
    // Exclusive create: of two concurrent claims exactly one makes the file.
    try {
      await writeFile(this.files.marker(instance, 'claimed-by'), sandboxId, { flag: 'wx' });
      return true;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' || code === 'ENOENT') return false;
      throw error;
    }
  }

  async exec(instance: string, spec: ExecSpec): Promise<SandboxProcess> {
    checkName(instance);
    return this.viaAgent(instance, (agent) =>
      agent.spawn({ argv: [spec.shell, '-c', spec.command], fallbackArgv0: '/bin/sh', env: spec.env, ...(spec.cwd ? { cwd: spec.cwd } : {}) }),
    ).catch((error: unknown) => Promise.reject(error instanceof SpawnError ? new CommandStartError(error.message, { cause: error }) : error));
  }

  async writeFile(instance: string, path: string, data: Buffer): Promise<void> {
    checkName(instance);
    return this.viaAgent(instance, (agent) => agent.writeFile(path, data));
  }

  async readFile(instance: string, path: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    checkName(instance);
    return this.viaAgent(instance, (agent) => agent.readFile(path, options.maxBytes));
  }

  async close(): Promise<void> {
    const instances = [...this.proxies.keys()];
    await Promise.all(instances.map((instance) => this.closeProxy(instance)));
  }

  /** Puts the proxy's CA into the read-only folder; false when the proxy has none. */
  private async writeProxyCa(readOnlyFolder: string): Promise<boolean> {
    const pem = this.options.proxy?.caCertPem;
    if (!pem) return false;
    await writeFile(join(readOnlyFolder, PROXY_CA_FILE), pem, { mode: 0o644 });
    return true;
  }

  /** A client that dials only `socket` (or, without an identity, any socket at its path but a symlink). */
  private agent(instance: string, socket: { path: string; identity?: SocketIdentity }): AgentClient {
    return new AgentClient(socket.path, { name: `the agent of sandbox ${instance}`, ...(socket.identity ? { pin: socket.identity } : {}) });
  }

  /** Runs an agent operation on the pinned socket; an unreachable agent becomes InstanceNotFoundError or InstanceError. */
  private async viaAgent<T>(instance: string, operation: (agent: AgentClient) => Promise<T>): Promise<T> {
    const socket = await this.files.agentSocket(instance);
    try {
      if (!socket) throw new AgentError(`no agent of sandbox ${instance} was seen start`);
      return await operation(this.agent(instance, socket));
    } catch (error) {
      if (!(error instanceof AgentError)) throw error;
      const state = await this.inspect(instance);
      if (state.state === 'missing') throw new InstanceNotFoundError(instance, { cause: error });
      let why = state.state === 'failed' ? state.reason : 'it is stopped';
      if (state.state === 'running') {
        if (error instanceof AgentSocketReplacedError) why = SOCKET_REPLACED;
        else if (!socket) why = 'no socket of its agent was recorded when it started (stop and start it)';
        else why = 'its agent does not answer';
      }
      throw new InstanceError(`sandbox ${instance} cannot run commands: ${why}`, { cause: error });
    }
  }

  private async startAndWait(instance: string, spec: InstanceSpec): Promise<void> {
    const path = await this.files.agentSocketPath(instance);
    await this.closeProxy(instance);
    if (this.options.proxy) {
      const socketPath = join(this.files.readOnlyFolder(instance), PROXY_SOCKET);
      this.proxies.set(instance, await this.options.proxy.open(instance, socketPath, spec.egress));
      // For any image USER (connecting needs write permission); only this instance sees the folder.
      await chmod(socketPath, 0o666);
    }
    let started = true;
    try {
      // Its root first (at its first start, after a stop or a reboot); nothing when it runs already.
      await (await this.roots())?.mount(instance, spec.resources.storageBytes);
      await this.docker.getContainer(instance).start();
    } catch (error) {
      // 304: it runs already (a restarted manager reattaching its proxy), which keeps its proxy.
      if (statusOf(error) !== 304) {
        await this.closeProxy(instance);
        if (statusOf(error) === 404) throw new InstanceNotFoundError(instance, { cause: error });
        throw new InstanceError(`cannot start sandbox ${instance}: ${engineMessage(error)}`, { cause: error });
      }
      started = false;
    }
    // It ran while no one watched: only the socket pinned when it started will do.
    const socket = started ? undefined : await this.files.agentSocket(instance);
    if (!started && !socket) {
      // Never pinned (a manager stopped between starting it and pinning): only a restart makes the
      // agent the one process in it again. Its files stay; its processes go.
      this.options.logger.warn({ instance }, 'a running sandbox has no record of its agent socket; restarting it');
      await this.docker
        .getContainer(instance)
        .restart({ t: 10 })
        .catch((error: unknown) => Promise.reject(new InstanceError(`cannot restart sandbox ${instance}: ${engineMessage(error)}`, { cause: error })));
    }
    if (socket) {
      await this.waitReady(instance, socket);
      return;
    }
    // Just started: its agent is the only process in it until it runs a command for us, so the
    // socket that answers first is the agent's. It is the one pinned until the instance stops.
    await this.files.unpin(instance);
    await this.files.pin(instance, { path, identity: await this.waitReady(instance, { path }) });
  }

  /**
   * Until the agent answers (only on the pinned socket when `socket` has an identity); resolves with
   * the socket that answered. Fails early when the container dies (wrong architecture, no agent) or
   * the pinned socket is replaced.
   */
  private async waitReady(instance: string, socket: { path: string; identity?: SocketIdentity }): Promise<SocketIdentity> {
    const agent = this.agent(instance, socket);
    const deadline = Date.now() + (this.options.readyTimeoutMs ?? 30_000);
    let lastError: unknown;
    let nextCheck = Date.now() + 200;
    while (Date.now() < deadline) {
      try {
        return await agent.identify(Math.max(1, Math.min(1000, deadline - Date.now())));
      } catch (error) {
        if (error instanceof AgentSocketReplacedError) throw new InstanceError(`sandbox ${instance} cannot run commands: ${SOCKET_REPLACED}`, { cause: error });
        lastError = error;
      }
      if (Date.now() >= nextCheck) {
        nextCheck = Date.now() + 200;
        const state = await this.inspect(instance);
        if (state.state !== 'running') {
          const logs = await this.logsTail(instance);
          const why = state.state === 'failed' ? state.reason : state.state;
          throw new InstanceError(`sandbox ${instance} did not start: ${why}${logs ? ` — ${logs}` : ''}`, { cause: lastError });
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    throw new InstanceError(`sandbox ${instance} did not answer within ${this.options.readyTimeoutMs ?? 30_000} ms`, { cause: lastError });
  }

  private async logsTail(instance: string): Promise<string> {
    try {
      const output = await this.docker.getContainer(instance).logs({ stdout: true, stderr: true, tail: 5, follow: false });
      return demuxText(output).trim().slice(-500);
    } catch (error) {
      this.options.logger.warn({ err: error, instance }, 'reading the logs of a sandbox that did not start failed');
      return '';
    }
  }

  private async closeProxy(instance: string): Promise<void> {
    const handle = this.proxies.get(instance);
    if (!handle) return;
    this.proxies.delete(instance);
    await handle.close();
  }

  private engineInfo(): Promise<{ podman: boolean; rootless: boolean }> {
    this.engine ??= Promise.all([this.docker.version(), this.docker.info() as Promise<{ SecurityOptions?: string[] }>]).then(([version, info]) => ({
      podman: (version.Components ?? []).some((component) => /podman/i.test(component.Name)),
      // Docker and Podman both list `name=rootless` when the engine runs in a user namespace.
      rootless: (info.SecurityOptions ?? []).some((option) => option.split(',').includes('name=rootless')),
    }));
    return this.engine;
  }

  /** Roots of their limit's size, when this engine can have them (asked once). */
  private roots(): Promise<QuotaRoots | undefined> {
    this.quotaRoots ??= (async () => {
      const engine = await this.engineInfo();
      const store = engine.podman ? await engineStore(this.docker) : undefined;
      const reason = await quotaRootUnavailableReason(engine, store);
      if (reason) {
        this.options.logger.info({ reason }, "sandboxes' roots are the engine's: df inside a sandbox shows the engine's storage, not its limit");
        return undefined;
      }
      return new QuotaRoots(this.docker, store!);
    })().catch((error: unknown) => {
      this.quotaRoots = undefined;
      throw error;
    });
    return this.quotaRoots;
  }

  private async imageInfo(reference: string): Promise<ImageInfo | undefined> {
    try {
      const info = await this.docker.getImage(reference).inspect();
      const digest = info.RepoDigests?.map((repoDigest) => repoDigest.split('@')[1]).find(Boolean);
      return { ...(digest ? { digest } : {}), user: info.Config.User ?? '', workingDir: info.Config.WorkingDir ?? '', sizeBytes: info.Size };
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw new ImagePullError(`cannot inspect image ${reference}: ${engineMessage(error)}`, { cause: error });
    }
  }

  private createError(spec: InstanceSpec, error: unknown): InstanceError {
    // Docker answers 409; Podman 4.3 a 500 saying the name "is already in use".
    if (statusOf(error) === 409 || /name .* is already in use/.test(engineMessage(error))) {
      return new InstanceError(`sandbox instance ${spec.instance} already exists`, { cause: error });
    }
    if (statusOf(error) === 404) {
      return new InstanceError(`cannot create sandbox ${spec.instance}: image ${spec.image.reference} is not pulled`, { cause: error });
    }
    return new InstanceError(`cannot create sandbox ${spec.instance}: ${engineMessage(error)}`, { cause: error });
  }
}

function checkName(name: string): void {
  // Names become host paths (run folders): nothing but a DNS-1123 label gets that far.
  if (!INSTANCE_NAME.test(name)) throw new InstanceError(`${JSON.stringify(name)} is not a valid instance name (a DNS-1123 label)`);
}

function statusOf(error: unknown): number | undefined {
  return (error as { statusCode?: number }).statusCode;
}

function engineMessage(error: unknown): string {
  const json = (error as { json?: { message?: string } | null }).json;
  return json?.message ?? (error instanceof Error ? error.message : String(error));
}

function isStorageOptUnsupported(error: unknown): boolean {
  return /storage.?opt|quota|unknown option size|not supported.*size|size.*not supported/i.test(engineMessage(error));
}

function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** Docker's multiplexed log stream (8-byte frame headers) or plain text, as text. */
function demuxText(output: Buffer | NodeJS.ReadableStream): string {
  if (!Buffer.isBuffer(output)) return '';
  const parts: Buffer[] = [];
  let offset = 0;
  while (offset + 8 <= output.length && output[offset]! <= 2 && output.readUInt16BE(offset + 1) === 0) {
    const size = output.readUInt32BE(offset + 4);
    parts.push(output.subarray(offset + 8, offset + 8 + size));
    offset += 8 + size;
  }
  return parts.length ? Buffer.concat(parts).toString('utf8') : output.toString('utf8');
}
