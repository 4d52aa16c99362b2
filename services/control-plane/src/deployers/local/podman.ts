/**
 * The podman CLI, pointed at one engine: the platform's private one (its own storage, runroot and
 * configuration files), which sandboxes use too. The CLI rather than the engine's Docker-compatible
 * API because only the CLI passes file descriptors into a container (`--preserve-fds`).
 */
import { execFile, spawn, type ChildProcess, type StdioOptions } from 'node:child_process';

/** How to run podman against the engine. */
export interface PodmanCommand {
  /** @default 'podman' (found on `env.PATH`) */
  binary?: string;
  /** Global flags before every subcommand (`--root`, `--runroot`, `--storage-driver`). */
  args: string[];
  /** The whole environment of podman (`PATH`, `CONTAINERS_CONF`, …): nothing else is inherited. */
  env: Record<string, string>;
}

/** A podman command that failed; `stderr` is what it said. */
export class PodmanError extends Error {
  override readonly name = 'PodmanError';
  constructor(
    readonly args: string[],
    readonly stderr: string,
    options?: { cause?: unknown },
  ) {
    super(`podman ${args.join(' ')} failed: ${stderr.trim().split('\n').at(-1) || (options?.cause as Error | undefined)?.message || 'no output'}`, options);
  }
}

export class Podman {
  /**
   * @param cwd where `spawn` runs podman: conmon leaves an `oom` marker file in its working
   * directory after a container's OOM kill, which must not be the control plane's.
   */
  constructor(
    private readonly command: PodmanCommand,
    private readonly cwd?: string,
  ) {}

  /** Runs a command to its end and resolves with what it printed; PodmanError when it fails. */
  run(args: string[], timeoutMs = 60_000): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(
        this.binary,
        [...this.command.args, ...args],
        { env: this.command.env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 },
        (error, stdout, stderr) => {
          if (error) reject(new PodmanError(args, String(stderr), { cause: error }));
          else resolve(String(stdout));
        },
      );
    });
  }

  /** Starts a command that runs on (`run` attached to its container). */
  spawn(args: string[], stdio: StdioOptions): ChildProcess {
    return spawn(this.binary, [...this.command.args, ...args], { env: this.command.env, stdio, ...(this.cwd ? { cwd: this.cwd } : {}) });
  }

  private get binary(): string {
    return this.command.binary ?? 'podman';
  }
}
