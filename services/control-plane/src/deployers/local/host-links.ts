/**
 * The host side of what an agent server in a container may reach (it has no network but
 * loopback): Unix sockets that the control plane serves in a folder of the revision's own,
 * mounted read-only into its container at `/run/berth`. Each bridge leads to one destination the
 * platform chose (the deployment's Postgres, its Redis, the gateway its traces go to); the
 * `proxy` socket is the egress proxy, which refuses loopback, private, link-local and metadata
 * addresses unless the operator allows their ranges. The container only ever connects to these
 * sockets: it cannot create, replace or move them, and the host never dials anything the container
 * made. The folder is root's; the sockets belong to the deployment's uid (0600).
 */
import { chmod, chown, mkdir, rm } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import type { Logger } from '@berth/log';
import { SandboxProxy } from '@berth/sandbox-manager';

/** Where a bridge leads. */
export interface LinkTarget {
  host: string;
  port: number;
}

export interface HostLinksOptions {
  /** The revision's folder (created here, removed by close()). */
  dir: string;
  /** Owner of the sockets: the deployment's uid and gid. */
  owner: { uid: number; gid: number };
  /** Socket name → destination. */
  bridges: Record<string, LinkTarget>;
  /** Private CIDRs the egress proxy lets through (BERTH_DEPLOYMENT_PRIVATE_EGRESS). */
  privateEgress: string[];
  logger: Logger;
}

/** The egress proxy's socket in the folder. */
export const PROXY_SOCKET = 'proxy.sock';

export class HostLinks {
  private constructor(
    private readonly dir: string,
    private readonly servers: net.Server[],
    private readonly proxy: SandboxProxy,
    private readonly connections: Set<net.Socket>,
  ) {}

  static async open(options: HostLinksOptions): Promise<HostLinks> {
    const { dir, owner } = options;
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true, mode: 0o711 });
    const connections = new Set<net.Socket>();
    const servers: net.Server[] = [];
    const proxy = new SandboxProxy({
      listen: { path: join(dir, PROXY_SOCKET) },
      policy: { rules: [], allowList: [], denyList: [], privateAllow: options.privateEgress },
      logger: options.logger,
    });
    const links = new HostLinks(dir, servers, proxy, connections);
    try {
      await proxy.listen();
      for (const [name, target] of Object.entries(options.bridges)) servers.push(await bridge(join(dir, name), target, connections));
      for (const name of [PROXY_SOCKET, ...Object.keys(options.bridges)]) {
        await chown(join(dir, name), owner.uid, owner.gid);
        await chmod(join(dir, name), 0o600);
      }
    } catch (error) {
      await links.close();
      throw error;
    }
    return links;
  }

  /** Stops serving (connections in flight are cut) and removes the folder. */
  async close(): Promise<void> {
    for (const socket of this.connections) socket.destroy();
    await Promise.all([this.proxy.close(), ...this.servers.map((server) => new Promise((resolve) => server.close(resolve)))]);
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** Serves `path`: every connection is piped to `target`. */
function bridge(path: string, target: LinkTarget, connections: Set<net.Socket>): Promise<net.Server> {
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: target.host, port: target.port, noDelay: true });
    for (const socket of [client, upstream]) {
      connections.add(socket);
      socket.once('close', () => connections.delete(socket));
    }
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.pipe(upstream).pipe(client);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}
