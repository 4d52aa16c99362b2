/**
 * Files of the embedded stack under the state folder (default `.berth/`).
 */
import { readFileSync } from 'node:fs';
import { chmod, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { processAlive } from '@berth/local-stack';
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

/** What the supervisor of `berth up` runs, as it records it for `berth status` and `berth down`. */
export interface SupervisorRecord {
  pid: number;
  started_at: string;
  /** In start order: postgres (unless DATABASE_URL), the sandbox engine (where one runs), the platform. */
  units: Partial<Record<SupervisedUnitName, SupervisedUnitRecord>>;
}

export type SupervisedUnitName = 'postgres' | 'sandbox engine' | 'platform';

export interface SupervisedUnitRecord {
  state: 'starting' | 'running' | 'restarting' | 'stopping';
  pid?: number;
  /** Running since. */
  since?: string;
  /** How often it ended unasked (and was started again, or is being). */
  restarts: number;
  /** Its last unasked end: why, and when. */
  last_exit?: { reason: string; at: string };
  /** While restarting: when the next try is, and why the last one failed (if one did). */
  restart_at?: string;
  start_error?: string;
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
  get supervisorFile(): string {
    return join(this.root, 'supervisor.json');
  }
  get supervisorLogFile(): string {
    return join(this.root, 'logs', 'supervisor.log');
  }
  /** The private sandbox engine's own messages. */
  get engineLogFile(): string {
    return join(this.root, 'logs', 'sandbox-engine.log');
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
    await replaceJson(this.platformFile, state);
  }

  async clearPlatform(): Promise<void> {
    await rm(this.platformFile, { force: true });
  }

  async readSupervisor(): Promise<SupervisorRecord | undefined> {
    return readJson<SupervisorRecord>(this.supervisorFile);
  }

  async writeSupervisor(record: SupervisorRecord): Promise<void> {
    await replaceJson(this.supervisorFile, record);
  }

  async clearSupervisor(): Promise<void> {
    await rm(this.supervisorFile, { force: true });
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

/** Writes a file whole (aside, then renamed over it): the supervisor rewrites it while others read it. */
async function replaceJson(file: string, value: unknown): Promise<void> {
  const aside = `${file}.${process.pid}`;
  await writeFile(aside, JSON.stringify(value, null, 2) + '\n');
  await rename(aside, file);
}

async function readJson<T>(file: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

/** True when the recorded supervisor runs: its pid is alive and is a `berth supervise` (not a process that got its pid since). */
export function supervisorAlive(record: SupervisorRecord): boolean {
  return runsBerth(record.pid, 'supervise');
}

/** True when the recorded platform process runs (a `berth serve`, not a process that got its pid since). */
export function platformAlive(platform: PlatformState): boolean {
  return runsBerth(platform.pid, 'serve');
}

function runsBerth(pid: number, command: string): boolean {
  if (!processAlive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(command);
  } catch {
    // No /proc: the pid is all there is to go by.
    return true;
  }
}

/** Lines of a log shown when a start fails. */
const LOG_TAIL_LINES = 30;

/** The size of a log file now (0 when there is none): where the lines of what starts next begin. */
export async function logSize(file: string): Promise<number> {
  return stat(file).then(
    (s) => s.size,
    () => 0,
  );
}

/** The lines logged to `file` since `from` (bytes), the last ones only, to explain a failed start. */
export async function logTail(file: string, from: number): Promise<string> {
  const text = await readFile(file).then(
    (all) => all.subarray(from).toString('utf8'),
    () => '',
  );
  const lines = text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .slice(-LOG_TAIL_LINES);
  return lines.length ? `the end of ${file}:\n${lines.map((line) => `  ${line}`).join('\n')}` : `(nothing in ${file})`;
}
