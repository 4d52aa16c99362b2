/**
 * Commands and files in a sandbox pod through the Kubernetes exec API (`pods/exec`, WebSocket,
 * `v5.channel.k8s.io`: stdin can be closed while output still flows; Kubernetes ≥ 1.30 serves it).
 *
 * The exec API runs an argv in a container: no cwd, no env of its own, no pid, no way to signal.
 * So every command runs under a small POSIX `sh` wrapper (the image needs `/bin/sh`) that prints
 * its pid on stderr as the first line (taken off the output), exports the command's env, changes
 * to its cwd and `exec`s the user's shell with the command (keeping the pid).
 *
 * Kill: a second exec runs {@link KILL_SCRIPT} with that pid. It stops (SIGSTOP) the process and,
 * walking `/proc/<pid>/stat` for parent pids, every descendant top-down — so nothing forks away
 * while it looks — then SIGKILLs the process group the command leads (if it leads one: that also
 * catches children that were re-parented) and every process it stopped. The command's own exec
 * then ends with exit code 137, as a SIGKILLed container process does. Chosen over `setsid` (not
 * in every image, and it forks when the caller leads a group, losing the exit code) and over
 * killing the whole container (which would end the sandbox).
 *
 * Files go through exec too, binary-safe: `cat > path` after `mkdir -p` of its folder to write
 * (stdin carries the bytes), `cat path` to read (stdout carries them), with exit codes telling
 * "no such file" from "is a directory" from "permission denied".
 */
import { PassThrough, Writable } from 'node:stream';
import { constants } from 'node:os';
import type { Exec, V1Status } from '@kubernetes/client-node';
import { InstanceError, SandboxFileError, type ExitInfo, type SandboxProcess } from '../driver.js';

type Connection = Awaited<ReturnType<Exec['exec']>>;

const PID_MARKER = 'berth-exec-pid:';

/** `sh -c EXEC_WRAPPER berth-exec SHELL CWD COMMAND [NAME=VALUE…]`. */
export const EXEC_WRAPPER = [
  `printf '${PID_MARKER}%s\\n' "$$" >&2`,
  's=$1; d=$2; c=$3; shift 3',
  'for kv do export "$kv" || exit 126; done',
  'if [ -n "$d" ]; then cd "$d" || exit 1; fi',
  // The shell asked for, or /bin/sh when the image has none (the port's rule).
  'command -v "$s" >/dev/null 2>&1 || s=/bin/sh',
  'exec "$s" -c "$c"',
].join('\n');

/** `sh -c KILL_SCRIPT berth-kill PID`: see the file comment. */
export const KILL_SCRIPT = [
  'p=$1; all=$p; queue=$p',
  'kill -STOP "$p" 2>/dev/null',
  'while [ -n "$queue" ]; do',
  '  next=',
  '  for f in /proc/[0-9]*/stat; do',
  '    { read -r l < "$f"; } 2>/dev/null || continue',
  // Fields after the command name, which may hold spaces and parentheses: state ppid pgrp …
  '    r=${l##*) }; set -- $r',
  '    case " $queue " in *" $2 "*) q=${f#/proc/}; q=${q%/stat}; kill -STOP "$q" 2>/dev/null; next="$next $q"; all="$all $q";; esac',
  '  done',
  '  queue=${next# }',
  'done',
  'kill -s KILL -- "-$p" 2>/dev/null',
  'kill -s KILL $all 2>/dev/null',
  'exit 0',
].join('\n');

/** Exit codes of the file scripts, mapped to `SandboxFileError` kinds. */
const FILE_EXIT: Record<number, SandboxFileError['kind']> = { 44: 'not_found', 45: 'is_directory', 46: 'permission_denied' };

/** `sh -c WRITE_SCRIPT berth-write PATH`, the bytes on stdin. */
export const WRITE_SCRIPT = [
  'p=$1',
  '[ -d "$p" ] && exit 45',
  'case "$p" in */*) d=${p%/*}; if [ -n "$d" ]; then mkdir -p "$d" || exit 1; fi;; esac',
  'cat > "$p"',
].join('\n');

/** `sh -c READ_SCRIPT berth-read PATH`, the bytes on stdout. */
export const READ_SCRIPT = ['p=$1', '[ -e "$p" ] || exit 44', '[ -d "$p" ] && exit 45', '[ -r "$p" ] || exit 46', 'exec cat "$p"'].join('\n');

/** The exit code in the final Status of an exec (the kubelet's `ExitCode` cause), or why there is none. */
export function exitCodeOf(status: V1Status): number | Error {
  if (status.status === 'Success') return 0;
  const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode');
  if (cause?.message !== undefined && /^\d+$/.test(cause.message)) return Number(cause.message);
  return new Error(status.message ?? 'the command could not run');
}

