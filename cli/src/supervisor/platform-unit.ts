/**
 * The platform process (`berth serve`) as the supervisor of `berth up` runs it. Its first start
 * takes the port of its last start (deployment URLs and saved credentials point there) — or
 * BERTH_PORT, or 8080 (any free port when 8080 is taken) the first time; a restart after a crash
 * takes that same port or waits for it. A start counts only once the gateway answers `/readyz`,
 * ready, with the instance id the started process reported: a process that died, or another one
 * answering on the port, is never taken for it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isPortFree, processAlive, sleep } from '@berth/local-stack';
import type { ServeReport } from '../commands/serve.js';
import { childEnv, type CliEnv } from '../env.js';
import type { SupervisedSandboxes } from '../sandbox-engine.js';
import { logSize, logTail, type PlatformState, type StateDir } from '../state.js';
import { pidEnded, type Running, type Unit } from './units.js';

export interface PlatformUnitOptions {
  env: CliEnv;
  state: StateDir;
  databaseUrl: string;
  /** Unset: BERTH_SANDBOXES=off (the platform says so itself). */
  sandboxes?: SupervisedSandboxes;
  /** A line for people (`berth up` prints it): the gateway moved. */
  note(line: string): void;
}

const DEFAULT_PORT = 8080;
/** How long a starting platform may take to answer `/readyz` as itself. */
const START_TIMEOUT_MS = 60_000;
/** How long a platform may take to stop (its agent servers drain) before it is killed. */
const STOP_TIMEOUT_MS = 15_000;

export class PlatformUnit implements Unit {
  readonly name = 'platform';
  /** The platform that runs (or ran last), as platform.json records it. */
  current: PlatformState | undefined;

  constructor(private readonly options: PlatformUnitOptions) {}

  async start(signal: AbortSignal, first: boolean): Promise<Running> {
    const { state } = this.options;
    if (first) {
      const adopted = await this.adopt();
      if (adopted) return adopted;
    }
    const started = first ? await this.startFirst(signal) : await this.restart(signal);
    this.current = started.state;
    await state.writePlatform(started.state);
    await state.writeGatewayPort(started.state.port);
    const { child } = started;
    const ended = new Promise<string>((resolve) =>
      child.once('exit', (code, exitSignal) => resolve(`the platform (pid ${child.pid}) exited with ${exitSignal ? `signal ${exitSignal}` : `code ${code}`}`)),
    );
    return { pid: started.state.pid, adopted: false, ended };
  }

  async stop(): Promise<void> {
    const pid = this.current?.pid;
    if (pid !== undefined && processAlive(pid)) {
      process.kill(pid, 'SIGTERM');
      const deadline = Date.now() + STOP_TIMEOUT_MS;
      while (processAlive(pid) && Date.now() < deadline) await sleep(100);
      if (processAlive(pid)) process.kill(pid, 'SIGKILL');
    }
    await this.options.state.clearPlatform();
  }

  /** The platform recorded in platform.json, when it still runs and answers as itself (its supervisor was killed). */
  private async adopt(): Promise<Running | undefined> {
    const recorded = await this.options.state.readPlatform();
    if (!recorded || !processAlive(recorded.pid) || recorded.instance_id === undefined) return undefined;
    const seen = await identify(recorded.url);
    if (seen?.instanceId !== recorded.instance_id || !seen.ready) return undefined;
    this.current = recorded;
    return { pid: recorded.pid, adopted: true, ended: pidEnded(recorded.pid, 'the platform') };
  }

