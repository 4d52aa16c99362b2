// The broker contract against Redis (production), on the shared test redis-server, isolated by
// a key prefix of its own; plus what is particular to this adapter.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { ManualClock } from '@berth/clock';
import { testRedisUrl } from '@berth/testing';
import { Redis } from 'ioredis';
import { describeBrokerContract } from './contract/broker-contract.js';
import { drain, newRunId, waitingForWakeUp } from './contract/harness.js';
import { RedisEventBroker } from './redis-broker.js';

describeBrokerContract('redis', async () => {
  const prefix = `test-${randomBytes(4).toString('hex')}`;
  return { create: (options) => new RedisEventBroker({ url: testRedisUrl(), prefix, ...options }) };
});

describe('RedisEventBroker', () => {
  it('stores a run as a stream with seq-derived ids and an expiring meta hash', async () => {
    const prefix = `test-${randomBytes(4).toString('hex')}`;
    const broker = new RedisEventBroker({ url: testRedisUrl(), prefix, retentionSeconds: 120 });
    const redis = new Redis(testRedisUrl());
    try {
      const run = newRunId();
      await broker.publishMany(run, [
        { event: 'a', data: { x: 1 } },
        { event: 'b', data: 'two' },
      ]);
      await broker.end(run);
      const stream = `${prefix}:broker:{${run}}:events`;
      expect(await redis.xrange(stream, '-', '+')).toEqual([
        ['0-1', ['s', '0', 'e', 'a', 'd', '{"x":1}']],
        ['1-1', ['s', '1', 'e', 'b', 'd', '"two"']],
      ]);
      expect(await redis.hgetall(`${prefix}:broker:{${run}}:meta`)).toEqual({ next: '2', ended: '1' });
      const ttl = await redis.ttl(stream);
      expect(ttl).toBeGreaterThan(100);
      expect(ttl).toBeLessThanOrEqual(120);
    } finally {
      redis.disconnect();
      await broker.close();
    }
  });

  it('catches subscribers up after its Pub/Sub connection was lost', async () => {
    const prefix = `test-${randomBytes(4).toString('hex')}`;
    // The subscriber's clock stands still: its safety re-read never runs, so only the reconnect's catch-up can deliver.
    const clock = new ManualClock();
    const [broker, publisher] = [new RedisEventBroker({ url: testRedisUrl(), prefix, clock }), new RedisEventBroker({ url: testRedisUrl(), prefix })];
    const redis = new Redis(testRedisUrl());
    try {
      const run = newRunId();
      const sub = broker.subscribe(run, { from: 'start' });
      await sub.ready;
      const reading = drain(sub);
      await waitingForWakeUp(clock);
      const clients = String(await redis.client('LIST'))
        .split('\n')
        .filter((line) => line.includes(` name=berth-broker-sub:${prefix} `) && line.includes(' sub=1 '));
      expect(clients).toHaveLength(1); // the subscribing instance's one Pub/Sub connection
      const id = /\bid=(\d+)/.exec(clients[0]!)![1]!;
      await redis.client('KILL', 'ID', id);
      await publisher.publish(run, 'values', 'maybe unheard');
      await publisher.end(run);
      expect(await reading).toEqual([{ id: '0', event: 'values', data: 'maybe unheard' }]);
    } finally {
      redis.disconnect();
      await Promise.all([broker.close(), publisher.close()]);
    }
  });
});
