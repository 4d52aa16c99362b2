/**
 * Destinations are endpoints a tenant chose: unless the operator allows private addresses, one at
 * (or resolving to) loopback is refused before anything is sent, so a tenant cannot make the
 * export-worker probe the platform's own services. The same store accepts it when allowed.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { createDatabase, migrate, type Database } from '@berth/db';
import { silentLogger } from '@berth/log';
import { SecretBox } from '@berth/secret-box';
import { createTestBucket, createTestDatabase, testS3, type TestDatabase } from '@berth/testing';
import type { BulkExportTables } from '../exports/tables.js';
import { exportWorkerMigrationsDir } from '../index.js';
import { TRACE_STORE_SCHEMA } from '../traces/trace-store.js';
import { Destinations } from './destinations.js';

const s3 = testS3();
const box = new SecretBox(SecretBox.generateKey());
const tenant = randomUUID();
let testDb: TestDatabase;
let database: Database<BulkExportTables>;
let bucket: string;

const input = (endpoint: string) => ({
  destination_type: 's3',
  display_name: 'local',
  config: { bucket_name: bucket, prefix: 'out', endpoint_url: endpoint },
  credentials: { access_key_id: s3.accessKeyId, secret_access_key: s3.secretAccessKey },
});

beforeAll(async () => {
  testDb = await createTestDatabase('ew_destinations');
  await migrate({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA, directory: exportWorkerMigrationsDir });
  database = createDatabase<BulkExportTables>({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA });
  bucket = await createTestBucket('dest');
});

afterAll(async () => {
  await database.close();
  await testDb.drop();
});

async function objectsInBucket(): Promise<number> {
  const client = s3.client();
  try {
    return (await client.send(new ListObjectsV2Command({ Bucket: bucket }))).KeyCount ?? 0;
  } finally {
    client.destroy();
  }
}

describe('a destination at a private address', () => {
  const port = new URL(s3.endpoint).port;

  it.each([`http://127.0.0.1:${port}`, `http://localhost:${port}`, 'http://169.254.169.254'])(
    '(%s) is refused with words unless the operator allows it',
    async (endpoint) => {
      const destinations = new Destinations(database.db, box, { logger: silentLogger() });
      await expect(destinations.create(tenant, input(endpoint) as never)).rejects.toThrow(
        /^the destination cannot be written: the storage endpoint .* is not a public address/,
      );
      expect(await destinations.list(tenant, { limit: 10, offset: 0 })).toEqual([]);
    },
  );

  it('is accepted when the operator allows private endpoints', async () => {
    const destinations = new Destinations(database.db, box, { logger: silentLogger(), clientOptions: { allowPrivateEndpoints: true } });
    const created = await destinations.create(tenant, input(`http://localhost:${port}`) as never);
    expect(created.config.endpoint_url).toBe(`http://localhost:${port}`);
    // The test write was removed again; nothing else was written.
    expect(await objectsInBucket()).toBe(0);
  });
});
