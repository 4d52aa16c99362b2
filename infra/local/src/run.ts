import { execFile } from 'node:child_process';

export class CommandError extends Error {
  readonly stderr: string;
  constructor(message: string, stderr: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CommandError';
    this.stderr = stderr;
  }
}

/** Runs a command to completion; rejects with its stderr on a non-zero exit. */
export function run(
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { env: options.env, timeout: options.timeoutMs ?? 120_000, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) {
          reject(new CommandError(`${command} ${args.join(' ')} failed: ${stderr.trim() || error.message}`, stderr, { cause: error }));
        } else {
          resolve({ stdout, stderr });
        }
      },
    );
  });
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
