import { randomBytes } from 'node:crypto';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { testEnv } from './env.js';

export interface TestS3 {
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** A client for the test server (path-style, as s3rver needs). */
  client(): S3Client;
}

export function testS3(): TestS3 {
  const endpoint = testEnv('s3Endpoint');
  const s3 = {
    endpoint,
    region: 'us-east-1',
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    client: () =>
      new S3Client({
        endpoint,
        region: s3.region,
        forcePathStyle: true,
        credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
      }),
  };
  return s3;
}

/** Creates an empty bucket with a unique name on the test S3 server. */
export async function createTestBucket(prefix = 'test'): Promise<string> {
  const name = `${prefix}-${randomBytes(5).toString('hex')}`;
  const client = testS3().client();
  try {
    await client.send(new CreateBucketCommand({ Bucket: name }));
  } finally {
    client.destroy();
  }
  return name;
}
