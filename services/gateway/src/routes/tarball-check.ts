/**
 * Checks an upload, while it streams through, for being what the builder can use: a gzip stream
 * that decompresses (to its end, CRC included) and starts with a valid tar header. Decompressed
 * bytes are counted and dropped, never kept; the first 512 hold the header.
 */
import { createGunzip } from 'node:zlib';
import { RequestValidationError } from '@berth/errors';

/** A tar block: headers and content come in these. */
const BLOCK = 512;

/**
 * Most bytes an upload may decompress to: twice what the builder unpacks at most (1 GiB of file
 * content), so a gzip bomb costs the gateway seconds of CPU, not minutes.
 */
export const MAX_UNPACKED_BYTES = 2 * 1024 * 1024 * 1024;

/** The upload is not a gzipped tarball (422). */
export class NotATarballError extends RequestValidationError {
  constructor(msg: string, options?: { cause?: unknown }) {
    super([{ loc: ['body'], msg, type: 'value_error' }], options);
  }
}

/** The upload decompresses to more than MAX_UNPACKED_BYTES (413). */
export class UnpackedTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`The upload decompresses to more than ${limit} bytes`);
    this.name = 'UnpackedTooLargeError';
  }
}

/**
 * True when `block` is a tar header: its checksum field (octal, at 148) equals the sum of its
 * bytes with that field counted as spaces (unsigned, or signed as some old tars wrote it).
 */
export function isTarHeader(block: Buffer): boolean {
  if (block.length < BLOCK) return false;
  const field = block
    .subarray(148, 156)
    .toString('latin1')
    .replace(/[\0 ]+/g, ' ')
    .trim();
  if (!/^[0-7]{1,8}$/.test(field)) return false; // also an all-zero block: the end of an archive
  const expected = parseInt(field, 8);
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i += 1) {
    const byte = i >= 148 && i < 156 ? 0x20 : block[i]!;
    unsigned += byte;
    signed += byte > 127 ? byte - 256 : byte;
  }
  return expected === unsigned || expected === signed;
}

export class TarballCheck {
  private readonly gunzip = createGunzip();
  private head = Buffer.alloc(0);
  private unpacked = 0;
  private failure: Error | undefined;
  private readonly finished: Promise<void>;
  /** Settles when the check failed: zlib, destroyed then, may never call back pending writes. */
  private readonly failed: Promise<void>;
  private onFailed: () => void = () => undefined;

  constructor(private readonly maxUnpackedBytes = MAX_UNPACKED_BYTES) {
    this.gunzip.on('data', (chunk: Buffer) => {
      if (this.head.length < BLOCK) this.head = Buffer.concat([this.head, chunk.subarray(0, BLOCK - this.head.length)]);
      this.unpacked += chunk.length;
      if (this.unpacked > this.maxUnpackedBytes) this.fail(new UnpackedTooLargeError(this.maxUnpackedBytes));
    });
    this.failed = new Promise<void>((resolve) => (this.onFailed = resolve));
    this.finished = new Promise<void>((resolve) => {
      this.gunzip.once('end', resolve);
      this.gunzip.once('error', (error) => {
        this.fail(new NotATarballError('The upload is not a valid gzip stream: send the project as a .tar.gz', { cause: error }));
        resolve();
      });
    });
  }

  /** Decompresses the next bytes of the upload; throws as soon as they show it is not a tarball. */
  async write(piece: Buffer): Promise<void> {
    this.throwIfFailed();
    // The callback comes once zlib has taken the bytes, after the output they made was emitted.
    await Promise.race([new Promise<void>((resolve) => this.gunzip.write(piece, () => resolve())), this.failed]);
    this.throwIfFailed();
  }

  /**
   * Throws unless what was decompressed so far starts with a tar header. Called before the first
   * chunk is stored, so garbage leaves nothing behind.
   */
  assertStartsAsTarball(): void {
    this.throwIfFailed();
    if (!isTarHeader(this.head)) {
      throw new NotATarballError('The upload is gzip but not of a tar archive (no valid tar header at its start): send the project as a .tar.gz');
    }
  }

  /** Ends the stream: throws unless the whole upload decompressed and started with a tar header. */
  async end(): Promise<void> {
    this.throwIfFailed();
    this.gunzip.end();
    await Promise.race([this.finished, this.failed]);
    this.assertStartsAsTarball();
  }

  /** Frees zlib's memory when the upload stops early. */
  destroy(): void {
    this.gunzip.destroy();
  }

  private fail(error: Error): void {
    this.failure ??= error;
    this.onFailed();
    this.gunzip.destroy();
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }
}
