/**
 * `berth up`: start the supervisor (`berth supervise`, a process of its own session that stays),
 * which provisions Postgres under the state folder (unless DATABASE_URL is given), starts the
 * private sandbox engine and the platform process, and restarts any of them that crashes; wait
 * until the platform it started is ready, and print the URL, tenant id and bootstrap API key (also
 * written to credentials.json). A signal (Ctrl-C, SIGTERM, SIGHUP) before that stops everything
 * the start began.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PostgresServer, sleep } from '@berth/local-stack';
import { CliError } from '../client.js';
import { childEnv, type CliEnv } from '../env.js';
import { identify } from '../supervisor/platform-unit.js';
import type { SupervisorReport } from '../supervisor/supervisor.js';
import { StateDir, logSize, logTail, supervisorAlive, type Credentials, type PlatformState } from '../state.js';
import { STOP_SIGNALS } from '../signals.js';
import { mintBootstrapKey } from './keys-bootstrap.js';

export interface UpResult {
  url: string;
  credentials: Credentials;
  pid: number;
  databaseUrl: string;
  alreadyRunning: boolean;
}

/** How long a supervisor that runs may take to have its platform ready (it may be restarting it). */
const RUNNING_TIMEOUT_MS = 60_000;

export async function up(env: CliEnv, print: (line: string) => void = console.log): Promise<UpResult> {
  const state = new StateDir(env.stateDir);
  await state.ensure();

  const supervisor = await state.readSupervisor();
  const started = supervisor && supervisorAlive(supervisor) ? await running(state, supervisor.pid, env) : await startSupervisor(env, state, print);
  const { platform, databaseUrl, alreadyRunning } = started;

  const credentials = await ensureCredentials(state, platform.url, databaseUrl);
  print('');
  print(alreadyRunning ? 'Berth is already running.' : 'Berth is up.');
  print(`  console    ${(env.BERTH_PUBLIC_URL ?? platform.url).replace(/\/+$/, '')}/   (sign in with the api key below)`);
  print(`  gateway    ${platform.url}   (API docs: ${platform.url}/docs)`);
  if (env.BERTH_PUBLIC_URL) print(`  public URL ${env.BERTH_PUBLIC_URL}   (BERTH_PUBLIC_URL: links the gateway hands out)`);
  print(`  tenant id  ${credentials.tenant_id}`);
  print(`  api key    ${credentials.api_key}`);
  print(`  saved in   ${state.credentialsFile}`);
  print(`  queues     ${env.REDIS_URL ? 'redis (REDIS_URL)' : 'postgres (embedded; set REDIS_URL for Redis)'}`);
  print(`  logs       ${state.logFile}`);
  // What the platform found it can do: containers, OS users, or nothing (and why).
  if (platform.isolation) print(`  isolation  ${platform.isolation}`);
  if (platform.sandboxes) print(`  sandboxes  ${platform.sandboxes}`);
  print(`  supervised ${state.supervisorLogFile} (a process that crashes is restarted; \`berth status\` shows restarts)`);
  print('');
  print('Try:');
  print(`  curl -H "X-Api-Key: ${credentials.api_key}" ${platform.url}/v1/me`);
  print('Stop with `make down` (data stays in the state folder).');
  return { url: platform.url, credentials, pid: platform.pid, databaseUrl, alreadyRunning };
}

interface Started {
  platform: PlatformState;
  databaseUrl: string;
  alreadyRunning: boolean;
}

/** A supervisor runs already: its platform, once it answers ready as the one recorded (it may be restarting). */
async function running(state: StateDir, supervisorPid: number, env: CliEnv): Promise<Started> {
  const deadline = Date.now() + RUNNING_TIMEOUT_MS;
  for (;;) {
    const platform = await state.readPlatform();
    const seen = platform && (await identify(platform.url));
    if (platform && seen?.instanceId === platform.instance_id && seen.ready) {
      // Not started here: the supervisor runs it (and may be restarting it now).
      const databaseUrl = env.DATABASE_URL ?? (await new PostgresServer({ baseDir: state.postgresDir }).lastConnectionString());
      if (!databaseUrl)
        throw new CliError(
          `no Postgres cluster in ${state.postgresDir}, though Berth's supervisor (pid ${supervisorPid}) runs: run \`berth down\`, then \`berth up\``,
        );
      return { platform, databaseUrl, alreadyRunning: true };
    }
    if (Date.now() > deadline) {
      throw new CliError(`Berth's supervisor (pid ${supervisorPid}) runs, but its platform is not ready: see \`berth status\` and ${state.supervisorLogFile}`);
    }
    await sleep(500);
  }
}

/**
 * Starts the supervisor in a session of its own and waits for its report. Until then a signal to
 * this process (or its group: a terminal's Ctrl-C) stops the supervisor, which stops what it began.
 */
async function startSupervisor(env: CliEnv, state: StateDir, print: (line: string) => void): Promise<Started> {
  const logStart = await logSize(state.supervisorLogFile);
  // Before the supervisor exists: a signal from now on stops it (see `interrupt`), not this process.
  let interrupted: NodeJS.Signals | undefined;
  let child: ChildProcess | undefined;
  const interrupt = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = signal;
    print(`${signal}: stopping what the start began…`);
    child?.kill('SIGTERM');
  };
  for (const signal of STOP_SIGNALS) process.on(signal, interrupt);
  const log = openSync(state.supervisorLogFile, 'a');
  try {
    child = spawn(process.execPath, [fileURLToPath(new URL('../bin.js', import.meta.url)), 'supervise'], {
      // Its own session: the terminal's signals and hangup are not for it once `up` is done.
      detached: true,
      stdio: ['ignore', log, log, 'ipc'],
      env: childEnv({ BERTH_STATE_DIR: env.stateDir }),
    });
  } finally {
    closeSync(log);
  }
  // A signal that came while it was being spawned.
  if (interrupted) child.kill('SIGTERM');
  try {
    const exited = new Promise<string>((resolve) => child.once('exit', (code, signal) => resolve(signal ? `signal ${signal}` : `code ${code}`)));
    const result = await new Promise<Exclude<SupervisorReport, { note: string }> | { exited: string }>((resolve) => {
      child.on('message', (message: SupervisorReport) => ('note' in message ? print(message.note) : resolve(message)));
      void exited.then((how) => resolve({ exited: how }));
      child.once('error', (error) => resolve({ exited: error.message }));
    });
    if (interrupted) {
      await exited;
      throw new CliError(`stopped by ${interrupted}: nothing of Berth was left running`);
    }
    if ('failed' in result) {
      await exited;
      throw new CliError(result.failed);
    }
    if ('exited' in result) throw new CliError(`the supervisor exited during start (${result.exited})\n${await logTail(state.supervisorLogFile, logStart)}`);
    const { platform, databaseUrl, adopted } = result.ready;
    if (adopted) print('(the platform ran without its supervisor, which had been stopped: a new supervisor watches it now)');
    return { platform, databaseUrl, alreadyRunning: adopted };
  } finally {
    for (const signal of STOP_SIGNALS) process.off(signal, interrupt);
    // It runs on alone: no IPC channel or handle keeps this process.
    if (child.connected) child.disconnect();
    child.unref();
  }
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
