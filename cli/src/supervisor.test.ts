/**
 * The supervisor `berth up` leaves running, on one real `make up` for the whole file (its own
 * Postgres, the private sandbox engine as root, the platform process): `kill -9` of each brings it
 * back — serving again within 15 s, with no manual step — on the same port with the same
 * credentials; `berth status` shows the restarts; a killed supervisor is repaired by `berth up`
 * without a restart; `berth down` leaves no process running, and `berth up` after it keeps the data.
 * (The backoff itself is tested on a clock of the test's in libs/supervision.)
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, realpath, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processesUsing, until } from '@berth/testing';
import { SandboxClient } from 'langsmith/sandbox';
import { DEFAULT_SANDBOX_IMAGE, privateEngine } from './sandbox-engine.js';
import type { PlatformState, SupervisorRecord } from './state.js';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
/** The bound: a killed part serves again within this long, with no manual step. */
const SERVING_AGAIN_MS = 15_000;
let stateDir: string;
let url: string;
let key: string;

function berth(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('BERTH_') && name !== 'DATABASE_URL'));
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { env: { ...inherited, BERTH_STATE_DIR: stateDir, LOG_LEVEL: 'warn', ...env }, timeout: 150_000 },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const json = async <T>(file: string): Promise<T> => JSON.parse(await readFile(join(stateDir, file), 'utf8')) as T;
const supervisor = () => json<SupervisorRecord>('supervisor.json');
const platform = () => json<PlatformState>('platform.json');

/** The gateway's readiness: its status code and instance id, or undefined when it does not answer. */
async function readiness(): Promise<{ status: number; instanceId: string } | undefined> {
  try {
    const response = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5000) });
    return { status: response.status, instanceId: ((await response.json()) as { instance_id: string }).instance_id };
  } catch {
    return undefined;
  }
}

/** Whether the saved credentials work: the database behind the gateway, the key in it. */
async function keyWorks(): Promise<boolean> {
  const response = await fetch(`${url}/v1/me`, { headers: { 'x-api-key': key }, signal: AbortSignal.timeout(5000) }).catch(() => undefined);
  return response?.status === 200;
}

/** Resolves once `probe` holds, failing after the bound; what it took, in ms. */
/**
 * The error and fatal lines of a log in the state folder's logs (message and error message), and
 * what is not a log line (a crash's stack, printed by Node).
 */
async function loggedErrors(file: string): Promise<string[]> {
  const text = await readFile(join(stateDir, 'logs', file), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((line) => line.trim() !== '' && (!line.startsWith('{') || /"level":(50|60)/.test(line)))
    .map((line) => {
      if (!line.startsWith('{')) return line;
      const entry = JSON.parse(line) as { msg?: string; err?: { message?: string } };
      return `${entry.msg ?? ''}: ${entry.err?.message ?? ''}`;
    })
    .slice(-30);
}

async function servingAgain(what: string, since: number, probe: () => Promise<boolean>): Promise<number> {
  await until(what, async () => ((await probe()) ? true : undefined), SERVING_AGAIN_MS - (Date.now() - since), 100);
  return Date.now() - since;
}

/** The engine's API answers on its socket. */
function enginePing(): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath: privateEngine(stateDir).socketPath, path: '/_ping', timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.once('error', () => resolve(false));
    req.once('timeout', () => req.destroy());
    req.end();
  });
}

/** Every folder whose processes are this Berth's: the state folder, the cluster's real folder, the engine's volatile folder. */
async function berthFolders(): Promise<string[]> {
  const cluster = await realpath(join(stateDir, 'postgres')).catch(() => join(stateDir, 'postgres'));
  return [stateDir, cluster, dirname(privateEngine(stateDir).socketPath)];
}

beforeAll(async () => {
  // Short, for the sandboxes' socket paths.
  stateDir = await mkdtemp(join(tmpdir(), 'brt-sup-'));
  const started = await berth(['up'], { BERTH_PORT: '0' });
  expect(started.stderr).toBe('');
  expect(started.code).toBe(0);
  ({ gateway_url: url, api_key: key } = await json<{ gateway_url: string; api_key: string }>('credentials.json'));
}, 180_000);

