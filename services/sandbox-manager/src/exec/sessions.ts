/**
 * Commands of sandboxes as the exec protocol sees them: each has a client-chosen id (get-or-create,
 * so a retried `execute` re-attaches instead of running twice), a deadline after which it is killed
 * and reported, output kept for reconnects (by byte offset) until `ttl_seconds` after it ended,
 * and an idle timeout that kills it when no client has been attached for that long. Sessions live
 * in the manager that started the command.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { systemClock, type Clock, type Timer } from '@berth/clock';
import { isBerthError } from '@berth/errors';
import type { Logger } from '@berth/log';
import type { ExecuteRequest, ExecuteResponseSchema, ExecStart } from '@berth/proto';
import { Pushable } from '@berth/rpc';
import type { ExitInfo, SandboxDriver, SandboxProcess } from '../drivers/driver.js';
import type { SandboxRow } from '../sandboxes/store.js';
import { OutputBuffer } from './output-buffer.js';

export type ServerMessage = MessageInitShape<typeof ExecuteResponseSchema>;

export interface ExecDefaults {
  /** @default 60 */
  timeoutSeconds: number;
  /** @default 300 */
  idleTimeoutSeconds: number;
  /** @default 600 */
  ttlSeconds: number;
}

export interface CommandSessionsDeps {
  driver: SandboxDriver;
  /** The sandbox, ready (a stopped one is started); throws when it cannot be. */
  ensureReady(tenantId: string, sandboxId: string): Promise<SandboxRow>;
  touch(sandboxId: string): Promise<void>;
  logger: Logger;
  defaults: ExecDefaults;
  /** Times deadlines, idle timeouts, activity and how long output is kept. @default systemClock */
  clock?: Clock;
}

type Outcome = { exit: ExitInfo } | { error: { type: string; message: string } };

const started = (commandId: string, pid: number): ServerMessage => ({ kind: { case: 'started', value: { commandId, pid } } });
const errorMessage = (type: string, message: string): ServerMessage => ({ kind: { case: 'error', value: { errorType: type, message } } });
/** How often a running command counts as activity for its sandbox's idle TTL. */
const ACTIVITY_MS = 30_000;

class CommandSession {
  readonly stdout = new OutputBuffer();
  readonly stderr = new OutputBuffer();
  outcome: Outcome | undefined;
  #attached = 0;
  #timedOut = false;
  #idleTimer: Timer | undefined;
  readonly #finishers = new Set<() => void>();
  readonly #timers: Timer[] = [];

