/**
 * The control plane's artifact endpoint: `GET /v1/artifacts/{revision id}` answers a revision's
 * archive (from `ArtifactStore`) to the init container of that revision's pods. It takes that
 * revision's artifact credential only (`Authorization: Bearer …`, derived from the platform key,
 * so nothing is stored): a pod can fetch its own code and nothing else, and never holds the
 * platform's storage credentials. Anything else is 404, a missing or wrong credential 401.
 */
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { ARTIFACT_AUTH_SCHEME } from '@berth/agent-contract';
import type { Logger } from '@berth/log';
import type { SecretBox } from '@berth/secret-box';
import type { ArtifactStore } from './artifact-store.js';

/** A revision's artifact credential: fetches that revision's archive, nothing else. */
export function artifactCredential(secretBox: SecretBox, revisionId: string): string {
  return secretBox.derive(`artifact-credential/${revisionId}`);
}

/** The path of a revision's archive on the artifact endpoint. */
export function artifactPath(revisionId: string): string {
  return `/v1/artifacts/${revisionId}`;
}

export interface ArtifactServerOptions {
  /** The stored archive of a revision (key and SHA-256, as recorded with it), if it has one. */
  lookup: (revisionId: string) => Promise<{ key: string; sha256: string } | undefined>;
  artifacts: ArtifactStore;
  secretBox: SecretBox;
  host: string;
  /** 0 picks a free one. */
  port: number;
  log: Logger;
}

export interface RunningArtifactServer {
  /** `http://host:port` as dialable from this machine. */
  url: string;
  close(): Promise<void>;
}

const PATH = /^\/v1\/artifacts\/([0-9a-f-]{36})$/;

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function detail(res: ServerResponse, status: number, message: string): void {
  // The fetcher retries a 503 after a backoff of its own; the header says when for other clients.
  res.writeHead(status, { 'content-type': 'application/json', ...(status === 503 ? { 'retry-after': '5' } : {}) }).end(JSON.stringify({ detail: message }));
}

export async function startArtifactServer(options: ArtifactServerOptions): Promise<RunningArtifactServer> {
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const match = PATH.exec(req.url ?? '');
    if (req.method !== 'GET' || !match) return detail(res, 404, 'Not Found');
    const revisionId = match[1]!;
    const presented = /^(\S+) (\S+)$/.exec(req.headers.authorization ?? '');
    if (!presented || presented[1] !== ARTIFACT_AUTH_SCHEME || !sameText(presented[2]!, artifactCredential(options.secretBox, revisionId))) {
      return detail(res, 401, `revision ${revisionId}'s artifact credential is required (Authorization: Bearer …)`);
    }
    const archive = await options.lookup(revisionId);
    if (!archive) return detail(res, 404, `revision ${revisionId} has no stored build`);
    const { body, size } = await options.artifacts.get(archive.key);
    res.writeHead(200, {
      'content-type': 'application/gzip',
      ...(size !== undefined ? { 'content-length': String(size) } : {}),
      'x-berth-artifact-sha256': archive.sha256,
    });
    await pipeline(body, res);
  };
  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      options.log.error({ err: error, url: req.url }, 'serving a revision artifact failed');
      if (!res.headersSent) detail(res, 503, 'the artifact could not be read from storage; try again');
      else res.destroy(error as Error);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as { port: number };
  const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  return {
    url: `http://${host}:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
