/**
 * The upload refuses what is not a gzipped tarball — garbage, gzip of something else, a tarball
 * whose end is broken — with 422, and keeps nothing of it (a fake DeploymentService records what
 * reached the control plane).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { FakeDeploymentService } from './__tests__/fake-deployments.js';
import { testGatewayConfig } from './__tests__/test-config.js';
import { tar, tarGz, tarGzOfSize } from './__tests__/tarballs.js';
import { start, type RunningGateway } from './index.js';
import { UPLOAD_CHUNK_BYTES } from './routes/deployment-upload.js';
import { TarballCheck, UnpackedTooLargeError } from './routes/tarball-check.js';

let testDb: TestDatabase;
let fake: FakeDeploymentService;
let gateway: RunningGateway;
let key: string;
let deploymentId: string;

/** Sends `body` as the upload in 256 KiB pieces, as a streaming client does. */
function upload(body: Buffer): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${gateway.url}/v2/deployments/${deploymentId}/upload`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/gzip' },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString()) }));
    });
    // The gateway may answer and close before the whole body is sent.
    req.on('error', (error) => (req.writableEnded ? undefined : reject(error)));
    let at = 0;
    const next = () => {
      if (req.destroyed) return;
      if (at >= body.length) return void req.end();
      req.write(body.subarray(at, at + 256 * 1024), next);
      at += 256 * 1024;
    };
    next();
  });
}

beforeAll(async () => {
  testDb = await createTestDatabase('gw_upload');
  fake = await new FakeDeploymentService().start();
  gateway = await start(testGatewayConfig(testDb.url, fake.address), silentLogger());
  const tenantId = (await gateway.store.createTenant({ name: 'a' })).id;
  key = (await gateway.store.createApiKey({ tenantId, name: 'dev' })).key;
  const created = await fetch(`${gateway.url}/v2/deployments`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'uploads', source: 'internal_source' }),
  });
  deploymentId = ((await created.json()) as { id: string }).id;
});
afterAll(async () => {
  await gateway.close();
  await fake.close();
  await testDb.drop();
});

describe('POST /v2/deployments/{id}/upload refuses what is not a .tar.gz', () => {
  it.each([
    ['garbage', randomBytes(20)],
    ['several MiB of garbage', randomBytes(3 * UPLOAD_CHUNK_BYTES)],
    ['gzip of text', gzipSync('hello, this is not a tar archive')],
    ['several MiB of gzipped non-tar data', gzipSync(randomBytes(3 * UPLOAD_CHUNK_BYTES))],
    ['gzip of nothing', gzipSync(Buffer.alloc(0))],
    ['a tar archive without gzip', tar({ 'langgraph.json': '{}' })],
  ])('%s: 422, and nothing reaches the control plane', async (_what, body) => {
    const calls = fake.callsOf('uploadSource').length;
    const res = await upload(body);
    expect(res).toEqual({ status: 422, body: { detail: [{ loc: ['body'], msg: expect.stringMatching(/gzip|tar/), type: 'value_error' }] } });
    expect(fake.callsOf('uploadSource').length).toBe(calls);
  });

  it('a tarball whose end is broken: 422, and its upload is never completed', async () => {
    const whole = tarGzOfSize(3 * UPLOAD_CHUNK_BYTES);
    const before = new Set(fake.uploads.keys());
    const res = await upload(whole.subarray(0, whole.length - 100));
    expect(res.status).toBe(422);
    expect(res.body.detail[0].msg).toMatch(/not a valid gzip stream/);
    const started = [...fake.uploads.values()].filter((u) => !before.has(u.id));
    expect(started.every((u) => !u.complete)).toBe(true);
    expect(fake.callsOf('uploadSource').some((c) => c.last === true && started.some((u) => u.id === c.uploadId))).toBe(false);
  });

  it('takes a real .tar.gz, small or of several chunks', async () => {
    expect((await upload(tarGz())).status).toBe(201);
    expect((await upload(tarGzOfSize(2 * UPLOAD_CHUNK_BYTES + 7))).status).toBe(201);
  });
});

describe('TarballCheck', () => {
  it('stops decompressing a gzip bomb at its limit', async () => {
    const check = new TarballCheck(1024 * 1024);
    const bomb = gzipSync(Buffer.concat([tar({ 'langgraph.json': '{}' }), Buffer.alloc(50 * 1024 * 1024)]));
    await expect(check.write(bomb).then(() => check.end())).rejects.toBeInstanceOf(UnpackedTooLargeError);
    check.destroy();
  });
});
