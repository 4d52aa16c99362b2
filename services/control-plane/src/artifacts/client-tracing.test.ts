/**
 * Redis commands and S3 calls of the platform's services in its own traces (docs/operate/monitor.md):
 * made inside a trace, each is a child span named by the command or S3 operation, without its keys
 * or values; made outside one (background work), none is recorded. A real Redis and s3rver, spans
 * received by an in-test OTLP/HTTP collector.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createTestBucket, spanAttribute, startOtlpCollector, testRedisUrl, testS3, type OtlpCollector } from '@berth/testing';
import { endSpan, startSpan, startTracing, traceRedis, withSpan } from '@berth/tracing';
import { ArtifactStore } from './artifact-store.js';

let collector: OtlpCollector;
const secretKey = `berth:test:${randomUUID()}`;
const secretValue = randomUUID();
const deploymentId = randomUUID();

beforeAll(async () => {
  collector = await startOtlpCollector();
  const tracing = await startTracing({ otlpTracesEndpoint: `${collector.url}/v1/traces` }, 'control-plane', (message) => {
    throw new Error(message);
  });
  // Made after tracing started, as the services make theirs.
  const s3 = testS3();
  const store = new ArtifactStore({
    bucket: await createTestBucket('traced'),
    endpoint: s3.endpoint,
    region: s3.region,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
  });
  const redis = traceRedis(new Redis(testRedisUrl()));
  try {
    const job = startSpan('job');
    await withSpan(job, async () => {
      await redis.set(secretKey, secretValue);
      expect(await redis.get(secretKey)).toBe(secretValue);
      expect(await store.has(store.keyOf(deploymentId, randomUUID()))).toBe(false);
    });
    endSpan(job);
    // Outside any trace: background work records nothing.
    await redis.del(secretKey);
    await store.removeDeployment(deploymentId);
  } finally {
    redis.disconnect();
    store.close();
    await tracing.shutdown();
  }
}, 60_000);
afterAll(async () => {
  await collector?.close();
});

it('records the Redis commands and S3 calls made inside a trace as its children, by name only', () => {
  const job = collector.spans.find((span) => span.name === 'job')!;
  expect(job).toBeDefined();
  const children = collector.spans.filter((span) => span.parentSpanId === job.spanId);
  expect(children.map((span) => span.name).sort()).toEqual(['GET', 'S3.HeadObject', 'SET']);
  expect(
    spanAttribute(
      children.find((span) => span.name === 'SET')!,
      'db.system.name',
    ),
  ).toEqual({ stringValue: 'redis' });
  expect(
    spanAttribute(
      children.find((span) => span.name === 'S3.HeadObject')!,
      'rpc.service',
    ),
  ).toEqual({ stringValue: 'S3' });
  const exported = JSON.stringify(collector.spans);
  for (const secret of [secretKey, secretValue, deploymentId]) expect(exported).not.toContain(secret);
});

it('records nothing made outside a trace', () => {
  expect(collector.spans.map((span) => span.name).sort()).toEqual(['GET', 'S3.HeadObject', 'SET', 'job']);
});
