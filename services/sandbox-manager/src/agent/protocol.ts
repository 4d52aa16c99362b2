/**
 * Wire protocol of `berth-sandboxd`, the in-sandbox agent (agent/sandboxd.c says the same).
 *
 * A stream of frames over a Unix socket: `[u32 big-endian length][u8 type][payload]`, where
 * `length` counts the type byte and the payload, and the payload is at most MAX_PAYLOAD bytes.
 * A connection carries ONE operation, chosen by the client's first frame:
 *
 *   PING                          → PONG "berth-sandboxd <version>"
 *   SPAWN fields                  → STARTED u32 pid | ERROR; then STDOUT/STDERR chunks, EXIT
 *     (client may send DATA = stdin bytes, EOF = close stdin, KILL = SIGKILL to the group;
 *      closing the connection before EXIT kills the group too)
 *   WRITE_FILE path, DATA*, EOF   → OK | ERROR (the file is replaced atomically on EOF)
 *   READ_FILE path                → FILE_DATA* then FILE_END | ERROR
 *
 * SPAWN fields are `[u8 tag][u32 length][bytes]` repeated: 'a' one argv element (in order),
 * 'e' one `KEY=VALUE` environment override, 'c' cwd, 'f' fallback argv[0]. Strings hold no NUL.
 * EXIT is `[i32 exit code][i32 signal number][u8 oom killed]` (code is -1 when a signal ended it).
 * ERROR is `[u8 kind][UTF-8 message]`. A malformed frame closes that connection only.
 */

export const AGENT_PROTOCOL_VERSION = 1;
export const MAX_PAYLOAD = 256 * 1024;
/** Client data frames (stdin, file contents) are split at this size. */
export const DATA_CHUNK = 64 * 1024;
export const HEADER_BYTES = 5;

export const FrameType = {
  // client → agent
  PING: 0x01,
  SPAWN: 0x02,
  DATA: 0x03,
  EOF: 0x04,
  KILL: 0x05,
  WRITE_FILE: 0x06,
  READ_FILE: 0x07,
  // agent → client
  PONG: 0x81,
  STARTED: 0x82,
  STDOUT: 0x83,
  STDERR: 0x84,
  EXIT: 0x85,
  ERROR: 0x86,
  OK: 0x87,
  FILE_DATA: 0x88,
  FILE_END: 0x89,
} as const;

export const SpawnField = { ARG: 0x61, ENV: 0x65, CWD: 0x63, FALLBACK_ARGV0: 0x66 } as const;

/** ERROR kinds; the file ones are SandboxFileError's. */
export const ERROR_KINDS = ['other', 'not_found', 'is_directory', 'permission_denied', 'no_space', 'bad_request'] as const;
export type AgentErrorKind = (typeof ERROR_KINDS)[number];

export interface Frame {
  type: number;
  payload: Buffer;
}

function frameHeader(type: number, payloadBytes: number): Buffer {
  if (payloadBytes > MAX_PAYLOAD) throw new RangeError(`frame payload of ${payloadBytes} bytes exceeds ${MAX_PAYLOAD}`);
  const header = Buffer.allocUnsafe(HEADER_BYTES);
  header.writeUInt32BE(payloadBytes + 1, 0);
  header.writeUInt8(type, 4);
  return header;
}

export function encodeFrame(type: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  return Buffer.concat([frameHeader(type, payload.length), payload]);
}

export interface SpawnRequest {
  argv: string[];
  env: Record<string, string>;
  cwd?: string;
  fallbackArgv0?: string;
}

export function encodeSpawn(spec: SpawnRequest): Buffer {
  const parts: Buffer[] = [];
  const field = (tag: number, value: string, what: string): void => {
    if (value.includes('\0')) throw new RangeError(`${what} must not contain a NUL character`);
    const bytes = Buffer.from(value, 'utf8');
    const head = Buffer.allocUnsafe(5);
    head.writeUInt8(tag, 0);
    head.writeUInt32BE(bytes.length, 1);
    parts.push(head, bytes);
  };
  if (spec.argv.length === 0) throw new RangeError('argv must not be empty');
  spec.argv.forEach((arg, i) => field(SpawnField.ARG, arg, `argv[${i}]`));
  for (const [key, value] of Object.entries(spec.env)) {
    if (key === '' || key.includes('=')) throw new RangeError(`environment variable name ${JSON.stringify(key)} is not valid`);
    field(SpawnField.ENV, `${key}=${value}`, `environment variable ${key}`);
  }
  if (spec.cwd !== undefined) field(SpawnField.CWD, spec.cwd, 'cwd');
  if (spec.fallbackArgv0 !== undefined) field(SpawnField.FALLBACK_ARGV0, spec.fallbackArgv0, 'fallbackArgv0');
  return encodeFrame(FrameType.SPAWN, Buffer.concat(parts));
}

/**
 * DATA frames for `data` in DATA_CHUNK pieces (none for an empty buffer), as header and payload
 * buffers to write in order: the payloads are views of `data`, not copies (files of hundreds of MiB).
 */
export function encodeData(data: Buffer): Buffer[] {
  const pieces: Buffer[] = [];
  for (let at = 0; at < data.length; at += DATA_CHUNK) {
    const payload = data.subarray(at, at + DATA_CHUNK);
    pieces.push(frameHeader(FrameType.DATA, payload.length), payload);
  }
  return pieces;
}

export interface ExitFrame {
  exitCode: number;
  signal: number;
  oomKilled: boolean;
}

export function decodeExit(payload: Buffer): ExitFrame {
  if (payload.length !== 9) throw new RangeError(`EXIT frame of ${payload.length} bytes (expected 9)`);
  return { exitCode: payload.readInt32BE(0), signal: payload.readInt32BE(4), oomKilled: payload.readUInt8(8) !== 0 };
}

export function decodeError(payload: Buffer): { kind: AgentErrorKind; message: string } {
  if (payload.length < 1) throw new RangeError('empty ERROR frame');
  return { kind: ERROR_KINDS[payload.readUInt8(0)] ?? 'other', message: payload.subarray(1).toString('utf8') };
}

/** Splits a byte stream into frames; throws RangeError on a frame the agent would never send. */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;

  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames: Frame[] = [];
    for (;;) {
      if (this.buffered < HEADER_BYTES) break;
      const head = this.peek(HEADER_BYTES);
      const length = head.readUInt32BE(0);
      if (length < 1 || length - 1 > MAX_PAYLOAD) throw new RangeError(`frame length ${length} is out of range`);
      if (this.buffered < 4 + length) break;
      const whole = this.take(4 + length);
      frames.push({ type: whole.readUInt8(4), payload: whole.subarray(HEADER_BYTES) });
    }
    return frames;
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length < n) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0]!;
  }

  private take(n: number): Buffer {
    const first = this.peek(n);
    const out = first.subarray(0, n);
    if (first.length === n) this.chunks.shift();
    else this.chunks[0] = first.subarray(n);
    this.buffered -= n;
    return out;
  }
}
