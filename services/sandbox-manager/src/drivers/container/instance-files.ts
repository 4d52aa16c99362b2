/**
 * What the host keeps of a container instance, and where its agent's socket is. Under `runDir`
 * (which only this process may enter):
 * - the run folder, mounted read-write at /.berth/run: the sandbox's to change. The agent makes its
 *   socket `agent.sock` there (it must: it runs as the sandbox's user). Either a tmpfs volume of
 *   the engine (`volume`: 1 MiB, new at every start, its pages charged to the sandbox's memory) or
 *   the folder `<instance>/` (`bind`: on the host's disk, without a size limit).
 * - `<instance>.ro/`, mounted read-only at /.berth/host: the auth proxy's socket `proxy.sock` (the
 *   host listens, the agent connects) and its CA. The sandbox can use them, not replace them.
 * - `<instance>.host/`, not mounted: the `stopped` and `claimed-by` markers the engine has no place
 *   for, and the record of the agent's socket (so that a restarted manager keeps it).
 *
 * The host never trusts a path in the run folder: it dials only the socket the agent made when
 * the instance started (its identity, pinned; agent/socket-file.ts), never through a symlink, and
 * writes nothing there.
 */
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import type { SocketIdentity } from '../../agent/socket-file.js';
import { InstanceError, InstanceNotFoundError } from '../driver.js';
import { AGENT_SOCKET, HOST_MOUNT, LABELS, PROXY_SOCKET, RUN_MOUNT } from './container-spec.js';

/** Where run folders live: see the file comment. */
export type RunFolderKind = 'volume' | 'bind';

/** 256 pages (1 MiB) and 64 inodes: the agent's socket and the CA bundle (~200 KiB) fit. */
const RUN_VOLUME_OPTIONS = { type: 'tmpfs', device: 'tmpfs', o: 'nr_blocks=256,nr_inodes=64,mode=1777' };

/** The socket the agent made when its instance last started: where it is on the host and which it is. */
export interface AgentSocket {
  path: string;
  identity: SocketIdentity;
}

/** In the marker folder: the instance's AgentSocket, as JSON. */
const AGENT_SOCKET_RECORD = 'agent-socket.json';

/**
 * The longest path below the run directory where the host binds a Unix socket (an instance's auth
 * proxy, for the platform's `berth-sbx-` + 16 character names): the run directory's path plus this
 * must fit a socket address (107 bytes). The agent's socket is never dialled by its path.
 */
export const LONGEST_SOCKET_SUFFIX = `/berth-sbx-${'x'.repeat(16)}.ro/${PROXY_SOCKET}`;

export class InstanceFiles {
  /** Agent sockets of running instances, as recorded in their marker folders. */
  private readonly sockets = new Map<string, AgentSocket>();

  constructor(
    private readonly runDir: string,
    private readonly docker: Dockerode,
  ) {}

  /** Makes the instance's folders (and run volume); resolves with the bind source of its run folder. */
  async prepare(instance: string, kind: RunFolderKind): Promise<string> {
    await mkdir(this.runDir, { recursive: true });
    await chmod(this.runDir, 0o700);
    // Whoever the image's USER is must reach the proxy's socket and CA.
    await mkdir(this.readOnlyFolder(instance), { recursive: true });
    await chmod(this.readOnlyFolder(instance), 0o755);
    await mkdir(this.markerFolder(instance), { recursive: true, mode: 0o700 });
    if (kind === 'volume') {
      const name = runVolumeName(instance);
      await this.docker.createVolume({ Name: name, DriverOpts: RUN_VOLUME_OPTIONS, Labels: { [LABELS.instance]: instance } });
      return name;
    }
    const folder = this.bindFolder(instance);
    await mkdir(folder, { recursive: true });
    // Sticky and world-writable: the agent runs as the image's USER, whoever that is.
    await chmod(folder, 0o1777);
    return folder;
  }

  /** What the host serves the instance: mounted read-only. */
  readOnlyFolder(instance: string): string {
    return join(this.runDir, `${instance}.ro`);
  }

  /** The host's own records of an instance: not mounted, so out of the sandbox's reach. */
  marker(instance: string, name: 'stopped' | 'claimed-by'): string {
    return join(this.markerFolder(instance), name);
  }

  /**
   * Where the instance's agent makes its socket on the host: in the run folder the engine mounts
   * (a volume's mount point, a bind's folder), as the engine reports it. InstanceError for an
   * instance whose mounts are not this layout's (made by an earlier version).
   */
  async agentSocketPath(instance: string): Promise<string> {
    let info: Dockerode.ContainerInspectInfo;
    try {
      info = await this.docker.getContainer(instance).inspect();
    } catch (error) {
      if ((error as { statusCode?: number }).statusCode === 404) throw new InstanceNotFoundError(instance, { cause: error });
      throw new InstanceError(`cannot inspect sandbox ${instance}: ${(error as Error).message}`, { cause: error });
    }
    const source = (destination: string) => info.Mounts.find((mount) => mount.Destination === destination)?.Source;
    const runFolder = source(RUN_MOUNT);
    if (!runFolder || !source(HOST_MOUNT)) {
      throw new InstanceError(`sandbox ${instance} was made by an earlier version of Berth, with other folders: delete it and create it again`);
    }
    return join(runFolder, AGENT_SOCKET);
  }

  /** The instance's agent socket, pinned when it last started; undefined since it stopped. */
  async agentSocket(instance: string): Promise<AgentSocket | undefined> {
    const known = this.sockets.get(instance);
    if (known) return known;
    let text: string;
    try {
      text = await readFile(join(this.markerFolder(instance), AGENT_SOCKET_RECORD), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    const socket = JSON.parse(text) as AgentSocket;
    this.sockets.set(instance, socket);
    return socket;
  }

  async pin(instance: string, socket: AgentSocket): Promise<void> {
    await writeFile(join(this.markerFolder(instance), AGENT_SOCKET_RECORD), JSON.stringify(socket), { mode: 0o600 });
    this.sockets.set(instance, socket);
  }

  async unpin(instance: string): Promise<void> {
    this.sockets.delete(instance);
    await rm(join(this.markerFolder(instance), AGENT_SOCKET_RECORD), { force: true });
  }

  /** Removes everything of an instance whose container is gone. */
  async remove(instance: string): Promise<void> {
    this.sockets.delete(instance);
    try {
      await this.docker.getVolume(runVolumeName(instance)).remove();
    } catch (error) {
      if ((error as { statusCode?: number }).statusCode !== 404) throw error;
    }
    // Nothing of the sandbox runs any more, so nothing changes its folder while it goes (and rm
    // never follows a symlink in it).
    await rm(this.bindFolder(instance), { recursive: true, force: true });
    await rm(this.readOnlyFolder(instance), { recursive: true, force: true });
    await rm(this.markerFolder(instance), { recursive: true, force: true });
  }

  private markerFolder(instance: string): string {
    return join(this.runDir, `${instance}.host`);
  }

  private bindFolder(instance: string): string {
    return join(this.runDir, instance);
  }
}

function runVolumeName(instance: string): string {
  return `${instance}-run`;
}
