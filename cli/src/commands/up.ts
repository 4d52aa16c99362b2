/**
 * `berth up`: provision Postgres under the state folder (unless DATABASE_URL is given), apply
 * migrations, start the platform as a detached process on the port it had before, wait until that
 * very process is ready, and print the URL, tenant id and bootstrap API key (also written to
 * credentials.json).
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { migrateGateway } from '@berth/gateway';
import { PostgresServer, isPortFree, sleep } from '@berth/local-stack';
import { CliError } from '../client.js';
import { childEnv, type CliEnv } from '../env.js';
import { StateDir, isAlive, type Credentials, type PlatformState } from '../state.js';
import { mintBootstrapKey } from './keys-bootstrap.js';
import type { ServeReport } from './serve.js';

export interface UpResult {
  url: string;
  credentials: Credentials;
  pid: number;
  databaseUrl: string;
  alreadyRunning: boolean;
}

const DEFAULT_PORT = 8080;
/** How long a starting platform may take to answer `/readyz` as itself. */
const START_TIMEOUT_MS = 60_000;
/** Lines of the platform's log shown when it fails to start. */
const LOG_TAIL_LINES = 30;

export async function up(env: CliEnv, print: (line: string) => void = console.log): Promise<UpResult> {
  const state = new StateDir(env.stateDir);
  await state.ensure();

  let databaseUrl = env.DATABASE_URL;
  if (!databaseUrl) {
    const postgres = new PostgresServer({ baseDir: state.postgresDir });
    const pg = await postgres.start();
    databaseUrl = pg.connectionString;
    print(`postgres ${pg.binaries.major} (${pg.binaries.source}) on 127.0.0.1:${pg.port}, data in ${postgres.dataDir}`);
  }
  await migrateGateway(databaseUrl);

  const recorded = await state.readPlatform();
  const alreadyRunning =
    recorded !== undefined && isAlive(recorded.pid) && recorded.instance_id !== undefined && (await identify(recorded.url))?.instanceId === recorded.instance_id;
  const platform = alreadyRunning ? recorded : await start(env, state, databaseUrl, print);

  const credentials = await ensureCredentials(state, platform.url, databaseUrl);
  print('');
  print(alreadyRunning ? 'Berth is already running.' : 'Berth is up.');
  print(`  gateway    ${platform.url}   (API docs: ${platform.url}/docs)`);
  if (env.BERTH_PUBLIC_URL) print(`  public URL ${env.BERTH_PUBLIC_URL}   (BERTH_PUBLIC_URL: links the gateway hands out)`);
  print(`  tenant id  ${credentials.tenant_id}`);
  print(`  api key    ${credentials.api_key}`);
  print(`  saved in   ${state.credentialsFile}`);
  print(`  queues     ${env.REDIS_URL ? 'redis (REDIS_URL)' : 'postgres (embedded; set REDIS_URL for Redis)'}`);
  print(`  logs       ${state.logFile}`);
  if (platform.isolation) print(`  isolation  ${platform.isolation}`);
  if (platform.sandboxes) print(`  sandboxes  ${platform.sandboxes}`);
  print('');
  print('Try:');
  print(`  curl -H "X-Api-Key: ${credentials.api_key}" ${platform.url}/v1/me`);
  print('Stop with `make down` (data stays in the state folder).');
  return { url: platform.url, credentials, pid: platform.pid, databaseUrl, alreadyRunning };
}

/**
 * Starts the platform on the port of its last start (deployment URLs and saved credentials point
 * there) — or BERTH_PORT, or 8080 (any free port when 8080 is taken) the first time — and returns
 * once its gateway answers `/readyz` with the id the process reported: a process that died, or
 * another one answering on the port, is never taken for it.
 */
async function start(env: CliEnv, state: StateDir, databaseUrl: string, print: (line: string) => void): Promise<PlatformState> {
  const remembered = (await state.readGatewayPort()) ?? (await state.readPlatform())?.port;
  const preferred = env.BERTH_PORT ?? remembered ?? DEFAULT_PORT;
  // Only a first start without BERTH_PORT may land elsewhere: later ones keep their URLs or fail.
  const mayMove = env.BERTH_PORT === undefined && remembered === undefined;
  const taken = (port: number) =>
    new CliError(
      env.BERTH_PORT !== undefined
        ? `port ${port} (BERTH_PORT) is taken by another process: stop it, or choose another port`
        : `port ${port} is taken by another process. Berth served there before, and its deployment URLs and ${state.credentialsFile} use it: ` +
            `stop that process and start again, or move Berth with BERTH_PORT=<port> (its deployment URLs change)`,
    );

  let port = preferred;
  if (preferred !== 0 && !(await isPortFree(preferred))) {
    if (!mayMove) throw taken(preferred);
    port = 0;
  }
  let started = await startProcess(env, state, databaseUrl, port);
  if (started === 'port-taken' && port !== 0 && mayMove) started = await startProcess(env, state, databaseUrl, (port = 0));
  if (started === 'port-taken') throw taken(port);

  if (preferred !== 0 && started.port !== preferred) print(`port ${preferred} is taken: the gateway listens on ${started.port} (kept for the next starts)`);
  else if (remembered !== undefined && started.port !== remembered) {
    print(`the gateway moved from port ${remembered} to ${started.port}: deployment URLs and saved credentials use the new port`);
  }
  await state.writePlatform(started);
  await state.writeGatewayPort(started.port);
  return started;
}

