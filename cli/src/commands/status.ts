/**
 * `berth status`: is the platform `berth up` started here running, and is it ready? With `--url`,
 * the readiness of that gateway instead.
 */
import { gatewayUrl, type ConnectionFlags } from '../connection.js';
import type { CliEnv } from '../env.js';
import { StateDir, isAlive, type PlatformState } from '../state.js';

export interface StatusFlags extends Pick<ConnectionFlags, 'url' | 'host'> {
  json?: boolean;
}

interface Readiness {
  status: string;
  checks: Record<string, { status: string; detail?: string }>;
  /** New at every start of a gateway: tells the platform `berth up` started from another program on its port. */
  instance_id?: string;
}

/** What `--json` prints. */
interface StatusReport {
  url: string | null;
  running: boolean;
  ready: boolean;
  platform?: Pick<PlatformState, 'pid' | 'started_at'>;
  checks?: Readiness['checks'];
  /** Something else answers at the URL of the platform `berth up` started (it is gone). */
  impostor?: true;
}

export async function status(env: CliEnv, flags: StatusFlags, print: (line: string) => void): Promise<boolean> {
  const report = await check(env, flags);
  if (flags.json) {
    print(JSON.stringify(report));
    return report.ready;
  }
  if (!report.url) {
    print('Berth is not running (start it with `make up`)');
    return false;
  }
  if (report.impostor) {
    print(`Berth is not running: another program answers at ${report.url} (start Berth with \`make up\`)`);
    return false;
  }
  print(report.platform ? `Berth is running at ${report.url} (pid ${report.platform.pid}, since ${report.platform.started_at})` : `Berth at ${report.url}`);
  if (!report.checks) {
    print('  readiness: no answer');
    return false;
  }
  for (const [name, check] of Object.entries(report.checks)) {
    print(`  ${name.padEnd(16)} ${check.status}${check.detail ? ` (${check.detail})` : ''}`);
  }
  return report.ready;
}

async function check(env: CliEnv, flags: StatusFlags): Promise<StatusReport> {
  let platform: PlatformState | undefined;
  let url: string;
  if (flags.url !== undefined || flags.host !== undefined) {
    url = await gatewayUrl(env, flags);
  } else {
    platform = await new StateDir(env.stateDir).readPlatform();
    if (!platform || !isAlive(platform.pid)) return { url: null, running: false, ready: false };
    url = platform.url;
  }
  const readiness = await readyz(url);
  if (platform?.instance_id && readiness && readiness.instance_id !== platform.instance_id) return { url, running: false, ready: false, impostor: true };
  return {
    url,
    running: platform !== undefined || readiness !== undefined,
    // Degraded: serving, with a part down that does not stop it (sandboxes); the checks say which.
    ready: readiness?.status === 'ok' || readiness?.status === 'degraded',
    ...(platform ? { platform: { pid: platform.pid, started_at: platform.started_at } } : {}),
    ...(readiness ? { checks: readiness.checks } : {}),
  };
}

/** The gateway's readiness answer (a 503 has one too), or undefined when it does not answer one. */
async function readyz(url: string): Promise<Readiness | undefined> {
  try {
    const body = (await (await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5000) })).json()) as Partial<Readiness>;
    return typeof body.status === 'string' && body.checks && typeof body.checks === 'object' ? (body as Readiness) : undefined;
  } catch {
    // Refused, timed out or not JSON: reported as "no answer".
    return undefined;
  }
}
