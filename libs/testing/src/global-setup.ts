/**
 * Jest global setup: starts one Postgres cluster, one redis-server and one S3 server for the
 * whole run. Test files isolate themselves (a database per file, unique queue names, a bucket
 * per file) instead of restarting servers. Connection details reach the test workers through
 * environment variables read by `env.ts`.
 */
import { chmod, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// Jest loads global setup outside its module mapping, so this resolves to the built package.
import { PostgresServer, RedisServer, S3Server, findRedisServer } from '@berth/local-stack';
import { TEST_ENV } from './env.js';

export interface TestServers {
  postgres: PostgresServer;
  redis: RedisServer;
  s3: S3Server;
}

declare global {
  // Shared with global-teardown, which jest runs in the same process.
  var __berthTestServers: TestServers | undefined;
}

export default async function globalSetup(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-test-'));
  // As root, Postgres runs as another user, which must be able to enter this folder.
  await chmod(dir, 0o755);
  if (!findRedisServer()) {
    throw new Error('redis-server is not installed; run `make test` (it installs it) or `apt-get install redis-server`');
  }
  const postgres = new PostgresServer({ baseDir: join(dir, 'postgres'), port: 0, mode: 'fast', maxConnections: 400 });
  const redis = new RedisServer();
  const s3 = new S3Server({ directory: join(dir, 's3') });
  const [, rd, s3info] = await Promise.all([postgres.start(), redis.start(), s3.start()]);
  globalThis.__berthTestServers = { postgres, redis, s3 };
  process.env[TEST_ENV.postgresUrl] = postgres.urlFor('postgres');
  process.env[TEST_ENV.redisUrl] = rd.url;
  process.env[TEST_ENV.s3Endpoint] = s3info.endpoint;
  process.env[TEST_ENV.tmpDir] = dir;
}