  constructor(
    readonly key: string,
    readonly sandboxId: string,
    readonly commandId: string,
    readonly process: SandboxProcess,
    private readonly options: { timeoutSeconds: number; idleTimeoutSeconds: number; killOnDisconnect: boolean; ttlSeconds: number; clock: Clock },
    private readonly onEnd: (session: CommandSession) => void,
    private readonly onActivity: () => void,
  ) {
    process.onOutput((stream, chunk) => (stream === 'stdout' ? this.stdout : this.stderr).append(chunk));
    if (options.timeoutSeconds > 0) {
      this.#timers.push(
        options.clock.setTimeout(() => {
          this.#timedOut = true;
          process.kill();
        }, options.timeoutSeconds * 1000),
      );
    }
    this.#timers.push(options.clock.setInterval(onActivity, ACTIVITY_MS));
    process.exited.then(
      (exit) =>
        this.finish(
          this.#timedOut
            ? { error: { type: 'CommandTimeout', message: `the command did not finish within ${options.timeoutSeconds} s and was killed` } }
            : { exit },
        ),
      (error: unknown) =>
        this.finish({ error: { type: 'CommandError', message: `the command was cut off: ${error instanceof Error ? error.message : String(error)}` } }),
    );
  }

  get running(): boolean {
    return this.outcome === undefined;
  }

  /** Sends output from the given offsets, then every new piece, then the outcome; `out` ends after it. */
  attach(out: Pushable<ServerMessage>, from: { stdout: number; stderr: number }): () => void {
    this.#attached++;
    this.#idleTimer?.cancel();
    const send = (stream: 'stdout' | 'stderr') => (piece: { offset: number; data: string }) =>
      out.push({ kind: { case: 'output', value: { stream, data: piece.data, offset: BigInt(piece.offset) } } });
    for (const stream of ['stdout', 'stderr'] as const) for (const piece of this[stream].since(from[stream])) send(stream)(piece);
    const unsubscribe = [this.stdout.subscribe(send('stdout')), this.stderr.subscribe(send('stderr'))];
    const finisher = () => {
      const outcome = this.outcome!;
      out.push(
        'exit' in outcome
          ? { kind: { case: 'exit', value: { exitCode: outcome.exit.exitCode, oomKilled: outcome.exit.oomKilled } } }
          : errorMessage(outcome.error.type, outcome.error.message),
      );
      out.end();
    };
    if (this.outcome) finisher();
    else this.#finishers.add(finisher);
    let detached = false;
    return () => {
      if (detached) return;
      detached = true;
      for (const stop of unsubscribe) stop();
      this.#finishers.delete(finisher);
      this.#attached--;
      if (this.#attached === 0 && this.running) this.unattended();
    };
  }

  kill(): void {
    this.process.kill();
  }

  /** The last client went away while the command runs. */
  private unattended(): void {
    if (this.options.killOnDisconnect) return this.kill();
    if (this.options.idleTimeoutSeconds < 0) return;
    this.#idleTimer = this.options.clock.setTimeout(() => {
      if (this.#attached === 0) this.kill();
    }, this.options.idleTimeoutSeconds * 1000);
  }

  private finish(outcome: Outcome): void {
    this.stdout.flush();
    this.stderr.flush();
    this.outcome = outcome;
    for (const timer of this.#timers) timer.cancel();
    this.#idleTimer?.cancel();
    this.onActivity();
    for (const finisher of [...this.#finishers]) finisher();
    this.#finishers.clear();
    if (this.options.ttlSeconds >= 0) {
      this.options.clock.setTimeout(() => this.onEnd(this), this.options.ttlSeconds * 1000);
    }
  }
}

export class CommandSessions {
  readonly #sessions = new Map<string, CommandSession>();
  readonly #starting = new Map<string, Promise<CommandSession>>();

  constructor(private readonly deps: CommandSessionsDeps) {}

  /** Commands of a sandbox still running (they keep it from counting as idle). */
  runningCount(sandboxId: string): number {
    let count = 0;
    for (const session of this.#sessions.values()) if (session.sandboxId === sandboxId && session.running) count++;
    return count;
  }

  /** The sandbox stopped or went: its commands are killed and forgotten. */
  endSandbox(sandboxId: string): void {
    for (const [key, session] of this.#sessions) {
      if (session.sandboxId !== sandboxId) continue;
      session.kill();
      this.#sessions.delete(key);
    }
  }

  close(): void {
    for (const session of this.#sessions.values()) session.kill();
    this.#sessions.clear();
  }

  /** One exec stream: the first client message is execute or reconnect; see the module comment. */
  async *execute(requests: AsyncIterable<ExecuteRequest>, tenantId: (first: ExecuteRequest) => string): AsyncGenerator<ServerMessage> {
    const iterator = requests[Symbol.asyncIterator]();
    const first = await iterator.next();
    if (first.done) return;
    const kind = first.value.kind;
    const out = new Pushable<ServerMessage>();
    let session: CommandSession | undefined;
    try {
      if (kind.case === 'execute') {
        session = await this.getOrStart(tenantId(first.value), kind.value);
        out.push(started(session.commandId, session.process.pid));
      } else if (kind.case === 'reconnect') {
        session = this.#sessions.get(`${kind.value.sandboxId}:${kind.value.commandId}`);
        if (!session) {
          yield errorMessage('CommandNotFound', `no command "${kind.value.commandId}" in this sandbox (unknown, or its output was dropped after ttl_seconds)`);
          return;
        }
        out.push(started(session.commandId, session.process.pid));
      } else {
        yield errorMessage('CommandError', 'the first message must be "execute" or "reconnect"');
        return;
      }
    } catch (error) {
      if (!isBerthError(error) || error.code === 'not_found' || error.code === 'unavailable') throw error;
      yield errorMessage(error.code === 'conflict' ? 'NotReady' : 'CommandError', error.message);
      return;
    }
    const from = kind.case === 'reconnect' ? { stdout: Number(kind.value.stdoutOffset), stderr: Number(kind.value.stderrOffset) } : { stdout: 0, stderr: 0 };
    const detach = session.attach(out, from);
    const control = session;
    const pump = (async () => {
      for (;;) {
        const next = await iterator.next();
        if (next.done) return;
        const message = next.value.kind;
        if (message.case === 'input') control.process.write(Buffer.from(message.value.data, 'utf8'));
        else if (message.case === 'closeStdin') control.process.closeStdin();
        else if (message.case === 'kill') control.kill();
      }
    })()
      .catch((error: unknown) => this.deps.logger.debug({ err: error }, 'exec client stream failed'))
      .finally(() => {
        // The client went away: stop sending (the command itself follows its own rules).
        detach();
        out.end();
      });
    try {
      yield* out;
    } finally {
      detach();
      void pump;
    }
  }

  private async getOrStart(tenantId: string, request: ExecStart): Promise<CommandSession> {
    const key = `${request.sandboxId}:${request.commandId}`;
    const existing = this.#sessions.get(key) ?? (await this.#starting.get(key));
    if (existing) return existing;
    const starting = this.start(tenantId, key, request);
    this.#starting.set(key, starting);
    try {
      return await starting;
    } finally {
      this.#starting.delete(key);
    }
  }

  private async start(tenantId: string, key: string, request: ExecStart): Promise<CommandSession> {
    const sandbox = await this.deps.ensureReady(tenantId, request.sandboxId);
    const runConfig = sandbox.run_config;
    const cwd = request.cwd ?? runConfig?.work_dir;
    const process = await this.deps.driver.exec(sandbox.instance, {
      command: request.command,
      shell: request.shell || '/bin/bash',
      env: { ...(runConfig?.env_vars ?? {}), ...request.env },
      ...(cwd ? { cwd } : {}),
    });
    if (request.closeStdin) process.closeStdin();
    const { defaults } = this.deps;
    const session = new CommandSession(
      key,
      sandbox.id,
      request.commandId,
      process,
      {
        timeoutSeconds: request.timeoutSeconds > 0 ? request.timeoutSeconds : defaults.timeoutSeconds,
        idleTimeoutSeconds: request.idleTimeoutSeconds === 0 ? defaults.idleTimeoutSeconds : request.idleTimeoutSeconds,
        killOnDisconnect: request.killOnDisconnect,
        ttlSeconds: request.ttlSeconds === 0 ? defaults.ttlSeconds : request.ttlSeconds,
        clock: this.deps.clock ?? systemClock,
      },
      (ended) => {
        if (this.#sessions.get(ended.key) === ended) this.#sessions.delete(ended.key);
      },
      () =>
        void this.deps
          .touch(sandbox.id)
          .catch((error: unknown) => this.deps.logger.warn({ err: error, sandbox: sandbox.id }, 'recording sandbox activity failed')),
    );
    this.#sessions.set(key, session);
    void this.deps.touch(sandbox.id);
    return session;
  }
}
