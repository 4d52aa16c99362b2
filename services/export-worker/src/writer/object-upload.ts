/**
 * One object written as its bytes arrive: a file smaller than a part is sent with one PutObject,
 * a larger one as a multipart upload whose parts go out as they fill. Nothing is visible in the
 * bucket until {@link ObjectUpload.complete}, which is what the resume protocol relies on.
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  HeadObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';

/** S3's smallest part but the last is 5 MiB; 8 MiB parts allow files of up to 78 GiB (10,000 parts). */
export const DEFAULT_PART_BYTES = 8 * 1024 * 1024;

const CONTENT_TYPE = 'application/vnd.apache.parquet';

export class ObjectUpload {
  private buffered: Uint8Array[] = [];
  private bufferedBytes = 0;
  private uploadId: string | undefined;
  private readonly parts: { ETag: string; PartNumber: number }[] = [];

  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
    readonly key: string,
    private readonly partBytes = DEFAULT_PART_BYTES,
  ) {}

  /** Takes the next bytes; sends a part once a part's worth is buffered. */
  async write(bytes: Uint8Array): Promise<void> {
    this.buffered.push(bytes);
    this.bufferedBytes += bytes.byteLength;
    if (this.bufferedBytes >= this.partBytes) await this.sendPart();
  }

  /** Makes the object visible: the buffered rest is sent, and the upload completed. */
  async complete(): Promise<void> {
    if (this.uploadId === undefined) {
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.key, Body: this.take(), ContentType: CONTENT_TYPE }));
      return;
    }
    if (this.bufferedBytes > 0) await this.sendPart();
    await this.client.send(
      new CompleteMultipartUploadCommand({ Bucket: this.bucket, Key: this.key, UploadId: this.uploadId, MultipartUpload: { Parts: this.parts } }),
    );
    this.uploadId = undefined;
  }

  /**
   * Gives up an unfinished multipart upload. Best effort: the caller is already failing with the
   * error that matters, and some stores refuse AbortMultipartUpload (s3rver) or the credentials may
   * lack it; parts left behind are invisible and removed by the bucket's lifecycle rule for
   * incomplete uploads.
   */
  async abandon(): Promise<void> {
    this.buffered = [];
    this.bufferedBytes = 0;
    const uploadId = this.uploadId;
    this.uploadId = undefined;
    if (uploadId === undefined) return;
    await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: this.key, UploadId: uploadId })).catch(() => undefined);
  }

  private async sendPart(): Promise<void> {
    if (this.uploadId === undefined) {
      const created = await this.client.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: this.key, ContentType: CONTENT_TYPE }));
      if (!created.UploadId) throw new Error(`the store started a multipart upload of ${this.key} without an UploadId`);
      this.uploadId = created.UploadId;
    }
    const partNumber = this.parts.length + 1;
    const body = this.take();
    const sent = await this.client.send(
      new UploadPartCommand({
        Bucket: this.bucket,
        Key: this.key,
        UploadId: this.uploadId,
        PartNumber: partNumber,
        Body: body,
        ContentLength: body.byteLength,
      }),
    );
    this.parts.push({ ETag: sent.ETag!, PartNumber: partNumber });
  }

  private take(): Uint8Array {
    const body = Buffer.concat(this.buffered, this.bufferedBytes);
    this.buffered = [];
    this.bufferedBytes = 0;
    return body;
  }
}

/** Whether `key` exists in `bucket` (HeadObject; any answer but "not found" is thrown). */
export async function objectExists(client: S3Client, bucket: string, key: string): Promise<boolean> {
  try {
    await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    return true;
  } catch (error) {
    const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    if (status === 404 || (error as Error).name === 'NotFound') return false;
    throw error;
  }
}
