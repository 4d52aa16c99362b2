/**
 * The data plane of a sandbox over HTTP, at its `dataplane_url`
 * (`/api/v2/sandboxes/dataplane/{sandbox_id}`): run a command and get its output (`/execute`),
 * write a file (`/upload`, multipart) and read one (`/download`), each a call on the
 * sandbox-manager's SandboxDataService. A stopped sandbox is started by the call. Failures use
 * the typed form `{"detail": {"error": …, "message": …}}` (errors.ts). The streaming exec is the
 * WebSocket at `/execute/ws` (exec-socket.ts); a plain GET there is answered 426.
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { Api } from '@berth/http';
import type { ExecuteRequestSchema, WriteFileRequestSchema } from '@berth/proto';
import { Pushable } from '@berth/rpc';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { Request, Response } from 'express';
import { boundaryOf, TraceBodyError } from '../traces/multipart.js';
import { answerDataPlaneError, answerTyped } from './errors.js';
import { filePart } from './file-part.js';
import type { SandboxRouteDeps } from './index.js';
import { DataPlanePath, ExecuteBody, ExecuteOut, FilePathQuery } from './schemas.js';
import { pathId } from './templates.js';
import type { GatewayApi } from '../../access.js';

/** Chunks of WriteFile calls (the manager's agent writes them as they come). */
export const FILE_CHUNK_BYTES = 1024 * 1024;
/** Output one HTTP /execute answer may carry; longer output needs the WebSocket, which streams it. */
export const MAX_HTTP_OUTPUT_BYTES = 16 * 1024 * 1024;
/** Time the manager gets beyond a command's own timeout to report it (it kills the command at the timeout). */
const EXEC_MARGIN_MS = 30_000;
/** Deadline of a whole file transfer through the gateway. */
const FILE_DEADLINE_MS = 30 * 60_000;

type ExecClientInit = MessageInitShape<typeof ExecuteRequestSchema>;
type WriteChunkInit = MessageInitShape<typeof WriteFileRequestSchema>;

/** Aborted when the client goes away before the answer is complete. */
function clientGone(req: Request, res: Response): AbortSignal {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort(new Error('the client went away'));
  });
  req.once('aborted', () => controller.abort(new Error('the client went away')));
  return controller.signal;
}

