/**
 * The streaming exec of the `langsmith/sandbox` client: a WebSocket at
 * `{dataplane_url}/execute/ws`, one command per socket, bridged to one `Execute` bidi call on the
 * sandbox-manager. The upgrade is authenticated like every route (X-Api-Key) and the sandbox
 * looked up before switching protocols, so a bad key is an HTTP 401 and an unknown sandbox a 404
 * (the client gives up on those; 503 it retries). Frames are JSON text both ways; the manager
 * keeps the command's session (offsets, retention, get-or-create by command_id), this only
 * translates. Pings every 25 s keep idle streams alive through proxies; a peer that misses one
 * is dropped. On shutdown sockets close with 1001, which the client answers by reconnecting.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Principal } from '@berth/auth';
import { NotFoundError } from '@berth/errors';
import { httpErrorBody, refuseUpgrade } from '@berth/http';
import type { Logger } from '@berth/log';
import type { ExecuteRequestSchema, ExecuteResponse } from '@berth/proto';
import { Pushable } from '@berth/rpc';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { z } from 'zod';
import type { SandboxManagerClients } from '../../sandbox-manager.js';
import { CommandTimeout, ExecuteCommand } from './schemas.js';
import { pathId } from './templates.js';

type ExecClientInit = MessageInitShape<typeof ExecuteRequestSchema>;

/** `/api/v2/sandboxes/dataplane/{sandbox_id}/execute/ws` */
const SOCKET_PATH = /^\/api\/v2\/sandboxes\/dataplane\/([^/?#]+)\/execute\/ws$/;
/** Largest client frame (a chunk of stdin, an execute with its command and env). */
const MAX_FRAME_BYTES = 4 * 1024 * 1024;
/** Output waiting for a slow client above which the command's stream waits for it. */
const HIGH_WATER_BYTES = 1024 * 1024;
/** Close codes: normal, going away (the client reconnects at once), policy violation (a malformed frame). */
const NORMAL = 1000;
const GOING_AWAY = 1001;
const POLICY = 1008;

/** -1 (never) or a number of seconds. */
const seconds = z.number().refine((n) => n === -1 || (n >= 0 && n <= 7 * 24 * 3600), { error: 'Seconds, or -1 for none' });

/** The command as `POST …/execute` takes it (the same schema, so the same refusals), and the session's fields. */
const ExecuteFrame = ExecuteCommand.extend({
  type: z.literal('execute'),
  timeout_seconds: CommandTimeout,
  command_id: z.string().min(1).max(256),
  idle_timeout_seconds: seconds.default(300),
  kill_on_disconnect: z.boolean().default(false),
  ttl_seconds: seconds.default(600),
  close_stdin: z.boolean().default(false),
  pty: z.literal(false, { error: 'Terminals (pty) are not supported by Berth' }).optional(),
});

const ClientFrame = z.discriminatedUnion('type', [
  ExecuteFrame,
  z.strictObject({
    type: z.literal('reconnect'),
    command_id: z.string().min(1).max(256),
    stdout_offset: z.int().min(0).default(0),
    stderr_offset: z.int().min(0).default(0),
  }),
  z.strictObject({ type: z.literal('input'), data: z.string().max(MAX_FRAME_BYTES) }),
  z.strictObject({ type: z.literal('close_stdin') }),
  z.strictObject({ type: z.literal('kill') }),
]);
type ClientFrame = z.output<typeof ClientFrame>;

export interface ExecSocketsDeps {
  manager: SandboxManagerClients;
  authenticate(req: IncomingMessage): Promise<Principal>;
  logger: Logger;
  /** @default 25000 */
  pingIntervalMs?: number;
}

/** What a failed frame says: the zod issues as one line. */
function frameProblem(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join('.') || 'frame'}: ${i.message}`).join('; ');
}

/** A server message as the client's frame. */
function frameOf(message: ExecuteResponse): Record<string, unknown> | undefined {
  const kind = message.kind;
  switch (kind.case) {
    case 'started':
      return { type: 'started', command_id: kind.value.commandId, pid: kind.value.pid };
    case 'output':
      return { type: kind.value.stream === 'stderr' ? 'stderr' : 'stdout', data: kind.value.data, offset: Number(kind.value.offset) };
    case 'exit':
      return { type: 'exit', exit_code: kind.value.exitCode, ...(kind.value.oomKilled ? { oom_killed: true } : {}) };
    case 'error':
      return { type: 'error', error_type: kind.value.errorType || 'CommandError', error: kind.value.message || 'The command failed' };
    default:
      return undefined;
  }
}

/** The first frame of a socket as the call's first message. */
function firstMessage(frame: ClientFrame, tenantId: string, sandboxId: string): ExecClientInit | undefined {
  if (frame.type === 'reconnect') {
    return {
      kind: {
        case: 'reconnect',
        value: { tenantId, sandboxId, commandId: frame.command_id, stdoutOffset: BigInt(frame.stdout_offset), stderrOffset: BigInt(frame.stderr_offset) },
      },
    };
  }
  if (frame.type !== 'execute') return undefined;
  const cwd = frame.cwd ?? frame.run_config?.work_dir;
  return {
    kind: {
      case: 'execute',
      value: {
        tenantId,
        sandboxId,
        command: frame.command,
        shell: frame.shell,
        env: frame.env ?? frame.run_config?.env_vars ?? {},
        ...(cwd !== undefined ? { cwd } : {}),
        timeoutSeconds: frame.timeout_seconds,
        idleTimeoutSeconds: frame.idle_timeout_seconds,
        killOnDisconnect: frame.kill_on_disconnect,
        ttlSeconds: frame.ttl_seconds,
        commandId: frame.command_id,
        closeStdin: frame.close_stdin,
      },
    },
  };
}

/** A path segment decoded; malformed percent-encoding names nothing (404). */
function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch (error) {
    throw new NotFoundError('Sandbox not found', { cause: error });
  }
}

export class ExecSockets {
  private readonly server = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
  /** Each open socket and the call it drives (aborted when the socket goes). */
  private readonly open = new Map<WebSocket, AbortController>();
  private readonly alive = new WeakSet<WebSocket>();
  private readonly pinger: NodeJS.Timeout;
  private closing = false;

  constructor(private readonly deps: ExecSocketsDeps) {
    this.pinger = setInterval(() => this.ping(), deps.pingIntervalMs ?? 25_000);
    this.pinger.unref();
  }

  /** The HTTP server's `upgrade` listener: every upgrade request of the gateway comes here. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', (error) => this.deps.logger.debug({ err: error }, 'upgrade socket error'));
    this.upgrade(req, socket, head).catch((error: unknown) => {
      const { status, body, headers } = httpErrorBody(error, req.id);
      if (status >= 500 && status !== 503) this.deps.logger.error({ err: error, url: req.url }, 'WebSocket upgrade failed');
      refuseUpgrade(socket, status, body.detail, headers);
    });
  }

  /** Closes every socket with 1001 (the client reconnects) and stops accepting new ones. */
  close(): void {
    this.closing = true;
    clearInterval(this.pinger);
    for (const [ws, call] of this.open) {
      call.abort(new Error('the gateway is shutting down'));
      ws.close(GOING_AWAY, 'server shutting down');
    }
    this.server.close();
  }

  private async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!;
    const match = SOCKET_PATH.exec(path);
    if (!match) return refuseUpgrade(socket, 404, 'No WebSocket endpoint at this path');
    if (this.closing) return refuseUpgrade(socket, 503, 'The gateway is shutting down, retry shortly', { 'Retry-After': '1' });
    // A malformed id names no route (as over HTTP): 404 before credentials are looked at.
    const sandboxId = pathId(decodePathSegment(match[1]!), 'Sandbox');
    const principal = await this.deps.authenticate(req);
    // Unknown, or another tenant's: a 404 before the upgrade (the client does not retry it).
    const { sandbox } = await this.deps.manager.sandboxes.getSandbox({ ref: { tenantId: principal.tenantId, id: sandboxId } }, { timeoutMs: 10_000 });
    if (!sandbox) return refuseUpgrade(socket, 404, 'Sandbox not found');
    if (socket.destroyed) return;
    this.server.handleUpgrade(req, socket, head, (ws) => this.serve(ws, principal.tenantId, sandbox.id));
  }

  private serve(ws: WebSocket, tenantId: string, sandboxId: string): void {
    const call = new AbortController();
    this.open.set(ws, call);
    this.alive.add(ws);
    const requests = new Pushable<ExecClientInit>();
    let started = false;
    ws.on('pong', () => this.alive.add(ws));
    ws.on('error', (error) => this.deps.logger.debug({ err: error }, 'exec socket error'));
    ws.on('close', () => {
      this.open.delete(ws);
      requests.end();
      call.abort(new Error('the client closed the socket'));
    });
    ws.on('message', (data: RawData, isBinary: boolean) => {
      const frame = this.parse(ws, data, isBinary);
      if (!frame) return;
      if (!started) {
        const first = firstMessage(frame, tenantId, sandboxId);
        if (!first) return this.fail(ws, 'InvalidMessage', `The first frame must be execute or reconnect, not ${frame.type}`, POLICY);
        started = true;
        requests.push(first);
        void this.relay(ws, requests, call.signal);
        return;
      }
      if (frame.type === 'execute' || frame.type === 'reconnect')
        return this.fail(ws, 'InvalidMessage', `One command per socket: ${frame.type} after the first frame`, POLICY);
      requests.push(
        frame.type === 'input'
          ? { kind: { case: 'input', value: { data: frame.data } } }
          : frame.type === 'close_stdin'
            ? { kind: { case: 'closeStdin', value: {} } }
            : { kind: { case: 'kill', value: {} } },
      );
    });
  }

  private parse(ws: WebSocket, data: RawData, isBinary: boolean): ClientFrame | undefined {
    let value: unknown;
    try {
      if (isBinary) throw new Error('binary frame');
      value = JSON.parse(Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(Array.isArray(data) ? data : [Buffer.from(data)]).toString('utf8'));
    } catch {
      this.fail(ws, 'InvalidMessage', 'Frames are JSON text objects with a "type"', POLICY);
      return undefined;
    }
    const result = ClientFrame.safeParse(value);
    if (!result.success) {
      this.fail(ws, 'InvalidMessage', `Malformed frame: ${frameProblem(result.error)}`, POLICY);
      return undefined;
    }
    return result.data;
  }

  /** Streams the call's messages to the socket until the command exits or fails. */
  private async relay(ws: WebSocket, requests: Pushable<ExecClientInit>, signal: AbortSignal): Promise<void> {
    try {
      for await (const message of this.deps.manager.data.execute(requests, { signal })) {
        const frame = frameOf(message);
        if (!frame || ws.readyState !== ws.OPEN) continue;
        await this.send(ws, frame);
        if (frame.type === 'exit' || frame.type === 'error') return ws.close(NORMAL);
      }
      this.fail(ws, 'CommandError', 'The command stream ended without an exit status', NORMAL);
    } catch (error) {
      if (signal.aborted) return; // the socket went, or the gateway is stopping
      const { status, body } = httpErrorBody(error);
      if (status >= 500 && status !== 503 && status !== 504) this.deps.logger.error({ err: error }, 'exec stream failed');
      const message = typeof body.detail === 'string' ? body.detail : 'The command failed';
      const type =
        status === 404 ? 'NotFound' : status === 409 ? 'NotReady' : status === 503 ? 'Unavailable' : status === 504 ? 'CommandTimeout' : 'CommandError';
      this.fail(ws, type, message, NORMAL);
    }
  }

  /** Sends a frame, waiting for a slow client when much is already queued for it. */
  private send(ws: WebSocket, frame: Record<string, unknown>): Promise<void> | void {
    const text = JSON.stringify(frame);
    if (ws.bufferedAmount < HIGH_WATER_BYTES) return ws.send(text);
    return new Promise((resolve) => ws.send(text, () => resolve()));
  }

  /** An error frame, then the close. */
  private fail(ws: WebSocket, errorType: string, message: string, code: number): void {
    if (ws.readyState !== ws.OPEN) return;
    ws.send(JSON.stringify({ type: 'error', error_type: errorType, error: message }));
    ws.close(code, errorType);
  }

  private ping(): void {
    for (const ws of this.open.keys()) {
      if (!this.alive.has(ws)) {
        ws.terminate();
        continue;
      }
      this.alive.delete(ws);
      ws.ping();
    }
  }
}
