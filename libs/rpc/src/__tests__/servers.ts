/** Test helpers: real servers on 127.0.0.1 port 0, closed after each test. */
import type { Logger } from '@berth/log';
import { createRpcServer, type RpcServer } from '../server.js';

export { captureLogger } from '@berth/testing';

export interface StartedServer {
  server: RpcServer;
  address: string;
  port: number;
}

/** Tracks servers and clients so `afterEach` can close them all. */
export class Cleanup {
  private readonly tasks: (() => unknown)[] = [];

  add(task: () => unknown): void {
    this.tasks.push(task);
  }

  async run(): Promise<void> {
    for (const task of this.tasks.splice(0).reverse()) await task();
  }

  /** Creates a server, lets `setup` add services, listens on 127.0.0.1:0. */
  async server(setup: (server: RpcServer) => void, logger?: Logger): Promise<StartedServer> {
    const server = createRpcServer({ logger, shutdownTimeoutMs: 500 });
    setup(server);
    const { address, port } = await server.listen('127.0.0.1', 0);
    this.add(() => server.close());
    return { server, address, port };
  }
}

/** A port nothing listens on (bound once, then released). */
export async function closedPort(): Promise<number> {
  const server = createRpcServer();
  const { port } = await server.listen('127.0.0.1', 0);
  await server.close();
  return port;
}

/** Resolves when `signal` aborts, with its reason. */
export function aborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener('abort', () => resolve(signal.reason), { once: true });
  });
}

/** Sleeps `ms`, or until `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

/** EchoService's streaming-request methods, for tests that do not exercise them. */
export const streamingEcho = {
  collect: async (requests: AsyncIterable<{ message: string }>) => {
    const parts: string[] = [];
    for await (const request of requests) parts.push(request.message);
    return { message: parts.join(' ') };
  },
  chat: async function* (requests: AsyncIterable<{ message: string }>) {
    for await (const request of requests) yield { message: request.message };
  },
};