export function dataPlaneRoutes(api: GatewayApi, deps: SandboxRouteDeps): void {
  const rpc = () => deps.manager.data;
  const tags = ['sandbox data plane'];

  api
    .route({
      method: 'post',
      path: '/api/v2/sandboxes/dataplane/{sandbox_id}/execute',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Run a command and answer its output when it exits',
      description:
        '`{"command", "timeout" (seconds, default 60), "shell" (default /bin/bash, else /bin/sh), "env", "cwd"}` → ' +
        '`{"stdout", "stderr", "exit_code"}`; a non-zero exit code is a normal answer. Past `timeout` the command is killed ' +
        'and the answer is 408 `{"detail": {"error": "CommandTimeout", "message", "stdout", "stderr"}}` with the output so far ' +
        '(408, not 5xx: the platform is fine, the same request would time out again). If the client disconnects the command ' +
        `is killed. At most ${MAX_HTTP_OUTPUT_BYTES} bytes of output: stream longer output with the WebSocket ${'`/execute/ws`'}.`,
      tags,
      params: DataPlanePath,
      body: ExecuteBody,
      response: ExecuteOut,
      errors: [400, 404, 408, 503],
      handler: async ({ params, body, auth, req, res }) => {
        const sandboxId = pathId(params.sandbox_id, 'Sandbox');
        const requests = new Pushable<ExecClientInit>();
        const signal = clientGone(req, res);
        requests.push({
          kind: {
            case: 'execute',
            value: {
              tenantId: auth.tenantId,
              sandboxId,
              command: body.command,
              shell: body.shell,
              env: body.env ?? body.run_config?.env_vars ?? {},
              ...((body.cwd ?? body.run_config?.work_dir) !== undefined ? { cwd: body.cwd ?? body.run_config?.work_dir } : {}),
              timeoutSeconds: body.timeout,
              killOnDisconnect: true,
              // Nobody reconnects to an HTTP exec: keep its output only briefly.
              ttlSeconds: 60,
              commandId: randomUUID(),
              closeStdin: true,
            },
          },
        });
        const out = { stdout: [] as string[], stderr: [] as string[], bytes: 0 };
        try {
          for await (const message of rpc().execute(requests, { signal, timeoutMs: body.timeout * 1000 + EXEC_MARGIN_MS })) {
            const kind = message.kind;
            if (kind.case === 'output') {
              (kind.value.stream === 'stderr' ? out.stderr : out.stdout).push(kind.value.data);
              out.bytes += Buffer.byteLength(kind.value.data);
              if (out.bytes > MAX_HTTP_OUTPUT_BYTES) {
                requests.push({ kind: { case: 'kill', value: {} } });
                return answerTyped(
                  res,
                  400,
                  'CommandError',
                  `The command wrote more than ${MAX_HTTP_OUTPUT_BYTES} bytes of output and was killed: stream it with the WebSocket exec (/execute/ws)`,
                );
              }
            } else if (kind.case === 'exit') {
              return { stdout: out.stdout.join(''), stderr: out.stderr.join(''), exit_code: kind.value.exitCode };
            } else if (kind.case === 'error') {
              const { errorType, message: text } = kind.value;
              if (errorType === 'CommandTimeout') {
                return answerTyped(res, 408, 'CommandTimeout', text || `The command did not finish within ${body.timeout} seconds and was killed`, {
                  stdout: out.stdout.join(''),
                  stderr: out.stderr.join(''),
                });
              }
              return answerTyped(res, 400, errorType || 'CommandError', text || 'The command failed');
            }
          }
          return answerTyped(res, 400, 'CommandError', 'The command ended without an exit status');
        } catch (error) {
          if (signal.aborted) return; // nobody to answer
          if (answerDataPlaneError(res, error, 'command')) return;
          throw error;
        } finally {
          requests.end();
        }
      },
    })
    .route({
      method: 'post',
      path: '/api/v2/sandboxes/dataplane/{sandbox_id}/upload',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Write a file (multipart, part `file`)',
      description:
        '`multipart/form-data` with one part named `file` holding the bytes (binary-safe, at most 512 MiB). Parent ' +
        'directories are created; an existing file is replaced. Errors: 404 FileNotFound/NotFound, 400 WriteError (e.g. a ' +
        'directory at that path), 415 not multipart.',
      tags,
      params: DataPlanePath,
      query: FilePathQuery,
      consumes: ['multipart/form-data'],
      errors: [400, 404, 415, 503],
      handler: async ({ params, query, auth, req, res }) => {
        const sandboxId = pathId(params.sandbox_id, 'Sandbox');
        let boundary: string;
        try {
          boundary = boundaryOf(req.get('content-type'), 'the file');
        } catch (error) {
          if (error instanceof TraceBodyError) {
            res.setHeader('Connection', 'close');
            return answerTyped(res, error.status, 'WriteError', error.message);
          }
          throw error;
        }
        const signal = clientGone(req, res);
        const data = filePart(req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>, boundary, 'file', FILE_CHUNK_BYTES);
        // The first chunk (or the end of an empty file) before the call: a body without the part is a 422 that writes nothing.
        const first = await data.next();
        async function* chunks(): AsyncGenerator<WriteChunkInit> {
          yield { tenantId: auth.tenantId, sandboxId, path: query.path };
          if (first.done) return;
          yield { data: first.value };
          for await (const chunk of data) yield { data: chunk };
        }
        try {
          await rpc().writeFile(chunks(), { signal, timeoutMs: FILE_DEADLINE_MS });
        } catch (error) {
          if (signal.aborted) return;
          res.setHeader('Connection', 'close'); // the rest of the body may not have been read
          if (answerDataPlaneError(res, error, 'write')) return;
          throw error;
        }
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/dataplane/{sandbox_id}/download',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Read a file (raw bytes)',
      description: 'The file’s bytes as `application/octet-stream`, streamed. 404 `{"detail": {"error": "FileNotFound"}}` when it does not exist.',
      tags,
      params: DataPlanePath,
      query: FilePathQuery,
      otherStatuses: { 200: 'the file’s bytes (application/octet-stream)' },
      errors: [400, 404, 503],
      handler: async ({ params, query, auth, req, res }) => {
        const sandboxId = pathId(params.sandbox_id, 'Sandbox');
        const signal = clientGone(req, res);
        let stream: AsyncIterator<{ data: Uint8Array }>;
        let next: IteratorResult<{ data: Uint8Array }>;
        try {
          stream = rpc().readFile({ tenantId: auth.tenantId, sandboxId, path: query.path }, { signal, timeoutMs: FILE_DEADLINE_MS })[Symbol.asyncIterator]();
          next = await stream.next();
        } catch (error) {
          if (signal.aborted) return;
          if (answerDataPlaneError(res, error, 'read')) return;
          throw error;
        }
        res.status(200).setHeader('Content-Type', 'application/octet-stream');
        try {
          for (; !next.done; next = await stream.next()) {
            if (next.value.data.length > 0 && !res.write(next.value.data)) await once(res, 'drain', { signal });
          }
          res.end();
        } catch (error) {
          // The status is sent: all a client can be told is that the body is cut short.
          res.destroy(error instanceof Error ? error : new Error(String(error)));
        } finally {
          await stream.return?.();
        }
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/dataplane/{sandbox_id}/execute/ws',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Streaming command execution (WebSocket)',
      description:
        'Upgrade to a WebSocket (header X-Api-Key). Client frames (JSON text): `execute` {command, timeout_seconds, shell, env, ' +
        'cwd, command_id, idle_timeout_seconds, kill_on_disconnect, ttl_seconds, close_stdin}, `reconnect` {command_id, ' +
        'stdout_offset, stderr_offset}, then `input` {data}, `close_stdin`, `kill`. Server frames: `started` {command_id, pid}, ' +
        '`stdout`/`stderr` {data, offset (UTF-8 bytes)}, `exit` {exit_code}, `error` {error_type, error}. A plain GET is a 426.',
      tags,
      params: DataPlanePath,
      otherStatuses: { 101: 'switching to the WebSocket' },
      errors: [404, 426, 503],
      handler: ({ res }) => {
        res.setHeader('Upgrade', 'websocket');
        res.status(426).json({ detail: 'Connect with a WebSocket (Connection: Upgrade, Upgrade: websocket)' });
      },
    });
}
