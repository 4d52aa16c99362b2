/**
 * A throwaway redis-server on 127.0.0.1 (no persistence), for tests and for trying the
 * production (Redis) mode locally. The binary comes from the system (`apt-get install redis-server`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createConnection } from 'node:net';
import { freePort } from './ports.js';
import { sleep } from './run.js';

export interface RedisServerOptions {
  /** 0 or unset = any free port. */
  port?: number;
  /** Path of redis-server; found on PATH or in /usr/bin when unset. */
  binary?: string;
}

export function findRedisServer(): string | undefined {
  for (const candidate of ['/usr/bin/redis-server', '/usr/local/bin/redis-server', '/usr/sbin/redis-server']) {
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

export class RedisServer {
  private child?: ChildProcess;
  port = 0;

  constructor(private readonly options: RedisServerOptions = {}) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<{ url: string; pid: number }> {
    const binary = this.options.binary ?? findRedisServer();
    if (!binary) throw new Error('redis-server not found: install it with `apt-get install redis-server`');
    this.port = this.options.port || (await freePort());
    const child = spawn(binary, ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'yes'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: false,
    });
    this.child = child;
    let stderr = '';
    child.stderr?.on('data', (chunk) => (stderr += String(chunk)));
    const deadline = Date.now() + 10_000;
    while (!(await ping(this.port))) {
      if (child.exitCode !== null) throw new Error(`redis-server exited: ${stderr}`);
      if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${this.port}`);
      await sleep(50);
    }
    return { url: this.url, pid: child.pid! };
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.setTimeout(1000);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => {
      socket.destroy();
      resolve(String(data).startsWith('+PONG'));
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}
