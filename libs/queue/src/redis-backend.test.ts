// The queue contract against BullMQ's Redis backend (production), on the shared test
// redis-server, isolated by a key prefix of its own.
import { randomBytes } from 'node:crypto';
import { testRedisUrl } from '@berth/testing';
import { describeQueueContract } from './contract/queue-contract.js';

describeQueueContract('redis', async () => ({
  backend: { kind: 'redis', url: testRedisUrl(), prefix: `test-${randomBytes(4).toString('hex')}` },
}));
