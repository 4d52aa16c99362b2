/**
 * A throwaway image registry on 127.0.0.1 over plain HTTP (Debian's `docker-registry`, the CNCF
 * distribution registry), storing images in a folder. With `users` it asks for HTTP basic auth
 * (htpasswd with bcrypt hashes — the only kind the registry accepts), so that pulls with
 * registry credentials can be tried without a real private registry.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { freePort } from './ports.js';
import { run, sleep } from './run.js';

export interface DockerRegistryOptions {
  /** Folder of ours for the configuration and the images. */
  directory: string;
  /** 0 or unset = any free port. */
  port?: number;
  /** Username → password; when set, every request needs basic auth. */
  users?: Record<string, string>;
  /** @default 'docker-registry' on PATH */
  binary?: string;
}

export class DockerRegistry {
  private child?: ChildProcess;
  port = 0;

  constructor(private readonly options: DockerRegistryOptions) {}

  /** `127.0.0.1:PORT`, the registry part of image references. */
  get host(): string {
    return `127.0.0.1:${this.port}`;
  }

  async start(): Promise<{ host: string }> {
    const dir = this.options.directory;
    await mkdir(join(dir, 'data'), { recursive: true });
    this.port = this.options.port || (await freePort());
    const users = Object.entries(this.options.users ?? {});
    if (users.length) {
      const lines = await Promise.all(users.map(async ([user, password]) => `${user}:${await bcrypt(password)}`));
      await writeFile(join(dir, 'htpasswd'), lines.join('\n') + '\n', { mode: 0o600 });
    }
    // The registry reads YAML; JSON is YAML.
    const config = {
      version: 0.1,
      log: { level: 'error', accesslog: { disabled: true } },
      storage: { filesystem: { rootdirectory: join(dir, 'data') }, delete: { enabled: true } },
      http: { addr: this.host },
      ...(users.length ? { auth: { htpasswd: { realm: 'berth-test', path: join(dir, 'htpasswd') } } } : {}),
    };
    await writeFile(join(dir, 'config.yml'), JSON.stringify(config, null, 2));
    const child = spawn(this.options.binary ?? 'docker-registry', ['serve', join(dir, 'config.yml')], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    this.child = child;
    let stderr = '';
    child.stderr?.on('data', (chunk) => (stderr = (stderr + String(chunk)).slice(-4000)));
    const deadline = Date.now() + 10_000;
    while (!(await answers(this.port))) {
      if (child.exitCode !== null) throw new Error(`docker-registry exited: ${stderr.trim()}`);
      if (Date.now() > deadline) throw new Error(`docker-registry did not answer on ${this.host}: ${stderr.trim()}`);
      await sleep(30);
    }
    return { host: this.host };
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
}

const BCRYPT_ALPHABET = './ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/**
 * A bcrypt hash through the system's crypt(3) (libxcrypt, via Perl, which every Debian has):
 * Node has no bcrypt, and `htpasswd` (apache2-utils) is rarely installed.
 */
async function bcrypt(password: string): Promise<string> {
  // 22 salt characters; the last one carries only 2 bits, so it is one of `.Oeu`.
  const salt = [...randomBytes(21)].map((byte) => BCRYPT_ALPHABET[byte % 64]).join('') + '.Oeu'[randomBytes(1)[0]! % 4];
  const { stdout } = await run('perl', ['-e', 'print crypt($ARGV[0], $ARGV[1])', password, `$2b$05$${salt}`]);
  if (!stdout.startsWith('$2b$')) throw new Error(`this system's crypt(3) has no bcrypt (got ${JSON.stringify(stdout.slice(0, 4))})`);
  return stdout;
}

/** Any HTTP answer on /v2/ (401 included when auth is on). */
function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/v2/', timeout: 1000 }, (res) => {
      res.resume();
      resolve(true);
    });
    req.once('error', () => resolve(false));
    req.once('timeout', () => {
      req.destroy();
      resolve(false);
    });
    req.end();
  });
}
