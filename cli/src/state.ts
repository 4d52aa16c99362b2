/**
 * Files of the embedded stack under the state folder (default `.berth/`).
 */
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CliError } from './client.js';

export interface Credentials {
  gateway_url: string;
  tenant_id: string;
  api_key: string;
}

export interface PlatformState {
  pid: number;
  port: number;
  url: string;
  /** The gateway's id for this start (its `/readyz` answers it): tells this platform from another process on the port. */
  instance_id: string;
  started_at: string;
  /** The platform's line on sandboxes (their engine, or OFF and why), shown by `berth up`. */
  sandboxes?: string;
  /** The platform's line on how deployments are contained, shown by `berth up`. */
  isolation?: string;
}

export class StateDir {
  constructor(readonly root: string) {}

  get postgresDir(): string {
    return join(this.root, 'postgres');
  }
  get credentialsFile(): string {
    return join(this.root, 'credentials.json');
  }
  get platformFile(): string {
    return join(this.root, 'platform.json');
  }
  /** The gateway's port, kept across `down`/`up`: deployment URLs and saved credentials use it. */
  get gatewayPortFile(): string {
    return join(this.root, 'gateway-port');
  }
  get logFile(): string {
    return join(this.root, 'logs', 'platform.log');
  }

  async ensure(): Promise<void> {
    await mkdir(join(this.root, 'logs'), { recursive: true });
    // Agent servers (other OS users) pass through to their own folders here but list nothing;
    // the logs, like the credentials and the secret key, are the platform's alone.
    await chmod(this.root, 0o711);
    await chmod(join(this.root, 'logs'), 0o700);
  }

  async readCredentials(): Promise<Credentials | undefined> {
    return readJson<Credentials>(this.credentialsFile);
  }

  async writeCredentials(credentials: Credentials): Promise<void> {
    await writeFile(this.credentialsFile, JSON.stringify(credentials, null, 2) + '\n', { mode: 0o600 });
    await chmod(this.credentialsFile, 0o600);
  }

  async readPlatform(): Promise<PlatformState | undefined> {
    return readJson<PlatformState>(this.platformFile);
  }

  async writePlatform(state: PlatformState): Promise<void> {
    await writeFile(this.platformFile, JSON.stringify(state, null, 2) + '\n');
  }

  async clearPlatform(): Promise<void> {
    await rm(this.platformFile, { force: true });
  }

  async readGatewayPort(): Promise<number | undefined> {
    let text: string;
    try {
      text = (await readFile(this.gatewayPortFile, 'utf8')).trim();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    const port = Number(text);
    if (!/^\d+$/.test(text) || port < 1 || port > 65535) throw new CliError(`${this.gatewayPortFile} holds "${text}", not a port: fix or delete it`);
    return port;
  }

  async writeGatewayPort(port: number): Promise<void> {
    await writeFile(this.gatewayPortFile, `${port}\n`);
  }
}

async function readJson<T>(file: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

/** True when a process with this pid exists. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
