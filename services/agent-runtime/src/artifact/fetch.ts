/**
 * Fetching a built revision (its project with installed dependencies, a gzipped tarball) into the
 * folder the agent server serves: what the init container of a Kubernetes source revision runs
 * (`fetch-artifact.ts`). The archive is downloaded to a temporary file and its SHA-256 compared
 * with the one the control plane recorded at build time before a byte of it is unpacked, so a
 * tampered or truncated archive is refused and leaves the folder empty.
 *
 * Node and the system `tar` only (the agent-server image has both): no npm dependency besides the
 * auth scheme it shares with the control plane's artifact endpoint (@berth/agent-contract).
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ARTIFACT_AUTH_SCHEME } from '@berth/agent-contract';

export interface ArtifactFetchOptions {
  /** Where the archive is served (the control plane's artifact endpoint for this revision). */
  url: string;
  /** The revision's artifact credential. */
  credential: string;
  /** Hex SHA-256 of the archive, as recorded with the revision. */
  sha256: string;
  /** Folder to unpack into (emptied first: a restarted init container may have left a part). */
  dir: string;
  /**
   * Attempts of the download (connection failures and 5xx answers are tried again).
   * @default 5
   */
  attempts?: number;
  /** Delay before the first retry, doubling. @default 1000 */
  retryDelayMs?: number;
  /** Progress lines, for the pod's log. */
  log?: (line: string) => void;
}

/** The archive did not arrive, or is not the one the revision was built with. */
export class ArtifactFetchError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ArtifactFetchError';
  }
}

/** The archive's bytes differ from the recorded checksum: it was changed (or cut) after the build. */
export class ArtifactChecksumError extends ArtifactFetchError {
  constructor(expected: string, actual: string) {
    super(
      `the artifact's SHA-256 is ${actual}, but the revision was built as ${expected}: refusing to unpack it (it was changed or cut short after the build)`,
    );
    this.name = 'ArtifactChecksumError';
  }
}

/** Downloads, verifies and unpacks one revision's artifact into `options.dir`. */
export async function fetchArtifact(options: ArtifactFetchOptions): Promise<{ bytes: number }> {
  const log = options.log ?? (() => undefined);
  const file = join(tmpdir(), `berth-artifact-${randomBytes(6).toString('hex')}.tar.gz`);
  try {
    const bytes = await download(options, file, log);
    const actual = await sha256File(file);
    if (actual !== options.sha256.toLowerCase()) throw new ArtifactChecksumError(options.sha256.toLowerCase(), actual);
    log(`verified ${bytes} bytes (sha256 ${actual})`);
    await emptyDir(options.dir);
    await unpackArchive(file, options.dir);
    log(`unpacked into ${options.dir}`);
    return { bytes };
  } finally {
    await rm(file, { force: true });
  }
}

/** Hex SHA-256 of a file. */
export async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(path), hash);
  return hash.digest('hex');
}

/**
 * Unpacks a gzipped tarball with the system `tar`, as the running user (owners in the archive are
 * not applied). The archive was verified first: it is the platform's own build output.
 */
export function unpackArchive(archive: string, dir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('tar', ['-xzf', archive, '-C', dir, '--no-same-owner'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-2000);
    });
    child.on('error', (error) => reject(new ArtifactFetchError(`could not run tar: ${error.message}`, { cause: error })));
    child.on('close', (code) => {
      if (code === 0) resolve();
      else reject(new ArtifactFetchError(`tar could not unpack the artifact (exit ${code}): ${stderr.trim()}`));
    });
  });
}

async function emptyDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  // The folder itself may be a mount point: only its entries go.
  for (const entry of await readdir(dir)) await rm(join(dir, entry), { recursive: true, force: true });
}

/** Whether a failed download is worth another attempt. */
class RetryableError extends ArtifactFetchError {}

async function download(options: ArtifactFetchOptions, file: string, log: (line: string) => void): Promise<number> {
  const attempts = options.attempts ?? 5;
  let delay = options.retryDelayMs ?? 1000;
  for (let attempt = 1; ; attempt++) {
    try {
      return await downloadOnce(options, file);
    } catch (error) {
      if (!(error instanceof RetryableError) || attempt >= attempts) {
        if (error instanceof RetryableError) throw new ArtifactFetchError(`${error.message} (after ${attempts} attempts)`, { cause: error });
        throw error;
      }
      log(`${error.message}; trying again in ${delay} ms`);
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay *= 2;
    }
  }
}

async function downloadOnce(options: ArtifactFetchOptions, file: string): Promise<number> {
  let response: Response;
  try {
    response = await fetch(options.url, { headers: { authorization: `${ARTIFACT_AUTH_SCHEME} ${options.credential}` } });
  } catch (error) {
    const reason = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new RetryableError(`could not reach ${options.url}: ${reason?.code ?? reason?.message ?? (error as Error).message}`, { cause: error });
  }
  if (!response.ok || !response.body) {
    const detail = await response.text().catch(() => '');
    const message = `${options.url} answered ${response.status}${detail ? `: ${detail.slice(0, 500)}` : ''}`;
    if (response.status >= 500 || response.status === 429) throw new RetryableError(message);
    throw new ArtifactFetchError(message);
  }
  let bytes = 0;
  const counted = Readable.fromWeb(response.body as import('node:stream/web').ReadableStream<Uint8Array>);
  counted.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
  });
  try {
    await pipeline(counted, createWriteStream(file));
  } catch (error) {
    throw new RetryableError(`the download from ${options.url} broke off: ${(error as Error).message}`, { cause: error });
  }
  return bytes;
}
