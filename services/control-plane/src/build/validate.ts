/**
 * The builder's side of the validation process (`validate-child.ts`): starts it early so that its
 * imports overlap the dependency install, then asks it to load the project and turns what it says
 * (or how it dies) into a result or a `BuildFailedError`.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BuildCancelledError, BuildFailedError } from './errors.js';
import { LineSplitter, LogTail, type BuildLog } from './run-command.js';
import type { ValidatedGraph, ValidateMessage, ValidateRequest } from './validate-child.js';

/** From sources (tests, `tsx`) the child is TypeScript too and needs tsx and the source condition. */
const FROM_SOURCE = import.meta.url.endsWith('.ts');
const CHILD_SCRIPT = fileURLToPath(new URL(`./validate-child.${FROM_SOURCE ? 'ts' : 'js'}`, import.meta.url));
/** tsx's loader by absolute path: `--import tsx` would resolve from the project's folder. */
function tsxLoader(): string {
  const manifest = createRequire(import.meta.url).resolve('tsx/package.json');
  return join(dirname(manifest), 'dist', 'loader.mjs');
}
const CHILD_EXEC_ARGV = FROM_SOURCE ? ['--conditions=berth-source', '--import', tsxLoader()] : [];

export interface ValidationResult {
  graphs: ValidatedGraph[];
  warnings: string[];
}

export interface ValidationProcessOptions {
  /** Folder the process runs in (the project's). */
  cwd: string;
  /** Its whole environment (nothing is inherited from the control plane). */
  env: Record<string, string>;
  log: BuildLog;
  /**
   * Rewrites text before it is logged or put in an error, e.g. to show paths relative to the
   * project instead of the artifact folder.
   */
  clean: (text: string) => string;
  /** The OS user and group to run it as (the control plane's own when unset). */
  user?: { uid: number; gid: number };
}

/** One validation process; use it once. */
export class ValidationProcess {
  readonly #child: ChildProcess;
  readonly #tail = new LogTail();
  readonly #messages: ValidateMessage[] = [];
  #wake: (() => void) | undefined;
  #exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  #spawnError: Error | undefined;

  constructor(private readonly options: ValidationProcessOptions) {
    this.#child = fork(CHILD_SCRIPT, [], {
      cwd: options.cwd,
      env: options.env,
      execArgv: CHILD_EXEC_ARGV,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      serialization: 'json',
      ...(options.user ? { uid: options.user.uid, gid: options.user.gid } : {}),
    });
    const line = (level: 'info' | 'warn') => (text: string) => {
      const cleaned = options.clean(text);
      this.#tail.add(cleaned);
      options.log(cleaned, level);
    };
    const out = new LineSplitter(line('info'));
    const err = new LineSplitter(line('warn'));
    this.#child.stdout!.setEncoding('utf8').on('data', (chunk: string) => out.push(chunk));
    this.#child.stderr!.setEncoding('utf8').on('data', (chunk: string) => err.push(chunk));
    this.#child.on('message', (message: ValidateMessage) => {
      this.#messages.push(message);
      this.#wake?.();
    });
    // `on`, not `once`: a second 'error' without a listener would crash the control plane.
    this.#child.on('error', (error) => {
      this.#spawnError ??= error;
      this.#wake?.();
    });
    this.#child.once('close', (code, signal) => {
      out.end();
      err.end();
      this.#exit = { code, signal };
      this.#wake?.();
    });
  }

  /** Resolves at the next message, exit or spawn error. */
  async #next<T>(pick: () => T | undefined): Promise<T> {
    for (;;) {
      const found = pick();
      if (found !== undefined) return found;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
      this.#wake = undefined;
    }
  }

  /**
   * Loads the project at `configPath` (absolute) with `env` visible to its code.
   * @throws BuildFailedError saying what is wrong (bad `langgraph.json`, a graph that does not
   *   load, project code that exits or hangs past `timeoutMs`); BuildCancelledError on abort.
   */
  async validate(configPath: string, env: Record<string, string>, timeoutMs: number, signal?: AbortSignal): Promise<ValidationResult> {
    const { clean } = this.options;
    let timedOut = false;
    let cancelled = false;
    const timer = setTimeout(() => {
      timedOut = true;
      this.kill();
    }, timeoutMs);
    timer.unref();
    const onAbort = () => {
      cancelled = true;
      this.kill();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) onAbort();
    try {
      const ended = () => (this.#exit || this.#spawnError ? ('ended' as const) : undefined);
      const ready = await this.#next(() => (this.#messages.some((m) => m.type === 'ready') ? ('ready' as const) : ended()));
      if (ready === 'ready') {
        const request: ValidateRequest = { type: 'validate', configPath, env };
        // The callback takes a send error (the process died meanwhile); its exit is handled below.
        this.#child.send(request, () => undefined);
      }
      const outcome = await this.#next(() => this.#messages.find((m) => m.type !== 'ready') ?? ended());
      if (cancelled) throw new BuildCancelledError('validating the project was stopped: the build was cancelled');
      if (timedOut) {
        throw new BuildFailedError(
          `loading the project's graphs did not finish within ${Math.round(timeoutMs / 1000)} s (does a graph module wait for something at import time?)`,
          { logTail: this.#tail.lines },
        );
      }
      if (outcome === 'ended') {
        if (this.#spawnError) {
          throw new BuildFailedError(`the validation process could not start: ${this.#spawnError.message}`, { cause: this.#spawnError });
        }
        if (ready !== 'ready') {
          // Before `ready` no project code has run: this is the control plane's installation.
          throw new BuildFailedError(
            `the validation process failed to start (exit code ${this.#exit!.code ?? this.#exit!.signal}): ${this.#tail.lines.slice(-5).join('\n')}`,
            { logTail: this.#tail.lines },
          );
        }
        const how = this.#exit!.code !== null ? `exited with code ${this.#exit!.code}` : `was killed by ${this.#exit!.signal}`;
        const last = this.#tail.lines.slice(-10).join('\n');
        throw new BuildFailedError(`the project's code ended the validation process while loading (it ${how})${last ? `:\n${last}` : ''}`, {
          logTail: this.#tail.lines,
        });
      }
      if (outcome.type === 'failed') {
        const detail = outcome.causes.filter((c) => !outcome.message.includes(c)).map(clean);
        const message = [clean(outcome.message), ...detail].join('\n  caused by: ');
        throw new BuildFailedError(message, { logTail: [...this.#tail.lines, ...message.split('\n')].slice(-30) });
      }
      return { graphs: outcome.graphs, warnings: outcome.warnings.map(clean) };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Stops the process (idempotent). */
  kill(): void {
    if (this.#exit === undefined && this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill('SIGKILL');
  }

  /** Resolves once the process has exited. */
  async closed(): Promise<void> {
    await this.#next(() => (this.#exit || this.#spawnError ? true : undefined));
  }
}
