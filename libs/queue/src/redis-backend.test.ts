// The queue contract against BullMQ's Redis backend (production), on the shared test
// redis-server, isolated by a key prefix of its own.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { testRedisUrl } from '@berth/testing';
import { describeQueueContract } from './contract/queue-contract.js';

describeQueueContract('redis', async () => {
  const prefix = `test-${randomBytes(4).toString('hex')}`;
  const redis = new Redis(testRedisUrl());
  return {
    backend: { kind: 'redis', url: testRedisUrl(), prefix },
    stealLock: async (queue, jobId) => {
      await redis.set(`${prefix}:${queue}:${jobId}:lock`, 'stolen', 'XX');
    },
    teardown: async () => {
      await redis.quit();
    },
  };
});
