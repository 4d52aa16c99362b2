import { spawn } from 'node:child_process';

export class CommandError extends Error {
  readonly stderr: string;
  constructor(message: string, stderr: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CommandError';
    this.stderr = stderr;
  }
}

export interface RunOptions {
  env?: NodeJS.ProcessEnv;
  /** @default 120000 */
  timeoutMs?: number;
  /**
   * Runs it in a process group of its own, so that a signal to the caller's group (a terminal's
   * Ctrl-C, a test runner or CI step stopping it) does not cut it off half-way: the caller lets it
   * finish and then undoes what it did (stops the server it started).
   * @default false
   */
  detached?: boolean;
}

/** Output kept per stream; more is dropped (a command's error is in its last lines anyway). */
const MAX_OUTPUT = 16 * 1024 * 1024;

/** Runs a command to completion; rejects with its stderr on a non-zero exit. */
export function run(command: string, args: string[], options: RunOptions = {}): Promise<{ stdout: string; stderr: string }> {
  const timeoutMs = options.timeoutMs ?? 120_000;
  const failed = (why: string, stderr: string, cause?: unknown) =>
    new CommandError(`${command} ${args.join(' ')} failed: ${stderr.trim() || why}`, stderr, cause === undefined ? undefined : { cause });
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: options.env, detached: options.detached ?? false, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout = (stdout + text).slice(-MAX_OUTPUT)));
    child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr = (stderr + text).slice(-MAX_OUTPUT)));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
    }, timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(failed(error.message, '', error));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve({ stdout, stderr });
      else reject(failed(timedOut ? `timed out after ${timeoutMs} ms` : signal ? `killed by ${signal}` : `exit code ${code}`, stderr));
    });
  });
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
