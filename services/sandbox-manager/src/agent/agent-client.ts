/**
 * Client of `berth-sandboxd`, the agent that runs as PID 1 inside every container sandbox and
 * answers on a Unix socket (protocol.ts). One connection per operation: a command holds its
 * connection for its whole life, so closing it (or the agent going away) ends the command.
 *
 * The socket lives in a folder the sandbox can change, so it is never dialled by path: it is opened
 * without following a symlink, and once pinned (the identity of the socket the agent made when it
 * started) only that very socket is dialled (socket-file.ts).
 */
import type { Socket } from 'node:net';
import { constants } from 'node:os';
import { fileURLToPath } from 'node:url';
import { systemClock, type Clock } from '@berth/clock';
import { fileTooLarge, MAX_FILE_BYTES, SandboxFileError, type ExitInfo, type SandboxProcess } from '../drivers/driver.js';
import {
  decodeError,
  decodeExit,
  encodeData,
  encodeFrame,
  encodeSpawn,
  FrameDecoder,
  FrameType,
  type AgentErrorKind,
  type Frame,
  type SpawnRequest,
} from './protocol.js';
import { connectSocketFile, NotASocketError, sameSocket, type SocketIdentity } from './socket-file.js';

/** The built agent binary (`npm run build` in services/sandbox-manager makes it), from src or dist. */
export function agentBinaryPath(): string {
  return fileURLToPath(new URL('../../dist/agent/berth-sandboxd', import.meta.url));
}

/** The agent could not be reached, went away mid-operation, or answered something unexpected. */
export class AgentError extends Error {
  override readonly name: string = 'AgentError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * What is at the agent's socket path is not the socket its agent made (a symlink, another socket):
 * something inside the sandbox replaced it. Nothing was sent to it.
 */
export class AgentSocketReplacedError extends AgentError {
  override readonly name = 'AgentSocketReplacedError';
}

/** The command could not be started (no such working directory, program not found or not executable). */
export class SpawnError extends Error {
  override readonly name = 'SpawnError';
  constructor(
    readonly kind: AgentErrorKind,
    message: string,
  ) {
    super(message);
  }
}

export interface AgentClientOptions {
  /** How long one connect + first answer may take before the operation fails. @default 10000 */
  answerTimeoutMs?: number;
  /**
   * The socket the agent made (see {@link AgentClient.identify}): only it is dialled, anything else
   * at the path is an AgentSocketReplacedError. Without a pin, any socket there (never a symlink) is.
   * @default no pin
   */
  pin?: SocketIdentity;
  /** How errors name the agent (they reach the sandbox's user: no host path). @default `sandbox agent at <socketPath>` */
  name?: string;
  /** Times {@link AgentClient.waitReady}'s deadline and its pauses between pings. @default systemClock */
  clock?: Clock;
}

const SIGNAL_NAMES = new Map<number, string>(Object.entries(constants.signals).map(([name, num]) => [num, name]));

/** One open connection to the agent, delivering frames in order until it ends. */
class AgentConnection {
  readonly socket: Socket;
  private readonly decoder = new FrameDecoder();
  private ended = false;
  private sending: Promise<void> = Promise.resolve();

  constructor(
    socket: Socket,
    name: string,
    idleTimeoutMs: number,
    private readonly onFrame: (frame: Frame) => void,
    private readonly onEnd: (error?: AgentError) => void,
  ) {
    this.socket = socket;
    // Inactivity, not total time: reading a file of hundreds of MiB takes a while but never stalls.
    this.socket.setTimeout(idleTimeoutMs, () => this.fail(new AgentError(`${name} did not answer within ${idleTimeoutMs} ms`)));
    this.socket.on('data', (chunk: Buffer) => {
      let frames: Frame[];
      try {
        frames = this.decoder.push(chunk);
      } catch (error) {
        this.fail(new AgentError(`${name} sent a malformed frame`, { cause: error }));
        return;
      }
      for (const frame of frames) {
        if (this.ended) return;
        this.onFrame(frame);
      }
    });
    this.socket.on('error', (error) => this.fail(new AgentError(`${name}: ${error.message}`, { cause: error })));
    this.socket.on('close', () => this.fail(new AgentError(`${name} closed the connection`)));
  }

