/**
 * An agent server in a container of the local deployer has no network but loopback. What it may
 * reach, the control plane serves as Unix sockets in a folder mounted read-only into the container
 * (the container only ever connects to them): the deployment's Postgres (used by path), its Redis,
 * the gateway its traces go to, and the egress proxy. The others are bridged here to loopback ports,
 * so clients keep their TCP URLs; `fetch` goes through the egress proxy, which refuses what the
 * platform's policy refuses (loopback, private and metadata addresses). Code that ignores the
 * proxy has no network at all.
 */
import net from 'node:net';
import { Agent, Dispatcher, ProxyAgent, setGlobalDispatcher } from 'undici';

/** A loopback port inside, and the host's Unix socket it leads to. */
export interface HostLink {
  port: number;
  socketPath: string;
}

/** Parses `BERTH_HOST_LINKS`: `port=/socket/path` pairs, comma-separated. */
export function parseHostLinks(text: string): HostLink[] {
  return text
    .split(',')
    .filter(Boolean)
    .map((pair) => {
      const [port, socketPath] = pair.split('=', 2);
      if (!/^\d{1,5}$/.test(port ?? '') || Number(port) > 65535 || !socketPath?.startsWith('/')) {
        throw new TypeError(`not a host link (port=/socket/path): ${JSON.stringify(pair)}`);
      }
      return { port: Number(port), socketPath };
    });
}

/** Listens on 127.0.0.1:port for each link and pipes every connection to its socket. */
export async function openHostLinks(links: HostLink[]): Promise<{ close(): Promise<void> }> {
  const servers = await Promise.all(
    links.map(
      ({ port, socketPath }) =>
        new Promise<net.Server>((resolve, reject) => {
          const server = net.createServer((client) => {
            const host = net.connect(socketPath);
            client.setNoDelay(true);
            client.pipe(host).pipe(client);
            client.on('error', () => host.destroy());
            host.on('error', () => client.destroy());
          });
          server.once('error', reject);
          server.listen(port, '127.0.0.1', () => resolve(server));
        }),
    ),
  );
  return { close: async () => void (await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))) };
}

/** Hosts that are the container itself (its own server, the links above): never proxied. */
const DIRECT = new Set(['localhost', '127.0.0.1', '::1']);

function isDirect(origin: string | URL | undefined): boolean {
  return origin !== undefined && DIRECT.has(new URL(origin).hostname.replace(/^\[|\]$/g, ''));
}

/** Sends `fetch` to every host but the container itself through the HTTP proxy at `proxyUrl` (tunnelled with CONNECT). */
export function sendFetchThroughProxy(proxyUrl: string): void {
  const direct = new Agent();
  const proxied = new ProxyAgent(proxyUrl);
  class ProxyUnlessDirect extends Dispatcher {
    override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandlers): boolean {
      return (isDirect(options.origin) ? direct : proxied).dispatch(options, handler);
    }
    override async close(): Promise<void> {
      await Promise.all([direct.close(), proxied.close()]);
    }
    override async destroy(): Promise<void> {
      await Promise.all([direct.destroy(), proxied.destroy()]);
    }
  }
  setGlobalDispatcher(new ProxyUnlessDirect());
}