  /** `berth up`'s start: on the port of before, BERTH_PORT, or 8080; a first start may move to a free port. */
  private async startFirst(signal: AbortSignal): Promise<{ state: PlatformState; child: ChildProcess }> {
    const { env, state, note } = this.options;
    const remembered = (await state.readGatewayPort()) ?? (await state.readPlatform())?.port;
    const preferred = env.BERTH_PORT ?? remembered ?? DEFAULT_PORT;
    // Only a first start without BERTH_PORT may land elsewhere: later ones keep their URLs or fail.
    const mayMove = env.BERTH_PORT === undefined && remembered === undefined;
    const taken = (port: number) =>
      new Error(
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
    let started = await this.startProcess(port, signal);
    if (started === 'port-taken' && port !== 0 && mayMove) started = await this.startProcess((port = 0), signal);
    if (started === 'port-taken') throw taken(port);

    const moved = started.state.port;
    if (preferred !== 0 && moved !== preferred) note(`port ${preferred} is taken: the gateway listens on ${moved} (kept for the next starts)`);
    else if (remembered !== undefined && moved !== remembered) {
      note(`the gateway moved from port ${remembered} to ${moved}: deployment URLs and saved credentials use the new port`);
    }
    return started;
  }

  /** A restart after a crash: on the gateway's port, or not at all (it is tried again later). */
  private async restart(signal: AbortSignal): Promise<{ state: PlatformState; child: ChildProcess }> {
    const port = (await this.options.state.readGatewayPort()) ?? this.current?.port;
    if (port === undefined) throw new Error('the gateway port is not recorded (.berth/gateway-port): run `berth up` again');
    const taken = new Error(`port ${port} of the gateway is taken by another process: the platform starts again once it is free`);
    if (!(await isPortFree(port))) throw taken;
    const started = await this.startProcess(port, signal);
    if (started === 'port-taken') throw taken;
    return started;
  }

  /**
   * Starts `berth serve` on `port` (0: any) and waits until it answers as itself; 'port-taken' when
   * it could not bind the port. Any other failure stops it and throws with the end of its log.
   */
  private async startProcess(port: number, signal: AbortSignal): Promise<{ state: PlatformState; child: ChildProcess } | 'port-taken'> {
    const { env, state, databaseUrl, sandboxes } = this.options;
    const logStart = await logSize(state.logFile);
    const log = openSync(state.logFile, 'a');
    let child: ChildProcess;
    try {
      child = spawn(process.execPath, [fileURLToPath(new URL('../bin.js', import.meta.url)), 'serve'], {
        // Its own process group: a signal for the supervisor's group is not one for it.
        detached: true,
        stdio: ['ignore', log, log, 'ipc'],
        env: childEnv({
          DATABASE_URL: databaseUrl,
          BERTH_PORT: String(port),
          BERTH_HOST: env.BERTH_HOST,
          BERTH_STATE_DIR: env.stateDir,
          LOG_LEVEL: env.LOG_LEVEL,
          ...(env.BERTH_PUBLIC_URL ? { BERTH_PUBLIC_URL: env.BERTH_PUBLIC_URL } : {}),
          ...(sandboxes ? { BERTH_SUPERVISED_SANDBOXES: JSON.stringify(sandboxes) } : {}),
        }),
      });
    } finally {
      closeSync(log);
    }
    const running = () => child.exitCode === null && child.signalCode === null;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const fail = async (why: string): Promise<never> => {
      if (running()) {
        child.kill('SIGTERM');
        await Promise.race([exited, sleep(STOP_TIMEOUT_MS)]);
        if (running()) child.kill('SIGKILL');
      }
      throw new Error(`${why}\n${await logTail(state.logFile, logStart)}`);
    };
    try {
      const report = await new Promise<ServeReport | { exited: string } | { timeout: true } | { aborted: true }>((resolve) => {
        child.on('message', (message: ServeReport) => resolve(message));
        child.once('exit', (code, exitSignal) => resolve({ exited: exitSignal ? `signal ${exitSignal}` : `code ${code}` }));
        child.once('error', (error) => resolve({ exited: error.message }));
        signal.addEventListener('abort', () => resolve({ aborted: true }), { once: true });
        setTimeout(() => resolve({ timeout: true }), START_TIMEOUT_MS).unref();
      });
      if ('aborted' in report) return await fail('the platform was stopped during its start');
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
        if (signal.aborted) return await fail('the platform was stopped during its start');
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
      return {
        state: {
          pid: child.pid!,
          port: report.ready.port,
          url,
          instance_id,
          started_at: new Date().toISOString(),
          sandboxes: report.ready.sandboxes,
          isolation: report.ready.isolation,
        },
        child,
      };
    } finally {
      // It serves on alone: no IPC channel keeps it tied to the supervisor.
      if (child.connected) child.disconnect();
    }
  }
}

/** Who answers `/readyz` at `url`: the instance id it gives and whether it is ready; undefined when nothing answers. */
export async function identify(url: string): Promise<{ instanceId: string | undefined; ready: boolean } | undefined> {
  try {
    const response = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(3000) });
    const body = (await response.json().catch(() => undefined)) as { instance_id?: unknown } | undefined;
    return { instanceId: typeof body?.instance_id === 'string' ? body.instance_id : undefined, ready: response.ok };
  } catch {
    return undefined;
  }
}
