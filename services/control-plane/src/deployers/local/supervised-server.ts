/**
 * One revision's agent server process under supervision: started once by `deploy` (which waits
 * for `/ok`), then restarted whenever it exits without being asked to, with the shared restart
 * policy's backoff (@berth/supervision), on the same port when it is still free (so the
 * deployment's recorded url stays valid). Every crash goes to the revision's deploy log (exit code
 * or signal, the last lines it printed) and to the control plane's log, and is reported as a
 * health change; so is its recovery.
 */
import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import type { Logger } from '@berth/log';
import type { Clock } from '@berth/clock';
import { Supervisor, type Crash, type Incarnation, type RestartPolicy } from '@berth/supervision';
import { DeployFailedError, type DeployLog } from '../deployer.js';

export type { RestartPolicy } from '@berth/supervision';

export interface SupervisedServerOptions {
  deploymentId: string;
  revisionId: string;
  /**
   * Starts the agent server process on a port (the deployer's one spawn function). It may take a
   * moment (a container's listening socket is bound first) and reject when it cannot start at all.
   */
  spawn: (port: number) => ChildProcess | Promise<ChildProcess>;
  /** The revision's deploy log: progress, crashes, restarts. */
  log: DeployLog;
  logger: Logger;
  /** Every line the process prints. */
  onOutput: (line: string, stream: 'stdout' | 'stderr') => void;
  /** Health changes once deployed: down with the reason, up again with the url. */
  onHealth: (event: { healthy: false; reason: string } | { healthy: true; url: string }) => void;
  restart: RestartPolicy;
  /** The time restarts wait by (tests move it by hand). @default systemClock */
  clock?: Clock;
  healthTimeoutMs: number;
  drainMs: number;
}

/** Lines of a process's output kept to explain a failed start or a crash. */
const TAIL_LINES = 30;
/** How long the output of a process that exited may still arrive before its crash is reported. */
const OUTPUT_GRACE_MS = 500;

export class SupervisedServer {
  private port: number;
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  /** The last lines the current process printed. */
  private tail: string[] = [];
  private outputEnded: Promise<unknown> = Promise.resolve();
  /** Why the current process could not be started at all. */
  private startError: Error | undefined;
  /** A spawn under way: stop() waits for it, to stop what it starts. */
  private launching: Promise<unknown> = Promise.resolve();
  private readonly supervisor: Supervisor;

  constructor(
    port: number,
    private readonly options: SupervisedServerOptions,
  ) {
    this.port = port;
    const { log, logger, deploymentId, revisionId } = options;
    this.supervisor = new Supervisor({
      policy: options.restart,
      ...(options.clock ? { clock: options.clock } : {}),
      restart: (signal) => this.restart(signal),
      onCrash: (crash) => this.reportCrash(crash),
      onRestart: () => {
        log('the agent server answers /ok again');
        logger.info({ deploymentId, revisionId, pid: this.child?.pid, url: this.url }, 'an agent server was restarted');
        options.onHealth({ healthy: true, url: this.url });
      },
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Whether its process is alive now. */
  get running(): boolean {
    return this.child !== undefined && alive(this.child);
  }

  /**
   * Starts the process and resolves once it answers `/ok`; it is supervised from then on. Rejects
   * with DeployFailedError (its last output lines in the deploy log) when it exits or does not
   * answer in time, or with the signal's reason when aborted; the process is stopped then.
   */
  async start(signal?: AbortSignal): Promise<void> {
    const { log } = this.options;
    const child = await this.launch();
    const life = this.life(child);
    try {
      await this.waitHealthy(child, signal);
    } catch (error) {
      await this.stop(log);
      if (error instanceof DeployFailedError) {
        await this.outputEnded;
        for (const line of this.tail) log(line, 'error');
      }
      throw error;
    }
    // An exit between answering and now is a crash like a later one.
    this.supervisor.watch(life);
  }

  /** Stops the process on purpose (SIGTERM, SIGKILL after `drainMs`): it is not restarted. */
  async stop(log: DeployLog): Promise<void> {
    await this.supervisor.stop();
    await this.launching;
    const child = this.child;
    if (!child || !alive(child)) return;
    child.kill('SIGTERM');
    const drained = await Promise.race([this.exited.then(() => true), sleep(this.options.drainMs).then(() => false)]);
    if (!drained) {
      log(`the agent server did not stop within ${this.options.drainMs} ms: killing it`, 'warn');
      child.kill('SIGKILL');
      await this.exited;
    }
  }

  private async launch(): Promise<ChildProcess> {
    const spawning = (async () => (this.child = await this.options.spawn(this.port)))();
    this.launching = spawning.catch(() => undefined);
    const child = await spawning;
    this.tail = [];
    this.startError = undefined;
    // A process that could not be started at all (e.g. its folder is gone) emits 'error' instead
    // of 'exit': it ends there.
    this.exited = new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => child.pid === undefined && resolve());
    });
    child.on('error', (error) => {
      if (child.pid === undefined) {
        this.startError = error;
        return;
      }
      // Without a listener this (a failed kill) would throw in the control plane itself.
      this.options.log(`the agent server process failed: ${error.message}`, 'error');
      this.options.logger.error({ err: error, deploymentId: this.options.deploymentId, revisionId: this.options.revisionId }, 'an agent server process failed');
    });
    const ends: Promise<void>[] = [];
    for (const stream of ['stdout', 'stderr'] as const) {
      const readable = child[stream]!;
      ends.push(new Promise((resolve) => readable.once('close', () => resolve())));
      let rest = '';
      const take = (line: string) => {
        this.tail.push(line);
        if (this.tail.length > TAIL_LINES) this.tail.shift();
        this.options.onOutput(line, stream);
      };
      readable.setEncoding('utf8').on('data', (text: string) => {
        const lines = (rest + text).split('\n');
        rest = lines.pop() ?? '';
        lines.forEach(take);
      });
      readable.once('end', () => rest && take(rest));
    }
    // Output may trail the exit a little; a child of the server holding the pipes open must not
    // hold up the report, hence the bound.
    this.outputEnded = this.exited.then(() => Promise.race([Promise.all(ends), sleep(OUTPUT_GRACE_MS)]));
    this.options.log(`starting the agent server (pid ${child.pid}) on ${this.url}`);
    return child;
  }

