/**
 * A long-running child process of a test (a service, an agent server) whose output is kept, so a
 * failure can show what it printed, and which the test's teardown stops and waits for.
 */
import { spawn, type ChildProcess } from 'node:child_process';

export interface TestChild {
  child: ChildProcess;
  /** Everything it printed so far (stdout and stderr, interleaved). */
  output(): string;
  /** SIGTERM, then resolves once it exited (at once when it already has). */
  stop(): Promise<void>;
}

export function spawnTestChild(command: string, args: string[], options: { env: NodeJS.ProcessEnv; cwd?: string }): TestChild {
  const child = spawn(command, args, { env: options.env, ...(options.cwd ? { cwd: options.cwd } : {}), stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d) => (output += String(d)));
  child.stderr!.on('data', (d) => (output += String(d)));
  return {
    child,
    output: () => output,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
