/**
 * The bulk-export API end to end: the gateway's HTTP server calling a real export-worker over
 * gRPC, on a real Postgres and the local S3 server. Destinations (validated by a real write, and
 * refused in words), exports (every bad field a 422 naming it, other tenants' ids 404), cancel
 * rules, and schedules driven by an injected clock.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { ManualClock } from '@berth/clock';
import { createDatabase, sql } from '@berth/db';
import { start as startExportWorker, ExportScheduler, type RunningExportWorker } from '@berth/export-worker';
import { silentLogger } from '@berth/log';
import { SecretBox } from '@berth/secret-box';
import { createTestBucket, createTestDatabase, testS3, type TestDatabase } from '@berth/testing';
import { start, type RunningGateway } from './index.js';
import { testGatewayConfig } from './__tests__/test-config.js';

type Json = Record<string, any>;

let testDb: TestDatabase;
let worker: RunningExportWorker;
let gateway: RunningGateway;
let tenantA: string;
let tenantB: string;
let keyA: string;
let keyB: string;
let sessionA: string;
let bucket: string;
let deniedServer: http.Server;
let deniedUrl: string;
/** The export-worker's clock. */
const clock = new ManualClock(Date.parse('2026-05-10T12:00:00Z'));
const s3 = testS3();

async function call(path: string, init: { method?: string; key?: string; tenant?: string; json?: unknown } = {}) {
  const key = init.key ?? keyA;
  const res = await fetch(`${gateway.url}${path}`, {
    method: init.method ?? 'GET',
    headers: {
      'x-api-key': key,
      'x-tenant-id': init.tenant ?? (key === keyA ? tenantA : tenantB),
      ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json };
}

function destinationBody(extra: Json = {}, config: Json = {}, credentials: Json = {}) {
  return {
    destination_type: 's3',
    display_name: 'my bucket',
    config: { bucket_name: bucket, prefix: 'exports/berth', endpoint_url: s3.endpoint, region: s3.region, ...config },
    credentials: { access_key_id: s3.accessKeyId, secret_access_key: s3.secretAccessKey, ...credentials },
    ...extra,
  };
}

async function createDestination(key = keyA): Promise<Json> {
  const res = await call('/api/v1/bulk-exports/destinations', { method: 'POST', key, json: destinationBody() });
  expect(res.status).toBe(200);
  return res.body;
}

beforeAll(async () => {
  testDb = await createTestDatabase('gw_bulk');
  bucket = await createTestBucket('exports');
  worker = await startExportWorker(
    {
      databaseUrl: testDb.url,
      secretKey: SecretBox.generateKey(),
      grpcHost: '127.0.0.1',
      grpcPort: 0,
      logLevel: 'silent',
      bulkExports: { background: false, clock, allowPrivateEndpoints: true },
    },
    silentLogger(),
  );
  gateway = await start({ ...testGatewayConfig(testDb.url, '127.0.0.1:1'), services: { 'export-worker': `127.0.0.1:${worker.port}` } }, silentLogger());
  const a = await gateway.store.createTenant({ name: 'a' });
  const b = await gateway.store.createTenant({ name: 'b' });
  tenantA = a.id;
  tenantB = b.id;
  keyA = (await gateway.store.createApiKey({ tenantId: a.id, name: 'dev' })).key;
  keyB = (await gateway.store.createApiKey({ tenantId: b.id, name: 'dev' })).key;
  sessionA = (await worker.traces.createSession(tenantA, { name: 'agent' })).id;
  // A storage that refuses every request as S3 does when a policy denies it.
  deniedServer = http.createServer((req, res) => {
    req.resume();
    res.writeHead(403, { 'content-type': 'application/xml' });
    res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>');
  });
  await new Promise<void>((resolve) => deniedServer.listen(0, '127.0.0.1', resolve));
  deniedUrl = `http://127.0.0.1:${(deniedServer.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await gateway?.close();
  await worker?.close();
  deniedServer?.close();
  await testDb?.drop();
});

describe('destinations', () => {
  it('are created after a test write under <prefix>/tmp/ (removed again), and never show their credentials', async () => {
    const res = await call('/api/v1/bulk-exports/destinations', {
      method: 'POST',
      json: destinationBody({}, { prefix: '/exports/berth/' }, { secret_access_key: 'S3RVER', session_token: 'tok' }),
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: expect.any(String),
      tenant_id: tenantA,
      destination_type: 's3',
      display_name: 'my bucket',
      config: { bucket_name: bucket, prefix: 'exports/berth', endpoint_url: s3.endpoint, region: s3.region },
      credentials_keys: ['access_key_id', 'secret_access_key', 'session_token'],
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const client = s3.client();
    const left = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'exports/berth/tmp/' }));
    client.destroy();
    expect(left.KeyCount ?? 0).toBe(0);

    // At rest the credentials are sealed: no secret appears in the row.
    const db = createDatabase<any>({ connectionString: testDb.url, schema: 'berth_export' });
    const row = (
      await sql<{ credentials_sealed: Buffer; config: unknown }>`SELECT credentials_sealed, config FROM destinations WHERE id = ${res.body.id}::uuid`.execute(
        db.db,
      )
    ).rows[0]!;
    await db.close();
    expect(row.credentials_sealed.includes(Buffer.from('S3RVER'))).toBe(false);
    expect(row.credentials_sealed.includes(Buffer.from('tok'))).toBe(false);
    expect(JSON.stringify(row.config)).not.toContain('S3RVER');

    const listed = await call('/api/v1/bulk-exports/destinations');
    expect(listed.body.map((d: Json) => d.id)).toContain(res.body.id);
    expect(JSON.stringify(listed.body)).not.toContain('S3RVER');
    expect((await call(`/api/v1/bulk-exports/destinations/${res.body.id}`)).body).toEqual(res.body);
  });

  it.each([
    ['a missing bucket', { bucket_name: 'no-such-bucket-here' }, {}, /bucket "no-such-bucket-here" does not exist/],
    ['unknown credentials', {}, { access_key_id: 'NOT-A-KEY' }, /access denied to bucket .*InvalidAccessKeyId/],
    ['a storage that denies access', { endpoint_url: 'DENIED' }, {}, /access denied to bucket .*AccessDenied/],
    [
      'an endpoint where nothing listens',
      { endpoint_url: 'http://127.0.0.1:1' },
      {},
      /cannot reach the storage endpoint http:\/\/127\.0\.0\.1:1 \(ECONNREFUSED\)/,
    ],
  ])('are refused with a 400 that says why for %s', async (_what, config: Json, credentials: Json, words) => {
    const fixed = config.endpoint_url === 'DENIED' ? { ...config, endpoint_url: deniedUrl } : config;
    const res = await call('/api/v1/bulk-exports/destinations', { method: 'POST', json: destinationBody({}, fixed, credentials) });
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/^the destination cannot be written: /);
    expect(res.body.detail).toMatch(words);
  });

  it('refuses malformed bodies with 422s naming the field', async () => {
    const res = await call('/api/v1/bulk-exports/destinations', { method: 'POST', json: { ...destinationBody({ destination_type: 'gcs' }), extra: 1 } });
    expect(res.status).toBe(422);
    expect(res.body.detail.map((d: Json) => d.loc)).toEqual(
      expect.arrayContaining([
        ['body', 'destination_type'],
        ['body', 'extra'],
      ]),
    );
    const noRegion = await call('/api/v1/bulk-exports/destinations', {
      method: 'POST',
      json: destinationBody({}, { endpoint_url: undefined, region: undefined }),
    });
    expect(noRegion.status).toBe(422);
    expect(noRegion.body.detail[0].loc).toEqual(['body', 'config']);
  });

  it('rotate credentials only after checking them, and are deleted unless an unfinished export uses them', async () => {
    const destination = await createDestination();
    const url = `/api/v1/bulk-exports/destinations/${destination.id}`;
    const bad = await call(url, { method: 'PATCH', json: { credentials: { access_key_id: 'WRONG', secret_access_key: 'x' } } });
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toMatch(/access denied/);
    const rotated = await call(url, {
      method: 'PATCH',
      json: { credentials: { access_key_id: s3.accessKeyId, secret_access_key: 'rotated' }, display_name: 'renamed' },
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body).toMatchObject({ display_name: 'renamed', credentials_keys: ['access_key_id', 'secret_access_key'] });

    const exp = await call('/api/v1/bulk-exports', {
      method: 'POST',
      json: {
        bulk_export_destination_id: destination.id,
        session_id: sessionA,
        start_time: '2026-05-01T00:00:00Z',
        end_time: '2026-05-02T00:00:00Z',
        format_version: 'v2_beta',
      },
    });
    expect(exp.status).toBe(200);
    const refused = await call(url, { method: 'DELETE' });
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toContain(exp.body.id);
    expect((await call(`/api/v1/bulk-exports/${exp.body.id}`, { method: 'PATCH', json: { status: 'CANCELLED' } })).status).toBe(200);
    expect((await call(url, { method: 'DELETE' })).status).toBe(204);
    expect((await call(url)).status).toBe(404);
  });

  it('of another tenant are 404s and not listed', async () => {
    const destination = await createDestination();
    expect((await call(`/api/v1/bulk-exports/destinations/${destination.id}`, { key: keyB })).status).toBe(404);
    expect((await call(`/api/v1/bulk-exports/destinations/${destination.id}`, { key: keyB, method: 'DELETE' })).status).toBe(404);
    expect((await call('/api/v1/bulk-exports/destinations', { key: keyB })).body).toEqual([]);
    expect((await call('/api/v1/bulk-exports/destinations/not-an-id')).status).toBe(404);
  });
});

describe('exports', () => {
  let destination: Json;
  const base = () => ({ bulk_export_destination_id: destination.id, session_id: sessionA, start_time: '2026-05-01T00:00:00Z', format_version: 'v2_beta' });
  beforeAll(async () => {
    destination = await createDestination();
  });

  it.each([
    ['end_time with interval_hours', { end_time: '2026-05-02T00:00:00Z', interval_hours: 24 }, ['body', 'end_time']],
    ['interval_hours 0', { interval_hours: 0 }, ['body', 'interval_hours']],
    ['interval_hours 169', { interval_hours: 169 }, ['body', 'interval_hours']],
    ['no end_time nor interval_hours', {}, ['body', 'end_time']],
    ['end_time before start_time', { end_time: '2026-04-30T00:00:00Z' }, ['body', 'end_time']],
    ['end_time equal to start_time', { end_time: '2026-05-01T00:00:00Z' }, ['body', 'end_time']],
    ['an unknown export field', { end_time: '2026-05-02T00:00:00Z', export_fields: ['id', 'nope'] }, ['body', 'export_fields', 1]],
    ['an unparsable filter', { end_time: '2026-05-02T00:00:00Z', filter: 'eq(name' }, ['body', 'filter']],
    ['an unknown format version', { end_time: '2026-05-02T00:00:00Z', format_version: 'v9' }, ['body', 'format_version']],
    ['an unknown field', { end_time: '2026-05-02T00:00:00Z', colour: 'red' }, ['body', 'colour']],
    ['a start_time that is no time', { end_time: '2026-05-02T00:00:00Z', start_time: 'yesterday' }, ['body', 'start_time']],
  ])('refuse %s with a 422 naming it', async (_what, extra: Json, loc) => {
    const res = await call('/api/v1/bulk-exports', { method: 'POST', json: { ...base(), ...extra } });
    expect(res.status).toBe(422);
    expect(res.body.detail.map((d: Json) => d.loc)).toContainEqual(loc);
  });

  it('with an unknown destination or project, or another tenant’s, are 404s', async () => {
    const oneDay = { ...base(), end_time: '2026-05-02T00:00:00Z' };
    expect((await call('/api/v1/bulk-exports', { method: 'POST', json: { ...oneDay, bulk_export_destination_id: randomUUID() } })).status).toBe(404);
    const noSession = await call('/api/v1/bulk-exports', { method: 'POST', json: { ...oneDay, session_id: randomUUID() } });
    expect(noSession.status).toBe(404);
    expect(noSession.body.detail).toMatch(/tracing project/);
    const sessionB = (await worker.traces.createSession(tenantB, { name: 'agent' })).id;
    expect((await call('/api/v1/bulk-exports', { key: keyB, method: 'POST', json: { ...oneDay, session_id: sessionB } })).status).toBe(404);
    expect((await call('/api/v1/bulk-exports', { method: 'POST', json: { ...oneDay, session_id: sessionB } })).status).toBe(404);
  });

  it('are created with one run per UTC day, listed newest first, cancelled once (a final export is a 409), and hidden from other tenants', async () => {
    const created = await call('/api/v1/bulk-exports', {
      method: 'POST',
      json: { ...base(), start_time: '2026-05-01T18:00:00Z', end_time: '2026-05-03T06:00:00Z', export_fields: ['id', 'name'], filter: 'eq(run_type, "llm")' },
    });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({
      status: 'CREATED',
      tenant_id: tenantA,
      session_id: sessionA,
      start_time: '2026-05-01T18:00:00.000Z',
      end_time: '2026-05-03T06:00:00.000Z',
      export_fields: ['id', 'name'],
      filter: 'eq(run_type, "llm")',
      interval_hours: null,
      source_bulk_export_id: null,
      format_version: 'v2_beta',
    });
    const id = created.body.id;
    const runs = await call(`/api/v1/bulk-exports/${id}/runs`);
    expect(runs.body.map((r: Json) => [r.start_time, r.end_time, r.status, r.rows_written])).toEqual([
      ['2026-05-01T18:00:00.000Z', '2026-05-02T00:00:00.000Z', 'CREATED', 0],
      ['2026-05-02T00:00:00.000Z', '2026-05-03T00:00:00.000Z', 'CREATED', 0],
      ['2026-05-03T00:00:00.000Z', '2026-05-03T06:00:00.000Z', 'CREATED', 0],
    ]);
    const later = await call('/api/v1/bulk-exports', { method: 'POST', json: { ...base(), end_time: '2026-05-02T00:00:00Z' } });
    const list = await call('/api/v1/bulk-exports?limit=2');
    expect(list.body.map((e: Json) => e.id)).toEqual([later.body.id, id]);
    expect((await call('/api/v1/bulk-exports?limit=1001')).status).toBe(422);

    expect((await call(`/api/v1/bulk-exports/${id}`, { key: keyB })).status).toBe(404);
    expect((await call(`/api/v1/bulk-exports/${id}/runs`, { key: keyB })).status).toBe(404);
    expect((await call(`/api/v1/bulk-exports/${id}`, { key: keyB, method: 'PATCH', json: { status: 'CANCELLED' } })).status).toBe(404);
    expect((await call('/api/v1/bulk-exports', { key: keyB })).body).toEqual([]);

    expect((await call(`/api/v1/bulk-exports/${id}`, { method: 'PATCH', json: { status: 'RUNNING' } })).status).toBe(422);
    const cancelled = await call(`/api/v1/bulk-exports/${id}`, { method: 'PATCH', json: { status: 'CANCELLED' } });
    expect(cancelled.body).toMatchObject({ status: 'CANCELLED', finished_at: expect.any(String) });
    expect((await call(`/api/v1/bulk-exports/${id}/runs`)).body.map((r: Json) => r.status)).toEqual(['CANCELLED', 'CANCELLED', 'CANCELLED']);
    const again = await call(`/api/v1/bulk-exports/${id}`, { method: 'PATCH', json: { status: 'CANCELLED' } });
    expect(again.status).toBe(409);
    expect(again.body.detail).toMatch(/is CANCELLED/);
  });
});

describe('scheduled exports', () => {
  it('spawn each due interval exactly once (two schedulers racing), 10 minutes after it ends, and a cancelled schedule leaves its spawns alone', async () => {
    const destination = await createDestination();
    const created = await call('/api/v1/bulk-exports', {
      method: 'POST',
      json: {
        bulk_export_destination_id: destination.id,
        session_id: sessionA,
        start_time: '2026-05-10T05:00:00Z',
        interval_hours: 2,
        format_version: 'v2_beta',
      },
    });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ status: 'SCHEDULED', interval_hours: 2, end_time: null });
    const scheduleId = created.body.id;
    const spawnedOf = async () =>
      ((await call('/api/v1/bulk-exports?limit=1000')).body as Json[])
        .filter((e) => e.source_bulk_export_id === scheduleId)
        .map((e) => [e.start_time, e.end_time, e.status])
        .sort();

    // At 12:00 (the clock has not moved yet), intervals ending 07:00, 09:00, 11:00 are due; the one ending 13:00 is not.
    const second = new ExportScheduler({ store: worker.bulkExports.store, logger: silentLogger(), clock });
    await Promise.all([worker.bulkExports.scheduler.tick(), second.tick(), second.tick()]);
    expect(await spawnedOf()).toEqual([
      ['2026-05-10T05:00:00.000Z', '2026-05-10T07:00:00.000Z', 'CREATED'],
      ['2026-05-10T07:00:00.000Z', '2026-05-10T09:00:00.000Z', 'CREATED'],
      ['2026-05-10T09:00:00.000Z', '2026-05-10T11:00:00.000Z', 'CREATED'],
    ]);

    await clock.advanceTo(Date.parse('2026-05-10T13:09:59Z'));
    await worker.bulkExports.scheduler.tick();
    expect(await spawnedOf()).toHaveLength(3);
    await clock.advanceTo(Date.parse('2026-05-10T13:10:00Z'));
    await Promise.all([worker.bulkExports.scheduler.tick(), second.tick()]);
    expect((await spawnedOf()).at(-1)).toEqual(['2026-05-10T11:00:00.000Z', '2026-05-10T13:00:00.000Z', 'CREATED']);
    expect(await spawnedOf()).toHaveLength(4);

    expect((await call(`/api/v1/bulk-exports/${scheduleId}`, { method: 'PATCH', json: { status: 'CANCELLED' } })).body.status).toBe('CANCELLED');
    await clock.advanceTo(Date.parse('2026-05-11T13:10:00Z'));
    await worker.bulkExports.scheduler.tick();
    const after = await spawnedOf();
    expect(after).toHaveLength(4);
    expect(after.every(([, , status]) => status === 'CREATED')).toBe(true);
    expect((await call(`/api/v1/bulk-exports/${scheduleId}`, { method: 'PATCH', json: { status: 'CANCELLED' } })).status).toBe(409);
  });
});
