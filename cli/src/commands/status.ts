/**
 * `berth status`: is the platform `berth up` started running, and is it ready; what its
 * supervisor runs (Postgres, the sandbox engine, the platform) and how often it restarted each.
 * The platform is the one the deploy commands reach from this folder (connection.ts): this
 * folder's, else the checkout's. With `--url` (or BERTH_HOST_URL), the readiness of that gateway instead.
 */
import { gatewayUrl, localPlatform, type ConnectionFlags } from '../connection.js';
import type { CliEnv } from '../env.js';
import { processAlive } from '@berth/local-stack';
import { supervisorAlive, type PlatformState, type SupervisedUnitRecord, type SupervisorRecord } from '../state.js';

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
  /** The supervisor `berth up` left running, and what it runs; `running: false` when it is gone. */
  supervisor?: (SupervisorRecord & { running: true }) | { running: false };
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
    print(report.supervisor?.running ? 'Berth is starting or restarting its platform' : 'Berth is not running (start it with `make up`)');
  } else if (report.impostor) {
    print(`Berth is not running: another program answers at ${report.url} (start Berth with \`make up\`)`);
  } else {
    print(report.platform ? `Berth is running at ${report.url} (pid ${report.platform.pid}, since ${report.platform.started_at})` : `Berth at ${report.url}`);
  }
  printSupervision(report.supervisor, print);
  if (!report.url || report.impostor) return false;
  if (!report.checks) {
    print('  readiness: no answer');
    return false;
  }
  for (const [name, check] of Object.entries(report.checks)) {
    print(`  ${name.padEnd(16)} ${check.status}${check.detail ? ` (${check.detail})` : ''}`);
  }
  return report.ready;
}

function printSupervision(supervisor: StatusReport['supervisor'], print: (line: string) => void): void {
  if (!supervisor) return;
  if (!supervisor.running) {
    print('  supervisor: NOT running (it was stopped): nothing restarts a crashed process; `berth up` starts it again');
    return;
  }
  print(`  supervisor (pid ${supervisor.pid}, since ${supervisor.started_at}):`);
  for (const [name, unit] of Object.entries(supervisor.units)) print(`    ${name.padEnd(15)} ${describe(unit)}`);
}

/** `running (pid 12, since …); restarted 2 times, last at … (the postmaster (pid 9) ended)` */
function describe(unit: SupervisedUnitRecord): string {
  const now =
    unit.state === 'running'
      ? `running (pid ${unit.pid}, since ${unit.since})`
      : unit.state === 'restarting'
        ? `down, restarting${unit.restart_at ? ` at ${unit.restart_at}` : ''}${unit.start_error ? ` (the last try failed: ${firstLine(unit.start_error)})` : ''}`
        : unit.state;
  const restarts = unit.restarts === 0 ? 'never restarted' : `restarted ${unit.restarts} time${unit.restarts === 1 ? '' : 's'}`;
  return `${now}; ${restarts}${unit.last_exit ? `, last at ${unit.last_exit.at} (${firstLine(unit.last_exit.reason)})` : ''}`;
}

const firstLine = (text: string) => text.split('\n')[0]!;

async function check(env: CliEnv, flags: StatusFlags): Promise<StatusReport> {
  let platform: PlatformState | undefined;
  let url: string;
  let supervisor: StatusReport['supervisor'];
  if (flags.url !== undefined || flags.host !== undefined || env.BERTH_HOST_URL !== undefined) {
    url = await gatewayUrl(env, flags);
  } else {
    const state = await localPlatform(env);
    const record = await state.readSupervisor();
    if (record) supervisor = supervisorAlive(record) ? { ...record, running: true } : { running: false };
    platform = await state.readPlatform();
    // A live pid that is another program now is told by its `/readyz` below (no instance id of ours).
    if (platform && !processAlive(platform.pid)) platform = undefined;
    // A supervisor is only "not running" while something it ran still runs.
    if (supervisor && !supervisor.running && !platform) supervisor = undefined;
    if (!platform) return { url: null, running: false, ready: false, ...(supervisor ? { supervisor } : {}) };
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
    ...(supervisor ? { supervisor } : {}),
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
