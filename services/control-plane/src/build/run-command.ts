/**
 * Running a build command (an installer) as a child process: its output streamed into the build
 * log line by line, stopped with its whole process group on abort or timeout (npm and yarn start
 * children of their own, which a plain `kill` of the parent would leave running).
 */
import { spawn } from 'node:child_process';
import { delimiter, join } from 'node:path';
import { accessSync, constants } from 'node:fs';
import { BuildCancelledError, BuildFailedError } from './errors.js';
import { FirstErrorFinder } from './first-error.js';

/** Where build progress goes: one line per call. */
export type BuildLog = (line: string, level?: 'info' | 'warn' | 'error') => void;

/** How many of the last output lines a failure keeps (and quotes in its message). */
export const LOG_TAIL_LINES = 30;

/** Grace period between SIGTERM and SIGKILL when a command is stopped. */
const KILL_GRACE_MS = 2_000;

/** Finds `name` on the `PATH` of `env`, as the shell would; `undefined` when it is not there. */
export function findExecutable(name: string, env: Record<string, string | undefined>): string | undefined {
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this folder
    }
  }
  return undefined;
}

/** Splits a stream of chunks into lines, calling `onLine` for each complete (and the last) line. */
export class LineSplitter {
  #rest = '';

  constructor(private readonly onLine: (line: string) => void) {}

  push(chunk: string): void {
    const parts = (this.#rest + chunk).split(/\r?\n|\r/);
    this.#rest = parts.pop() ?? '';
    for (const part of parts) if (part.trim()) this.onLine(part);
  }

  end(): void {
    if (this.#rest.trim()) this.onLine(this.#rest);
    this.#rest = '';
  }
}

/** Keeps the last `size` lines seen. */
export class LogTail {
  readonly #lines: string[] = [];

  constructor(private readonly size = LOG_TAIL_LINES) {}

  add(line: string): void {
    this.#lines.push(line);
    if (this.#lines.length > this.size) this.#lines.shift();
  }

  get lines(): string[] {
    return [...this.#lines];
  }
}

export interface RunCommandOptions {
  cwd: string;
  /** The whole environment of the command (nothing is inherited). */
  env: Record<string, string>;
  log: BuildLog;
  /** Stops the command (SIGTERM to its process group, SIGKILL after a grace period). */
  signal?: AbortSignal;
  timeoutMs: number;
  /** How the command is named in messages, e.g. `npm ci`. */
  label: string;
  /** The OS user and group to run it as (the control plane's own when unset). */
  user?: { uid: number; gid: number };
}

/**
 * Runs `file args` to completion.
 * @throws BuildCancelledError when `signal` aborts; BuildFailedError when it cannot start, exits
 *   with a non-zero code or a signal, or runs past `timeoutMs` — with the last output lines.
 */
export async function runCommand(file: string, args: string[], options: RunCommandOptions): Promise<void> {
  const { log, label } = options;
  options.signal?.throwIfAborted();
  const tail = new LogTail();
  const firstError = new FirstErrorFinder();
  const child = spawn(file, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group, so that stopping it reaches the installer's children too.
    detached: true,
    ...(options.user ? { uid: options.user.uid, gid: options.user.gid } : {}),
  });
  const out = new LineSplitter((line) => {
    tail.add(line);
    firstError.add(line);
    log(line, 'info');
  });
  const err = new LineSplitter((line) => {
    tail.add(line);
    firstError.add(line);
    log(line, /\b(error|ERR!)\b/.test(line) ? 'error' : 'warn');
  });
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => out.push(chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => err.push(chunk));

  let stopped: 'aborted' | 'timeout' | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  const stop = (reason: 'aborted' | 'timeout') => {
    if (stopped || child.exitCode !== null || child.signalCode !== null) return;
    stopped = reason;
    const kill = (sig: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, sig);
      } catch {
        child.kill(sig);
      }
    };
    kill('SIGTERM');
    killTimer = setTimeout(() => kill('SIGKILL'), KILL_GRACE_MS);
    killTimer.unref();
  };
  const onAbort = () => stop('aborted');
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => stop('timeout'), options.timeoutMs);
  timer.unref();

  const result = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
    child.once('error', (error) => resolve({ code: null, signal: null, error }));
    // `close`, not `exit`: all output has been read by then.
    child.once('close', (code, signal) => resolve({ code, signal }));
  });
  clearTimeout(timer);
  options.signal?.removeEventListener('abort', onAbort);
  out.end();
  err.end();
  // The group may still hold stragglers (a postinstall's background child); do not leave them.
  if (killTimer) clearTimeout(killTimer);
  try {
    if (child.pid) process.kill(-child.pid, 'SIGKILL');
  } catch {
    // already gone
  }

  if (stopped === 'aborted') throw new BuildCancelledError(`${label} was stopped: the build was cancelled`, { logTail: tail.lines });
  if (stopped === 'timeout') {
    throw new BuildFailedError(`${label} did not finish within ${Math.round(options.timeoutMs / 1000)} s`, { logTail: tail.lines });
  }
  if (result.error) throw new BuildFailedError(`${label} could not start: ${result.error.message}`, { cause: result.error });
  if (result.code !== 0) {
    const how = result.code === null ? `was killed by ${result.signal}` : `failed with exit code ${result.code}`;
    const cause = firstError.cause;
    if (cause) throw new BuildFailedError(`${label} ${how}: ${cause}`, { logTail: tail.lines });
    const last = tail.lines.slice(-10).join('\n');
    throw new BuildFailedError(`${label} ${how}${last ? `:\n${last}` : ''}`, { logTail: tail.lines });
  }
}