afterAll(async () => {
  await berth(['down']);
  const cluster = await realpath(join(stateDir, 'postgres')).catch(() => undefined);
  await privateEngine(stateDir).destroy();
  if (cluster && !cluster.startsWith(stateDir)) await rm(cluster, { recursive: true, force: true });
  await rm(stateDir, { recursive: true, force: true });
}, 180_000);

describe('the supervisor of berth up', () => {
  it('restarts Postgres killed with SIGKILL on its port with its password: the platform serves again within 15 s, untouched', async () => {
    const before = await supervisor();
    const postmaster = before.units.postgres!.pid!;
    const port = (await readFile(join(await realpath(join(stateDir, 'postgres')), 'data', 'postmaster.pid'), 'utf8')).split('\n')[3];
    process.kill(postmaster, 'SIGKILL');
    const killed = Date.now();
    // Serving again, and the supervisor has recorded it (it records once its own check of Postgres passed).
    const took = await servingAgain(
      'the platform serving again',
      killed,
      async () => (await readiness())?.status === 200 && (await keyWorks()) && (await supervisor()).units.postgres?.state === 'running',
    );
    console.log(`Postgres killed: serving again after ${took} ms`);

    const after = await supervisor();
    expect(after.units.postgres).toMatchObject({ state: 'running', restarts: 1, last_exit: { reason: `the postmaster (pid ${postmaster}) ended` } });
    expect(after.units.postgres!.pid).not.toBe(postmaster);
    expect((await readFile(join(await realpath(join(stateDir, 'postgres')), 'data', 'postmaster.pid'), 'utf8')).split('\n')[3]).toBe(port);
    // The same process serves on: its database URL (port, password) held. (When not, the platform's
    // errors say why it ended.)
    const platformErrors = after.units.platform!.pid === before.units.platform!.pid ? [] : await loggedErrors('platform.log');
    expect({ pid: after.units.platform!.pid, platformErrors }).toEqual({ pid: before.units.platform!.pid, platformErrors: [] });
    const status = await berth(['status']);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(
      new RegExp(
        `postgres +running \\(pid ${after.units.postgres!.pid}, since .*\\); restarted 1 time, last at .* \\(the postmaster \\(pid ${postmaster}\\) ended\\)`,
      ),
    );
  }, 60_000);

  it('restarts the sandbox engine killed with SIGKILL within seconds; the platform answers throughout, and runs sandboxes on it again', async () => {
    const before = await supervisor();
    const service = before.units['sandbox engine']!.pid!;
    const listBoxes = async () => {
      const listed = await fetch(`${url}/api/v2/sandboxes/boxes`, { headers: { 'x-api-key': key }, signal: AbortSignal.timeout(10_000) });
      await listed.body?.cancel();
      return { status: listed.status, retryAfter: listed.headers.get('retry-after') };
    };
    // The supervisor is frozen while the engine dies: the engine stays dead until the test lets it
    // be restarted, so an answer of the sandbox API meanwhile proves it does not wait on the engine.
    process.kill(before.pid, 'SIGSTOP');
    let since: number;
    try {
      process.kill(service, 'SIGKILL');
      await until('the engine to stop answering', async () => ((await enginePing()) ? undefined : true), 10_000, 50);
      const meanwhile = [await listBoxes(), await listBoxes()];
      console.log(`engine dead: the sandbox API answered ${meanwhile.map((a) => a.status).join(', ')}`);
      // A list, or a 503 that says when to come back; never a hang or a 500.
      expect(meanwhile.filter((a) => !(a.status === 200 || (a.status === 503 && a.retryAfter !== null)))).toEqual([]);
      expect(await enginePing()).toBe(false);
    } finally {
      process.kill(before.pid, 'SIGCONT');
      since = Date.now();
    }
    const took = await servingAgain('the engine and the sandbox API answering again', since, async () => {
      const listed = await listBoxes();
      return listed.status === 200 && (await enginePing()) && (await supervisor()).units['sandbox engine']?.state === 'running';
    });
    console.log(`engine killed: answering again ${took} ms after the supervisor went on`);
    expect((await supervisor()).units['sandbox engine']).toMatchObject({
      state: 'running',
      restarts: 1,
      last_exit: { reason: `the engine service (pid ${service}) ended` },
    });

    const client = new SandboxClient({ apiEndpoint: `${url}/api/v2/sandboxes`, apiKey: key });
    const snapshot = await client.createSnapshot('busybox', DEFAULT_SANDBOX_IMAGE, 1 << 30, { timeout: 60 });
    const sandbox = await client.createSandbox(snapshot.id, { name: 'after-restart', timeout: 60 });
    expect((await sandbox.run('echo alive')).stdout).toBe('alive\n');
    await client.deleteSandbox('after-restart');
    expect((await berth(['status'])).stdout).toMatch(
      /sandbox engine +running \(pid \d+, since .*\); restarted 1 time, last at .* \(the engine service \(pid \d+\) ended\)/,
    );
  }, 120_000);

  it('restarts the platform killed with SIGKILL on its gateway port: a new instance answers /readyz, as platform.json records it', async () => {
    const before = await platform();
    process.kill(before.pid, 'SIGKILL');
    const killed = Date.now();
    const took = await servingAgain('a new platform serving', killed, async () => {
      const seen = await readiness();
      return (
        seen?.status === 200 &&
        seen.instanceId !== before.instance_id &&
        seen.instanceId === (await platform()).instance_id &&
        (await supervisor()).units.platform?.state === 'running'
      );
    });
    console.log(`platform killed: serving again after ${took} ms`);
    const after = await platform();
    expect(after.url).toBe(before.url);
    expect(after.pid).not.toBe(before.pid);
    expect(await keyWorks()).toBe(true);
    expect((await supervisor()).units.platform).toMatchObject({
      state: 'running',
      pid: after.pid,
      restarts: 1,
      last_exit: { reason: `the platform (pid ${before.pid}) exited with signal SIGKILL` },
    });
    const status = await berth(['status']);
    expect(status.stdout).toContain(`Berth is running at ${url} (pid ${after.pid}`);
    expect(status.stdout).toMatch(/platform +running .*; restarted 1 time, last at .* \(the platform \(pid \d+\) exited with signal SIGKILL\)/);
  }, 60_000);

  it('a killed supervisor: status says so, and `berth up` takes on what runs, without a restart, and supervises it again', async () => {
    const { pid } = await supervisor();
    const running = await platform();
    process.kill(pid, 'SIGKILL');
    await until('the supervisor gone', async () => ((await processesUsing([stateDir])).some((p) => p.pid === pid) ? undefined : true), 5000);
    const status = await berth(['status']);
    expect(status.stdout).toContain('supervisor: NOT running');
    expect((await readiness())?.status).toBe(200);

    const again = await berth(['up']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('Berth is already running.');
    const repaired = await supervisor();
    expect(repaired.pid).not.toBe(pid);
    expect(repaired.units.platform).toMatchObject({ state: 'running', pid: running.pid });
    expect(repaired.units.postgres?.state).toBe('running');

    // It supervises what it took on.
    process.kill(running.pid, 'SIGKILL');
    const killed = Date.now();
    await servingAgain('the platform serving again', killed, async () => {
      const seen = await readiness();
      return seen?.status === 200 && seen.instanceId !== running.instance_id;
    });
    expect((await supervisor()).units.platform).toMatchObject({ restarts: 1, last_exit: { reason: `the platform (pid ${running.pid}) ended` } });
  }, 120_000);

  it('berth down stops everything, the supervisor included; berth up again keeps the data', async () => {
    const down = await berth(['down']);
    expect(down.code).toBe(0);
    expect(down.stdout).toMatch(
      /stopped the platform \(pid \d+\)\nstopped the sandbox engine \(sandbox files kept\)\nstopped postgres \(data kept\)\nstopped the supervisor \(pid \d+\)/,
    );
    expect(await processesUsing(await berthFolders())).toEqual([]);
    expect((await berth(['status'])).code).toBe(1);

    const up = await berth(['up']);
    expect(up.code).toBe(0);
    expect(up.stdout).toContain(`gateway    ${url} `);
    expect(await keyWorks()).toBe(true);
  }, 180_000);
});
