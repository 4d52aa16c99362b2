// The queue contract against BullMQ's PostgreSQL backend (the embedded default), on a fresh
// database of the shared test cluster, in a non-default schema.
import pg from 'pg';
import { createTestDatabase } from '@berth/testing';
import { describeQueueContract } from './contract/queue-contract.js';

describeQueueContract('postgres', async () => {
  const db = await createTestDatabase('queue');
  const schema = 'berth_jobs';
  const sql = new pg.Pool({ connectionString: db.url, max: 1 });
  return {
    backend: { kind: 'postgres', connectionString: db.url, schema },
    stealLock: async (queue, jobId) => {
      await sql.query(`UPDATE ${schema}.job SET lock_token = 'stolen' WHERE queue = $1 AND id = $2 AND state = 'active'`, [queue, jobId]);
    },
    teardown: async () => {
      await sql.end();
      await db.drop();
    },
  };
});