  /** The life of the process just launched: it ends, with how, once its last output arrived. */
  private life(child: ChildProcess): Incarnation {
    return { ended: this.outputEnded.then(() => this.ending(child)) };
  }

  /** How a process that is no longer alive ended. */
  private ending(child: ChildProcess): string {
    if (child.pid === undefined) return `the agent server could not be started (${this.startError?.message ?? 'spawn failed'})`;
    return `the agent server exited with ${child.signalCode ? `signal ${child.signalCode}` : `code ${child.exitCode}`}`;
  }

  private async waitHealthy(child: ChildProcess, signal?: AbortSignal): Promise<void> {
    const deadline = Date.now() + this.options.healthTimeoutMs;
    for (;;) {
      signal?.throwIfAborted();
      if (child.pid === undefined) {
        // Its 'error' event (why) comes a tick after spawn.
        await this.exited;
        throw new DeployFailedError(this.ending(child));
      }
      if (!alive(child)) throw new DeployFailedError(`${this.ending(child)} before it answered`);
      if (await answers(`${this.url}/ok`)) return;
      if (Date.now() > deadline) throw new DeployFailedError(`the agent server did not answer /ok within ${Math.round(this.options.healthTimeoutMs / 1000)} s`);
      await sleep(100);
    }
  }

  /** A crash (or a failed restart) in the deploy log, the control plane's log and the health events. */
  private reportCrash({ reason, delayMs }: Crash): void {
    const { log, logger, deploymentId, revisionId } = this.options;
    const child = this.child;
    const text = `${reason}; restarting in ${seconds(delayMs)}`;
    const lastLines = [...this.tail];
    log(text, 'error');
    if (lastLines.length) log(`its last output lines:\n${lastLines.map((line) => `  ${line}`).join('\n')}`, 'error');
    logger.error(
      { deploymentId, revisionId, pid: child?.pid, exitCode: child?.exitCode, signal: child?.signalCode, restartInMs: delayMs, lastLines },
      'an agent server crashed',
    );
    this.options.onHealth({ healthy: false, reason: text });
  }

  /** Starts the process again on its port (another one when that was taken meanwhile); resolves once it answers. */
  private async restart(signal: AbortSignal): Promise<Incarnation> {
    if (!(await portFree(this.port))) {
      // Another process took the port meanwhile: move; the new url is reported with the recovery.
      const previous = this.url;
      this.port = await freePort();
      this.options.log(`${previous} is taken now: the agent server moves to ${this.url}`, 'warn');
    }
    signal.throwIfAborted();
    const child = await this.launch();
    const life = this.life(child);
    try {
      await this.waitHealthy(child, signal);
    } catch (error) {
      // Stopping: stop() ends the process.
      if (signal.aborted) throw error;
      // It exited: how is the reason. It does not answer: it is killed, and that is the reason.
      if (alive(child)) child.kill('SIGKILL');
      else throw new Error(await life.ended);
      await this.outputEnded;
      throw error;
    }
    return life;
  }
}

function alive(child: ChildProcess): boolean {
  return child.pid !== undefined && child.exitCode === null && child.signalCode === null;
}

/** 500 → "0.5 s", 2000 → "2 s". */
function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}

async function answers(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await response.body?.cancel();
    return response.ok;
  } catch {
    return false;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** Whether nothing listens on the loopback port. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A free loopback port (the OS picks one). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
