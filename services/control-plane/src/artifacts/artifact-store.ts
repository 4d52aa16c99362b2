/**
 * Built revisions kept in object storage, for deployers whose agent servers run elsewhere
 * (Kubernetes: an init container fetches the revision through the control plane's artifact
 * endpoint, `artifact-server.ts`). A revision's build folder — the project with its installed
 * dependencies, as the project builder leaves it — is packed into a gzipped tarball whose SHA-256
 * is recorded with the revision; whoever unpacks it checks that first.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DeleteObjectsCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { traceS3 } from '@berth/tracing';
import { create as createTar } from 'tar';

/** The platform's bucket for built revisions (BERTH_S3_*; credentials from the SDK's chain: AWS_* env, a web identity, …). */
export interface ArtifactStorageConfig {
  bucket: string;
  /** @default 'us-east-1' */
  region?: string;
  /** An S3-compatible endpoint (MinIO, …) instead of AWS. */
  endpoint?: string;
  /** Path-style requests (most self-hosted stores need them). @default true with an endpoint */
  forcePathStyle?: boolean;
  /** Key prefix of every archive. @default 'revisions/' */
  prefix?: string;
  /** Explicit credentials (tests); otherwise the SDK's default chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

/** What was stored for a revision. */
export interface StoredArtifact {
  key: string;
  /** Hex SHA-256 of the archive. */
  sha256: string;
  size: number;
}

/** Storing or reading an archive failed; `cause` is what the SDK or the file system said. */
export class ArtifactStorageError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ArtifactStorageError';
  }
}

export class ArtifactStore {
  readonly #client: S3Client;
  readonly #bucket: string;
  readonly #prefix: string;

  constructor(config: ArtifactStorageConfig) {
    this.#bucket = config.bucket;
    this.#prefix = config.prefix ?? 'revisions/';
    this.#client = traceS3(
      new S3Client({
        region: config.region ?? 'us-east-1',
        ...(config.endpoint
          ? { endpoint: config.endpoint, forcePathStyle: config.forcePathStyle ?? true }
          : config.forcePathStyle
            ? { forcePathStyle: true }
            : {}),
        ...(config.credentials ? { credentials: config.credentials } : {}),
        // A streamed body would otherwise go out aws-chunked with a trailing checksum, which several
        // S3-compatible stores (s3rver, older MinIO) keep as the object's bytes: the archive's own SHA-256 guards it instead.
        requestChecksumCalculation: 'WHEN_REQUIRED',
      }),
    );
  }

  /** The key of a revision's archive. */
  keyOf(deploymentId: string, revisionId: string): string {
    return `${this.#prefix}${deploymentId}/${revisionId}.tar.gz`;
  }

  /**
   * Packs `dir` and stores it as the revision's archive. Written to a temporary file first (its
   * hash computed on the way), so the upload knows its length and the recorded hash is of exactly
   * the bytes sent.
   */
  async put(deploymentId: string, revisionId: string, dir: string): Promise<StoredArtifact> {
    const key = this.keyOf(deploymentId, revisionId);
    const file = join(tmpdir(), `berth-revision-${randomBytes(6).toString('hex')}.tar.gz`);
    try {
      const hash = createHash('sha256');
      const hashing = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          hash.update(chunk);
          done(null, chunk);
        },
      });
      // portable: no owner names or ids of this machine; links inside the folder stay links.
      await pipeline(createTar({ gzip: true, cwd: dir, portable: true }, ['.']) as unknown as Readable, hashing, createWriteStream(file));
      const { size } = await stat(file);
      await this.#client.send(
        new PutObjectCommand({ Bucket: this.#bucket, Key: key, Body: createReadStream(file), ContentLength: size, ContentType: 'application/gzip' }),
      );
      return { key, sha256: hash.digest('hex'), size };
    } catch (error) {
      throw new ArtifactStorageError(`could not store the build of revision ${revisionId} in bucket ${this.#bucket}: ${(error as Error).message}`, {
        cause: error,
      });
    } finally {
      await rm(file, { force: true });
    }
  }

  /** A revision's archive as a stream, with its length. */
  async get(key: string): Promise<{ body: Readable; size: number | undefined }> {
    try {
      const answer = await this.#client.send(new GetObjectCommand({ Bucket: this.#bucket, Key: key }));
      return { body: answer.Body as Readable, size: answer.ContentLength };
    } catch (error) {
      throw new ArtifactStorageError(`could not read ${key} from bucket ${this.#bucket}: ${(error as Error).message}`, { cause: error });
    }
  }

  /** Whether a revision's archive is (still) stored. */
  async has(key: string): Promise<boolean> {
    try {
      await this.#client.send(new HeadObjectCommand({ Bucket: this.#bucket, Key: key }));
      return true;
    } catch (error) {
      if ((error as { name?: string }).name === 'NotFound' || (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404)
        return false;
      throw new ArtifactStorageError(`could not look for ${key} in bucket ${this.#bucket}: ${(error as Error).message}`, { cause: error });
    }
  }

  /** Deletes every archive of a deployment (when it is deleted). */
  async removeDeployment(deploymentId: string): Promise<number> {
    const prefix = `${this.#prefix}${deploymentId}/`;
    let removed = 0;
    let token: string | undefined;
    do {
      const page = await this.#client.send(new ListObjectsV2Command({ Bucket: this.#bucket, Prefix: prefix, ...(token ? { ContinuationToken: token } : {}) }));
      const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
      if (keys.length) {
        await this.#client.send(new DeleteObjectsCommand({ Bucket: this.#bucket, Delete: { Objects: keys } }));
        removed += keys.length;
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return removed;
  }

  close(): void {
    this.#client.destroy();
  }
}