/**
 * Starts `berth serve` detached on `port` (0: any) and waits until it answers as itself; 'port-taken'
 * when it could not bind the port. Any other failure stops it and throws with the end of its log.
 */
async function startProcess(env: CliEnv, state: StateDir, databaseUrl: string, port: number): Promise<PlatformState | 'port-taken'> {
  const logStart = await stat(state.logFile).then((s) => s.size, () => 0);
  const log = openSync(state.logFile, 'a');
  const child = spawn(process.execPath, [fileURLToPath(new URL('../bin.js', import.meta.url)), 'serve'], {
    detached: true,
    stdio: ['ignore', log, log, 'ipc'],
    env: childEnv({
      DATABASE_URL: databaseUrl,
      BERTH_PORT: String(port),
      BERTH_HOST: env.BERTH_HOST,
      BERTH_STATE_DIR: env.stateDir,
      LOG_LEVEL: env.LOG_LEVEL,
      ...(env.BERTH_PUBLIC_URL ? { BERTH_PUBLIC_URL: env.BERTH_PUBLIC_URL } : {}),
    }),
  });
  closeSync(log);
  const running = () => child.exitCode === null && child.signalCode === null;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const fail = async (why: string): Promise<never> => {
    if (running()) {
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(15_000)]);
      if (running()) child.kill('SIGKILL');
    }
    throw new CliError(`${why}\n${await logTail(state.logFile, logStart)}`);
  };
  try {
    const report = await new Promise<ServeReport | { exited: string } | { timeout: true }>((resolve) => {
      child.on('message', (message: ServeReport) => resolve(message));
      child.once('exit', (code, signal) => resolve({ exited: signal ? `signal ${signal}` : `code ${code}` }));
      child.once('error', (error) => resolve({ exited: error.message }));
      setTimeout(() => resolve({ timeout: true }), START_TIMEOUT_MS).unref();
    });
    if ('failed' in report) {
      if (report.failed.code === 'EADDRINUSE') {
        await exited;
        return 'port-taken';
      }
      return await fail(`the platform failed to start: ${report.failed.message}`);
    }
    if ('exited' in report) return await fail(`the platform exited during start (${report.exited})`);
    if ('timeout' in report) return await fail(`the platform did not start within ${START_TIMEOUT_MS / 1000} s`);
    const { url, instance_id } = report.ready;
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      if (!running()) return await fail('the platform exited during start');
      const seen = await identify(url);
      if (seen?.instanceId === instance_id && seen.ready) break;
      if (Date.now() > deadline) {
        return await fail(
          seen === undefined
            ? `the platform did not answer at ${url}/readyz within ${START_TIMEOUT_MS / 1000} s`
            : seen.instanceId === instance_id
              ? `the platform at ${url} did not become ready within ${START_TIMEOUT_MS / 1000} s`
              : `another process answers at ${url}, not the platform that was started`,
        );
      }
      await sleep(200);
    }
    return { pid: child.pid!, port: report.ready.port, url, instance_id, started_at: new Date().toISOString(), sandboxes: report.ready.sandboxes, isolation: report.ready.isolation };
  } finally {
    // It runs on alone: no IPC channel or handle keeps this process.
    if (child.connected) child.disconnect();
    child.unref();
  }
}

/** Who answers `/readyz` at `url`: the instance id it gives and whether it is ready; undefined when nothing answers. */
async function identify(url: string): Promise<{ instanceId: string | undefined; ready: boolean } | undefined> {
  try {
    const response = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(3000) });
    const body = (await response.json().catch(() => undefined)) as { instance_id?: unknown } | undefined;
    return { instanceId: typeof body?.instance_id === 'string' ? body.instance_id : undefined, ready: response.ok };
  } catch {
    return undefined;
  }
}

/** The lines the platform logged since `from` (bytes), the last ones only, to explain a failed start. */
async function logTail(file: string, from: number): Promise<string> {
  const text = await readFile(file).then((all) => all.subarray(from).toString('utf8'), () => '');
  const lines = text.split('\n').filter((line) => line.trim() !== '').slice(-LOG_TAIL_LINES);
  return lines.length ? `the end of ${file}:\n${lines.map((line) => `  ${line}`).join('\n')}` : `(nothing in ${file})`;
}

/** Reuses stored credentials while they still work, else mints a new bootstrap admin key. */
async function ensureCredentials(state: StateDir, url: string, databaseUrl: string): Promise<Credentials> {
  const stored = await state.readCredentials();
  if (stored && (await keyWorks(url, stored))) {
    if (stored.gateway_url !== url) await state.writeCredentials({ ...stored, gateway_url: url });
    return { ...stored, gateway_url: url };
  }
  const credentials = { gateway_url: url, ...(await mintBootstrapKey(databaseUrl)) };
  await state.writeCredentials(credentials);
  return credentials;
}

async function keyWorks(url: string, credentials: Credentials): Promise<boolean> {
  try {
    const res = await fetch(`${url}/v1/me`, { headers: { 'x-api-key': credentials.api_key, 'x-tenant-id': credentials.tenant_id } });
    return res.ok;
  } catch {
    return false;
  }
}