/** An exit code as ExitInfo: codes above 128 name the signal that ended the command. */
export function exitInfo(exitCode: number): ExitInfo {
  const signal = exitCode > 128 ? Object.entries(constants.signals).find(([, n]) => n === exitCode - 128)?.[0] : undefined;
  return { exitCode, ...(signal ? { signal } : {}), oomKilled: false };
}

export interface ExecTarget {
  exec: Exec;
  namespace: string;
  pod: string;
  container: string;
}

/** One exec: its output (buffered until someone listens), stdin, and how it ended. */
export class ExecStream {
  readonly #listeners: Array<(stream: 'stdout' | 'stderr', chunk: Buffer) => void> = [];
  readonly #pending: Array<['stdout' | 'stderr', Buffer]> = [];
  readonly #stdin = new PassThrough();
  readonly exitCode: Promise<number>;
  #connection: Connection | undefined;
  #finished = false;

  private constructor(exitCode: Promise<number>) {
    this.exitCode = exitCode;
    // Unobserved failures are the caller's to see through `exitCode`; avoid an unhandled rejection meanwhile.
    exitCode.catch(() => undefined);
  }

  /** Opens an exec of `argv`; rejects with InstanceError when the API refuses it (no such pod, container not running). */
  static async open(target: ExecTarget, argv: string[]): Promise<ExecStream> {
    let settle!: { resolve: (code: number) => void; reject: (error: Error) => void };
    const stream = new ExecStream(new Promise<number>((resolve, reject) => (settle = { resolve, reject })));
    const sink = (name: 'stdout' | 'stderr') =>
      new Writable({
        write: (chunk: Buffer, _encoding, callback) => {
          stream.#emit(name, chunk);
          callback();
        },
      });
    const where = `sandbox instance ${target.pod}`;
    let connection: Connection;
    try {
      connection = await target.exec.exec(
        target.namespace,
        target.pod,
        target.container,
        argv,
        sink('stdout'),
        sink('stderr'),
        stream.#stdin,
        false,
        (status) => {
          stream.#finished = true;
          const code = exitCodeOf(status);
          if (code instanceof Error) settle.reject(new InstanceError(`could not run a command in ${where}: ${code.message}`, { cause: code }));
          else settle.resolve(code);
        },
      );
    } catch (error) {
      throw new InstanceError(`could not run a command in ${where}: ${describeExecError(error)}`, { cause: error });
    }
    stream.#connection = connection;
    connection.on('close', () => {
      if (!stream.#finished) settle.reject(new InstanceError(`the connection to ${where} closed before the command finished`));
    });
    return stream;
  }

  onOutput(listener: (stream: 'stdout' | 'stderr', chunk: Buffer) => void): void {
    this.#listeners.push(listener);
    for (const [name, chunk] of this.#pending.splice(0)) listener(name, chunk);
  }

  write(data: Buffer): void {
    if (!this.#stdin.writableEnded) this.#stdin.write(data);
  }

  /** Ends stdin: the command reads EOF (a `v5.channel.k8s.io` close message). */
  closeStdin(): void {
    if (!this.#stdin.writableEnded) this.#stdin.end();
  }

  /** Drops the connection (the command loses its stdin; it is not killed). */
  close(): void {
    this.#connection?.close();
  }

  #emit(name: 'stdout' | 'stderr', chunk: Buffer): void {
    if (this.#listeners.length === 0) this.#pending.push([name, chunk]);
    for (const listener of this.#listeners) listener(name, chunk);
  }
}

/** What a refused exec upgrade said (client-node gives the `ws` error, whose message has the HTTP status). */
function describeExecError(error: unknown): string {
  if (error && typeof error === 'object' && 'message' in error) return String((error as { message: unknown }).message);
  return String(error);
}

type Chunk = ['stdout' | 'stderr', Buffer];

/** A command started by the wrapper: its pid comes first on stderr. */
export class PodProcess implements SandboxProcess {
  readonly pid: number;
  readonly exited: Promise<ExitInfo>;
  readonly #stream: ExecStream;
  readonly #kill: (pid: number) => Promise<void>;
  readonly #listeners: Array<(stream: 'stdout' | 'stderr', chunk: Buffer) => void> = [];
  /** Output that came before anyone listened. */
  readonly #pending: Chunk[];
  #killing: Promise<void> | undefined;

  private constructor(stream: ExecStream, pid: number, kill: (pid: number) => Promise<void>, pending: Chunk[]) {
    this.#stream = stream;
    this.pid = pid;
    this.#kill = kill;
    this.#pending = pending;
    this.exited = stream.exitCode.then(exitInfo);
    this.exited.catch(() => undefined);
  }

  /** Waits for the wrapper's pid line, then hands out the process (the line itself is not output). */
  static start(stream: ExecStream, kill: (pid: number) => Promise<void>): Promise<PodProcess> {
    return new Promise<PodProcess>((resolve, reject) => {
      let head = Buffer.alloc(0);
      let started: PodProcess | undefined;
      const early: Chunk[] = [];
      stream.onOutput((name, chunk) => {
        if (started) return started.#emit(name, chunk);
        if (name === 'stdout') return void early.push([name, chunk]);
        head = Buffer.concat([head, chunk]);
        const newline = head.indexOf(10);
        if (newline < 0) return;
        const line = head.subarray(0, newline).toString('utf8');
        const marked = line.startsWith(PID_MARKER);
        const rest = marked ? head.subarray(newline + 1) : head;
        if (rest.length > 0) early.push(['stderr', Buffer.from(rest)]);
        started = new PodProcess(stream, marked ? Number(line.slice(PID_MARKER.length)) : 0, kill, early);
        resolve(started);
      });
      // Ended (or failed) before the wrapper spoke: /bin/sh is missing, or the pod went away.
      stream.exitCode.then(
        (code) => reject(new InstanceError(`the command ended (exit code ${code}) before it started: does the image have /bin/sh?`)),
        reject,
      );
    });
  }

  onOutput(listener: (stream: 'stdout' | 'stderr', chunk: Buffer) => void): void {
    this.#listeners.push(listener);
    for (const [name, chunk] of this.#pending.splice(0)) listener(name, chunk);
  }

  write(data: Buffer): void {
    this.#stream.write(data);
  }

  closeStdin(): void {
    this.#stream.closeStdin();
  }

  kill(): void {
    if (this.pid <= 0) return;
    this.#killing ??= this.#kill(this.pid).catch(() => {
      // The command may have ended meanwhile; `exited` tells how it ended either way.
    });
  }

  #emit(name: 'stdout' | 'stderr', chunk: Buffer): void {
    if (this.#listeners.length === 0) this.#pending.push([name, chunk]);
    for (const listener of this.#listeners) listener(name, chunk);
  }
}

/** Output of the helper scripts (write, kill) that is more than they ever print. */
const SCRIPT_OUTPUT_BYTES = 64 * 1024;

/**
 * Runs one short command to its end, collecting its output; the sandbox decides what the command
 * prints, so past `maxOutputBytes` (stdout and stderr together) the exec is dropped and `overflowed`
 * set instead of holding more.
 */
export async function runToEnd(
  target: ExecTarget,
  argv: string[],
  options: { stdin?: Buffer; maxOutputBytes?: number } = {},
): Promise<{ exitCode: number; stdout: Buffer; stderr: Buffer; overflowed: boolean }> {
  const stream = await ExecStream.open(target, argv);
  const limit = options.maxOutputBytes ?? SCRIPT_OUTPUT_BYTES;
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let size = 0;
  let overflowed = false;
  stream.onOutput((name, chunk) => {
    if (overflowed) return;
    size += chunk.length;
    if (size > limit) {
      overflowed = true;
      stream.close();
      return;
    }
    (name === 'stdout' ? out : err).push(chunk);
  });
  if (options.stdin) stream.write(options.stdin);
  stream.closeStdin();
  const exitCode = await stream.exitCode.catch((error: unknown) => (overflowed ? -1 : Promise.reject(error)));
  return { exitCode: overflowed ? -1 : exitCode, stdout: Buffer.concat(out), stderr: Buffer.concat(err), overflowed };
}

/** A failed file script as SandboxFileError, by its exit code or what it printed. */
export function fileError(action: 'read' | 'write', path: string, exitCode: number, stderr: Buffer): SandboxFileError {
  const said = stderr.toString('utf8').trim();
  const kind =
    FILE_EXIT[exitCode] ??
    (/permission denied|read-only file system/i.test(said)
      ? 'permission_denied'
      : /no space left/i.test(said)
        ? 'no_space'
        : /no such file|not a directory/i.test(said)
          ? 'not_found'
          : 'other');
  const reason = {
    not_found: 'no such file',
    is_directory: 'is a directory',
    permission_denied: 'permission denied',
    no_space: 'no space left',
    too_large: 'too large',
    other: said || `exit code ${exitCode}`,
  }[kind];
  return new SandboxFileError(kind, `could not ${action} ${path}: ${reason}`);
}
