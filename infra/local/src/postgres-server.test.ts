import { describe, expect, it } from '@jest/globals';
import { chmod, lstat, mkdtemp, realpath, rm } from 'node:fs/promises';
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

  it('works from a state folder inside a private directory (as root: the cluster moves out, linked from the state folder)', async () => {
    const privateDir = await mkdtemp(join(tmpdir(), 'berth-private-'));
    await chmod(privateDir, 0o700);
    const baseDir = join(privateDir, '.berth', 'postgres');
    const server = new PostgresServer({ baseDir, port: 0, mode: 'fast' });
    try {
      const { connectionString } = await server.start();
      await query(connectionString, 'CREATE TABLE kept (v int)');
      await server.stop();
      const again = new PostgresServer({ baseDir, port: 0, mode: 'fast' });
      const restarted = await again.start();
      expect(await query(restarted.connectionString, 'SELECT count(*)::int AS n FROM kept')).toEqual([{ n: 0 }]);
      await again.stop();
      if (process.getuid?.() === 0) expect((await lstat(baseDir)).isSymbolicLink()).toBe(true);
    } finally {
      await server.stop().catch(() => undefined);
      const real = await realpath(baseDir).catch(() => undefined);
      if (real && real !== baseDir) await rm(real, { recursive: true, force: true });
      await rm(privateDir, { recursive: true, force: true });
    }
  }, 60_000);
});
