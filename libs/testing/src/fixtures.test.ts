import { describe, expect, it } from '@jest/globals';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import pg from 'pg';
import { createTestBucket, createTestDatabase, testS3 } from './index.js';

describe('test fixtures', () => {
  it('gives each caller its own empty database on the shared cluster, and drops it', async () => {
    const [a, b] = await Promise.all([createTestDatabase(), createTestDatabase()]);
    expect(a.name).not.toBe(b.name);
    const client = new pg.Client({ connectionString: a.url });
    await client.connect();
    await client.query('CREATE TABLE only_in_a (v int)');
    await client.end();
    const other = new pg.Client({ connectionString: b.url });
    await other.connect();
    expect((await other.query("SELECT to_regclass('only_in_a') AS t")).rows).toEqual([{ t: null }]);
    await other.end();
    await Promise.all([a.drop(), b.drop()]);
    await expect(new pg.Client({ connectionString: a.url }).connect()).rejects.toThrow(/does not exist/);
  });

  it('stores and returns objects in a fresh bucket on the S3 server', async () => {
    const bucket = await createTestBucket();
    const client = testS3().client();
    try {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: 'a/b.txt', Body: 'hello' }));
      const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: 'a/b.txt' }));
      expect(await got.Body!.transformToString()).toBe('hello');
    } finally {
      client.destroy();
    }
  });
});
