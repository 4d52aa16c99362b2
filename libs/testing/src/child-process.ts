/**
 * A long-running child process of a test (a service, an agent server) whose output is kept, so a
 * failure can show what it printed, which a test can wait on until it prints a line (`ready at …`),
 * and which the test's teardown stops and waits for.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';

export interface TestChildOptions {
  env: NodeJS.ProcessEnv;
  cwd?: string;
  /**
   * Where its stderr goes: kept in `output()` with its stdout, or straight to the test's own stderr,
   * so that a crash after it started still shows in the test log (`output()` then has stdout only).
   * @default 'pipe'
   */
  stderr?: 'pipe' | 'inherit';
}

export interface WaitForOutputOptions {
  /** @default 60_000 */
  timeoutMs?: number;
}

export interface TestChild {
  child: ChildProcess;
  /** Everything it printed so far (stdout and stderr, interleaved). */
  output(): string;
  /**
   * Resolves with the first match of `pattern` in its output, printed so far or to come. Rejects, with
   * the output in the message, when it exits (or cannot be started) before printing one, or after
   * `timeoutMs`; the child is left running then (teardown stops it).
   */
  waitForOutput(pattern: RegExp, options?: WaitForOutputOptions): Promise<RegExpExecArray>;
  /**
   * SIGTERM (unless the test signalled it already, e.g. with SIGKILL), then resolves once it exited (at
   * once when it already has) with its exit code (null when a signal ended it), its output read to the end.
   */
  stop(): Promise<number | null>;
}

/** How long the pipes may stay open after it exited: a process it started may hold them. */
const DRAIN_MS = 1000;

export function spawnTestChild(command: string, args: string[], options: TestChildOptions): TestChild {
  const child = spawn(command, args, {
    env: options.env,
    ...(options.cwd ? { cwd: options.cwd } : {}),
    stdio: ['ignore', 'pipe', options.stderr ?? 'pipe'],
  });
  let output = '';
  const changes = new EventEmitter();
  for (const stream of [child.stdout, child.stderr]) {
    stream?.setEncoding('utf8');
    stream?.on('data', (text: string) => {
      output += text;
      changes.emit('change');
    });
  }
  /** Why it will print no more, once it is so. */
  let ended: string | undefined;
  const end = (why: string) => {
    ended ??= why;
    changes.emit('change');
  };
  const done = new Promise<void>((resolve) => {
    changes.once('end', resolve);
    child.once('error', (error) => {
      end(`could not be started (${error.message})`);
      changes.emit('end');
    });
    child.once('exit', (code, signal) => {
      // Its last lines can still be in the pipes.
      const drained = () => {
        clearTimeout(timer);
        end(`exited (code ${code}, signal ${signal})`);
        changes.emit('end');
      };
      const timer = setTimeout(drained, DRAIN_MS);
      child.once('close', drained);
    });
  });

  return {
    child,
    output: () => output,
    waitForOutput: (pattern, { timeoutMs = 60_000 } = {}) => {
      // A global or sticky pattern would match from its lastIndex; the first match is meant.
      const once = new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, ''));
      return new Promise<RegExpExecArray>((resolve, reject) => {
        const check = () => {
          const match = once.exec(output);
          if (match) finish(() => resolve(match));
          else if (ended) finish(() => reject(new Error(`${command} ${ended} before printing ${pattern}; it printed:\n${output}`)));
        };
        const timer = setTimeout(
          () => finish(() => reject(new Error(`${command} did not print ${pattern} within ${timeoutMs} ms; it printed:\n${output}`))),
          timeoutMs,
        );
        const finish = (settle: () => void) => {
          clearTimeout(timer);
          changes.off('change', check);
          settle();
        };
        changes.on('change', check);
        check();
      });
    },
    stop: async () => {
      if (!ended && !child.killed && child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await done;
      return child.exitCode;
    },
  };
}
