import { describe, expect, it } from '@jest/globals';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { PostgresServer } from './postgres-server.js';

async function query(url: string, sql: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}

describe('PostgresServer', () => {
  it('initialises a private cluster, keeps its data across stop/start, and refuses a wrong password', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-pg-'));
    await chmod(dir, 0o755);
    const server = new PostgresServer({ baseDir: dir, port: 0, mode: 'fast' });
    try {
      const first = await server.start();
      await query(first.connectionString, 'CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)');
      await server.stop();
      await expect(query(first.connectionString, 'SELECT 1')).rejects.toThrow();

      const again = new PostgresServer({ baseDir: dir, port: 0, mode: 'fast' });
      const second = await again.start();
      expect(await query(second.connectionString, 'SELECT v FROM kept')).toEqual([{ v: 42 }]);
      // Starting a running cluster again reuses it.
      expect((await again.start()).port).toBe(second.port);

      const wrong = second.connectionString.replace(/:[^:@]+@/, ':nope@');
      await expect(query(wrong, 'SELECT 1')).rejects.toThrow(/password authentication failed/);
      await again.stop();
    } finally {
      await server.stop().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
