/**
 * The credentials `berth login` stores for the user (not per project): which gateway, the bearer
 * token it received, and whom that token acts for. One file, mode 0600, in a 0700 folder.
 */
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

export interface LoginCredentials {
  /** Gateway base URL, without a trailing slash. */
  host: string;
  /** Bearer access token. */
  token: string;
  tenant_id: string;
  tenant_name: string;
  role: string;
  created_at: string;
}

export class LoginFile {
  constructor(readonly path: string) {}

  /** The stored credentials, or undefined when there are none (or the file is unreadable). */
  async read(): Promise<LoginCredentials | undefined> {
    try {
      const parsed = JSON.parse(await readFile(this.path, 'utf8')) as Partial<LoginCredentials>;
      return typeof parsed.host === 'string' && typeof parsed.token === 'string' ? (parsed as LoginCredentials) : undefined;
    } catch {
      return undefined;
    }
  }

  /** Writes atomically (temp file + rename), so a crash never leaves half a token behind. */
  async write(credentials: LoginCredentials): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true, mode: 0o700 });
    const temp = `${this.path}.${process.pid}.tmp`;
    await writeFile(temp, JSON.stringify(credentials, null, 2) + '\n', { mode: 0o600 });
    // The mode given to writeFile is masked by the umask; make sure.
    await chmod(temp, 0o600);
    await rename(temp, this.path);
  }

  /** Removes the file; true when there was one. */
  async remove(): Promise<boolean> {
    const existed = (await this.read()) !== undefined;
    await rm(this.path, { force: true });
    return existed;
  }
}

/** `http://host:port` from what a person types (`localhost:8080`, `https://berth.example.com/`). */
export function normalizeHost(value: string): string | undefined {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`;
  try {
    const url = new URL(withScheme);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
    return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
  } catch {
    return undefined;
  }
}

/** True when two base URLs name the same gateway (a token is never sent anywhere else). */
export function sameHost(a: string, b: string): boolean {
  return normalizeHost(a) === normalizeHost(b);
}