  /**
   * Writes frames after everything sent before, waiting for the socket to drain when it is full
   * (backpressure for large payloads); a later call never overtakes an earlier one.
   */
  send(frames: Buffer[]): Promise<void> {
    this.sending = this.sending.then(async () => {
      for (const frame of frames) {
        if (this.ended) return;
        if (!this.socket.write(frame)) await this.drained();
      }
    });
    return this.sending;
  }

  private drained(): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
  }

  /** A running command may be silent for hours. */
  stopIdleTimer(): void {
    this.socket.setTimeout(0);
  }

  /** Ends the operation normally (no error reported). */
  finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.socket.end();
    this.onEnd();
  }

  /** Ends the operation at once, dropping whatever the agent still sends (no error reported). */
  abandon(): void {
    if (this.ended) return;
    this.ended = true;
    this.socket.destroy();
    this.onEnd();
  }

  fail(error: AgentError): void {
    if (this.ended) return;
    this.ended = true;
    this.socket.destroy();
    this.onEnd(error);
  }
}

class AgentProcess implements SandboxProcess {
  pid = 0;
  readonly exited: Promise<ExitInfo>;
  private resolveExit!: (info: ExitInfo) => void;
  private rejectExit!: (error: Error) => void;
  private listeners: ((stream: 'stdout' | 'stderr', chunk: Buffer) => void)[] = [];
  /** Output that arrived before anyone listened. */
  private pending: ['stdout' | 'stderr', Buffer][] = [];
  private done = false;
  private stdinClosed = false;
  private killed = false;

  constructor(private readonly connection: AgentConnection) {
    this.exited = new Promise<ExitInfo>((resolve, reject) => {
      this.resolveExit = resolve;
      this.rejectExit = reject;
    });
    // Callers that never await `exited` must not crash the process with an unhandled rejection.
    this.exited.catch(() => undefined);
  }

  onOutput(listener: (stream: 'stdout' | 'stderr', chunk: Buffer) => void): void {
    this.listeners.push(listener);
    const pending = this.pending;
    this.pending = [];
    for (const [stream, chunk] of pending) listener(stream, chunk);
  }

  write(data: Buffer): void {
    if (this.done || this.stdinClosed || data.length === 0) return;
    void this.connection.send(encodeData(data));
  }

  closeStdin(): void {
    if (this.done || this.stdinClosed) return;
    this.stdinClosed = true;
    void this.connection.send([encodeFrame(FrameType.EOF)]);
  }

  kill(): void {
    if (this.done || this.killed) return;
    this.killed = true;
    void this.connection.send([encodeFrame(FrameType.KILL)]);
  }

  output(stream: 'stdout' | 'stderr', chunk: Buffer): void {
    if (this.listeners.length === 0) this.pending.push([stream, chunk]);
    for (const listener of this.listeners) listener(stream, chunk);
  }

  exit(info: ExitInfo): void {
    this.done = true;
    this.resolveExit(info);
  }

  lost(error: AgentError): void {
    this.done = true;
    this.rejectExit(error);
  }
}

export class AgentClient {
  private readonly answerTimeoutMs: number;
  private readonly pin: SocketIdentity | undefined;
  private readonly name: string;
  private readonly clock: Clock;

  constructor(
    readonly socketPath: string,
    options: AgentClientOptions = {},
  ) {
    this.answerTimeoutMs = options.answerTimeoutMs ?? 10_000;
    this.pin = options.pin;
    this.name = options.name ?? `sandbox agent at ${socketPath}`;
    this.clock = options.clock ?? systemClock;
  }

