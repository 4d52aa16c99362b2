/**
 * `POST /v2/deployments/{deployment_id}/upload`: a project tarball in the raw request body,
 * streamed through to the control plane as `UploadSource` calls of at most 1 MiB each. The body
 * is never held whole: the next bytes are read only after the control plane took the previous
 * chunk, so a 200 MB upload costs about 2 MiB of gateway memory and TCP slows the client down.
 * On the way it is checked to be a gzipped tarball (tarball-check.ts): what is not is refused
 * with 422 before its first chunk is stored, or, when only its end is broken, never completed.
 */
import type { Logger } from '@berth/log';
import type { Request, Response } from 'express';
import type { ControlPlaneClients } from '../control-plane.js';
import { DeploymentPath, UploadOut } from '../deployment-schemas.js';
import { deploymentIdOf } from './deployments.js';
import { NotATarballError, TarballCheck, UnpackedTooLargeError } from './tarball-check.js';
import type { GatewayApi } from '../access.js';

/** Largest chunk of one UploadSource call (well below gRPC's 4 MiB message limit). */
export const UPLOAD_CHUNK_BYTES = 1024 * 1024;

/** Largest accepted tarball: 200 MB, what `berth deploy` packs at most. */
export const MAX_UPLOAD_BYTES = 200 * 1024 * 1024;

/** Content types of a gzipped tarball; anything else is refused before a byte is sent on. */
const TARBALL_TYPES = ['application/gzip', 'application/x-gzip', 'application/octet-stream'];

export interface UploadRouteDeps {
  controlPlane: ControlPlaneClients;
  logger: Logger;
  /** @default MAX_UPLOAD_BYTES */
  maxBytes?: number;
}

/** The OpenAPI requestBody of the upload (the route registry describes JSON bodies only). */
export const uploadRequestBody = {
  required: true,
  description: 'The project as a gzipped tarball (what `berth deploy` packs), at most 200 MB',
  content: Object.fromEntries(['application/gzip', 'application/octet-stream'].map((t) => [t, { schema: { type: 'string', format: 'binary' } }])),
};

/** Answers the request directly with an error and closes the connection (the body may still be arriving). */
function refuse(res: Response, status: number, detail: unknown): void {
  res.setHeader('Connection', 'close');
  res.status(status).json({ detail });
}

export function uploadRoutes(api: GatewayApi, deps: UploadRouteDeps): void {
  const maxBytes = deps.maxBytes ?? MAX_UPLOAD_BYTES;
  api.route({
    method: 'post',
    path: '/v2/deployments/{deployment_id}/upload',
    access: ['api_key', 'access_token', 'session'],
    summary: 'Upload a project tarball',
    description:
      'Send the gzipped tarball as the raw body (`Content-Type: application/gzip` or `application/octet-stream`, ' +
      `at most ${maxBytes} bytes, else 413). A body that is not a gzipped tar archive is a 422 and is not kept. ` +
      "When the deployment's latest revision waits for its source " +
      '(a new internal_source deployment), the upload is attached to it and its build starts: `revision_id` names it. ' +
      'Otherwise make a revision from it with `PATCH /v2/deployments/{deployment_id}` and ' +
      '`source_revision_config.source_tarball_path` set to the returned `object_path`.',
    tags: ['deployments'],
    params: DeploymentPath,
    consumes: TARBALL_TYPES,
    status: 201,
    response: UploadOut,
    errors: [404, 413, 415, 422, 503],
    handler: async ({ params, auth, req, res }) => {
      const deploymentId = deploymentIdOf(params.deployment_id);
      const type = (req.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
      if (!TARBALL_TYPES.includes(type)) {
        refuse(res, 415, `Send the tarball as application/gzip or application/octet-stream, not ${type || 'no content type'}`);
        return;
      }
      const declared = Number(req.get('content-length') ?? NaN);
      if (declared > maxBytes) {
        refuse(res, 413, `The upload is larger than ${maxBytes} bytes`);
        return;
      }
      let outcome: UploadOutcome;
      try {
        outcome = await streamUpload(deps, auth.tenantId, deploymentId, req, res, maxBytes);
      } catch (error) {
        // The client hung up: nobody is left to answer, and nothing failed on our side.
        if (res.destroyed) {
          deps.logger.info({ deploymentId }, 'upload abandoned by the client');
          return;
        }
        if (error instanceof NotATarballError) {
          refuse(res, 422, error.issues);
          return;
        }
        if (error instanceof UnpackedTooLargeError) {
          refuse(res, 413, error.message);
          return;
        }
        // The rest of the body is not wanted: do not read (and discard) up to 200 MB of it.
        if (!res.headersSent) res.setHeader('Connection', 'close');
        throw error;
      }
      if (outcome === 'too_large') {
        refuse(res, 413, `The upload is larger than ${maxBytes} bytes`);
        return;
      }
      if (outcome === 'empty') {
        refuse(res, 422, [{ loc: ['body'], msg: 'The body is empty: send the project tarball', type: 'missing' }]);
        return;
      }
      return outcome;
    },
  });
}

type UploadOutcome = { object_path: string; revision_id: string | null } | 'too_large' | 'empty';

/**
 * Reads `req` into chunks of exactly UPLOAD_CHUNK_BYTES (the last one shorter) and sends each
 * once the next byte shows it is not the last; the final chunk goes with `last: true`.
 */
async function streamUpload(
  deps: UploadRouteDeps,
  tenantId: string,
  deploymentId: string,
  req: Request,
  res: Response,
  maxBytes: number,
): Promise<UploadOutcome> {
  const rpc = deps.controlPlane.deployments;
  // A client that hangs up mid-upload ends the call in flight; the control plane sweeps the rest.
  const controller = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) controller.abort(new Error('the client went away during the upload'));
  };
  res.once('close', onClose);
  let uploadId = '';
  let total = 0;
  let buffer = Buffer.allocUnsafe(UPLOAD_CHUNK_BYTES);
  let filled = 0;
  const check = new TarballCheck();
  const send = async (data: Buffer, last: boolean) => {
    // Nothing is stored before the start is known to be a tarball.
    if (!uploadId) check.assertStartsAsTarball();
    const answer = await rpc.uploadSource({ tenantId, deploymentId, uploadId, data, last }, { signal: controller.signal, timeoutMs: 120_000 });
    uploadId ||= answer.uploadId;
    return answer;
  };
  try {
    // Stopping early must not destroy the socket: the 413 still has to go out on it.
    for await (const piece of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      total += piece.length;
      if (total > maxBytes) return 'too_large';
      await check.write(piece);
      let at = 0;
      while (at < piece.length) {
        if (filled === UPLOAD_CHUNK_BYTES) {
          // More bytes follow, so the full chunk is not the last one.
          await send(buffer, false);
          buffer = Buffer.allocUnsafe(UPLOAD_CHUNK_BYTES);
          filled = 0;
        }
        const take = Math.min(piece.length - at, UPLOAD_CHUNK_BYTES - filled);
        piece.copy(buffer, filled, at, at + take);
        filled += take;
        at += take;
      }
    }
    if (total === 0) return 'empty';
    // A body whose end is broken (truncated, bad CRC) is refused here, its upload never completed.
    await check.end();
    const answer = await send(buffer.subarray(0, filled), true);
    deps.logger.info({ deploymentId, tenantId, bytes: total, objectPath: answer.objectPath }, 'project tarball uploaded');
    return { object_path: answer.objectPath, revision_id: answer.revisionId || null };
  } finally {
    check.destroy();
    res.off('close', onClose);
  }
}
