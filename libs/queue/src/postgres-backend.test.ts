// The queue contract against BullMQ's PostgreSQL backend (the embedded default), on a fresh
// database of the shared test cluster, in a non-default schema.
import { createTestDatabase } from '@berth/testing';
import { describeQueueContract } from './contract/queue-contract.js';

describeQueueContract('postgres', async () => {
  const db = await createTestDatabase('queue');
  return {
    backend: { kind: 'postgres', connectionString: db.url, schema: 'berth_jobs' },
    teardown: () => db.drop(),
  };
});