  /** The agent's version line, e.g. `berth-sandboxd 1`. */
  async ping(timeoutMs = this.answerTimeoutMs): Promise<string> {
    return (await this.pingSocket(timeoutMs)).version;
  }

  /**
   * Pings the agent; resolves with the identity of the socket that answered, to pin (only when no
   * one but the agent can have made that socket: right after its sandbox started, before any command).
   */
  async identify(timeoutMs = this.answerTimeoutMs): Promise<SocketIdentity> {
    return (await this.pingSocket(timeoutMs)).identity;
  }

  /**
   * Resolves once the agent answers a ping (it starts with the container), with the identity of its
   * socket; AgentError after `timeoutMs`.
   */
  async waitReady(timeoutMs: number): Promise<SocketIdentity> {
    const deadline = this.clock.now() + timeoutMs;
    let lastError: unknown;
    for (;;) {
      try {
        return await this.identify(Math.max(1, deadline - this.clock.now()));
      } catch (error) {
        if (error instanceof AgentSocketReplacedError) throw error;
        lastError = error;
      }
      const left = deadline - this.clock.now();
      if (left <= 0) break;
      await this.clock.sleep(Math.min(10, left));
    }
    throw new AgentError(`${this.name} did not answer within ${timeoutMs} ms`, { cause: lastError });
  }

  /** Starts a command; SpawnError when it cannot start, AgentError when the agent is unreachable. */
  async spawn(spec: SpawnRequest): Promise<SandboxProcess> {
    let request: Buffer;
    try {
      request = encodeSpawn(spec);
    } catch (error) {
      // A NUL in the command, an empty argv: the caller's input, not the agent's fault.
      throw new SpawnError('bad_request', (error as Error).message);
    }
    return new Promise<SandboxProcess>((resolve, reject) => {
      let process: AgentProcess | undefined;
      const connection = new AgentConnection(
        this.dial().socket,
        this.name,
        this.answerTimeoutMs,
        (frame) => {
          try {
            if (!process) {
              connection.stopIdleTimer();
              if (frame.type === FrameType.ERROR) {
                const { kind, message } = decodeError(frame.payload);
                connection.finish();
                reject(new SpawnError(kind, message));
                return;
              }
              if (frame.type !== FrameType.STARTED || frame.payload.length !== 4) throw this.unexpected(frame);
              process = new AgentProcess(connection);
              process.pid = frame.payload.readUInt32BE(0);
              resolve(process);
              return;
            }
            if (frame.type === FrameType.STDOUT) process.output('stdout', frame.payload);
            else if (frame.type === FrameType.STDERR) process.output('stderr', frame.payload);
            else if (frame.type === FrameType.EXIT) {
              const { exitCode, signal, oomKilled } = decodeExit(frame.payload);
              connection.finish();
              process.exit({
                exitCode: signal > 0 ? 128 + signal : exitCode,
                ...(signal > 0 ? { signal: SIGNAL_NAMES.get(signal) ?? `SIG${signal}` } : {}),
                oomKilled,
              });
            } else throw this.unexpected(frame);
          } catch (error) {
            connection.fail(error instanceof AgentError ? error : new AgentError('sandbox agent sent a malformed frame', { cause: error }));
          }
        },
        (error) => {
          if (!error) return;
          if (process) process.lost(error);
          else reject(error);
        },
      );
      void connection.send([request]);
    });
  }

  /** Writes (replaces) a file, creating its parent directories; SandboxFileError when it cannot. */
  async writeFile(path: string, data: Buffer): Promise<void> {
    const frames = [encodeFrame(FrameType.WRITE_FILE, Buffer.from(path, 'utf8')), ...encodeData(data), encodeFrame(FrameType.EOF)];
    return this.request(frames, this.answerTimeoutMs, (frame, answer) => {
      if (frame.type === FrameType.OK) answer(undefined);
      else throw this.fileError(frame, path);
    });
  }

  /**
   * Reads a whole file; SandboxFileError when it cannot, `too_large` (without reading on) past
   * `maxBytes`, which bounds what the agent can make this process hold.
   */
  async readFile(path: string, maxBytes = MAX_FILE_BYTES): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let size = 0;
    return this.request([encodeFrame(FrameType.READ_FILE, Buffer.from(path, 'utf8'))], this.answerTimeoutMs, (frame, answer) => {
      if (frame.type === FrameType.FILE_DATA) {
        size += frame.payload.length;
        if (size > maxBytes) throw fileTooLarge(path, maxBytes);
        chunks.push(frame.payload);
      } else if (frame.type === FrameType.FILE_END) answer(Buffer.concat(chunks));
      else throw this.fileError(frame, path);
    });
  }

  /**
   * A connection to the agent's socket: opened without following a symlink, and when pinned only
   * to the pinned socket, so nothing the caller sends can reach anything else.
   */
  private dial(): { socket: Socket; identity: SocketIdentity } {
    try {
      return connectSocketFile(this.socketPath, (identity) => {
        if (this.pin && !sameSocket(identity, this.pin)) throw new AgentSocketReplacedError(`${this.name}: its socket is another socket than the one it made`);
      });
    } catch (error) {
      if (error instanceof AgentError) throw error;
      if (error instanceof NotASocketError) {
        const message = `${this.name}: its socket is ${error.found}`;
        throw this.pin ? new AgentSocketReplacedError(`${message}, not the one it made`, { cause: error }) : new AgentError(message, { cause: error });
      }
      const code = (error as NodeJS.ErrnoException).code;
      throw new AgentError(`${this.name}: ${code === 'ENOENT' ? 'no socket' : (code ?? (error as Error).message)}`, { cause: error });
    }
  }

  private async pingSocket(timeoutMs: number): Promise<{ version: string; identity: SocketIdentity }> {
    let identity: SocketIdentity | undefined;
    const version = await this.request<string>(
      [encodeFrame(FrameType.PING)],
      timeoutMs,
      (frame, answer) => {
        if (frame.type !== FrameType.PONG) throw this.unexpected(frame);
        answer(frame.payload.toString('utf8'));
      },
      (dialled) => (identity = dialled),
    );
    return { version, identity: identity! };
  }

  /**
   * Sends `frames` on a new connection and feeds answers to `handle` until it calls `answer` or
   * throws (which drops the connection at once); `dialled` learns which socket it reached.
   */
  private request<T>(
    frames: Buffer[],
    idleTimeoutMs: number,
    handle: (frame: Frame, answer: (value: T) => void) => void,
    dialled?: (identity: SocketIdentity) => void,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const { socket, identity } = this.dial();
      dialled?.(identity);
      const connection = new AgentConnection(
        socket,
        this.name,
        idleTimeoutMs,
        (frame) => {
          try {
            handle(frame, (value) => {
              settled = true;
              connection.finish();
              resolve(value);
            });
          } catch (error) {
            settled = true;
            connection.abandon();
            reject(error);
          }
        },
        (error) => {
          if (!settled && error) reject(error);
        },
      );
      void connection.send(frames);
    });
  }

  private fileError(frame: Frame, path: string): Error {
    if (frame.type !== FrameType.ERROR) return this.unexpected(frame);
    const { kind, message } = decodeError(frame.payload);
    if (kind === 'bad_request') return new AgentError(`sandbox agent refused the request for ${path}: ${message}`);
    return new SandboxFileError(kind, `${path}: ${message}`);
  }

  private unexpected(frame: Frame): AgentError {
    if (frame.type === FrameType.ERROR) {
      const { message } = decodeError(frame.payload);
      return new AgentError(`${this.name} refused the request: ${message}`);
    }
    return new AgentError(`${this.name} sent an unexpected frame 0x${frame.type.toString(16)}`);
  }
}
