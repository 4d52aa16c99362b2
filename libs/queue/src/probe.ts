/**
 * Choosing and checking the platform's queue backend: Redis when a Redis URL is configured (the
 * production mode), otherwise BullMQ's Postgres backend on the platform database (the embedded
 * default, which needs nothing but Postgres).
 */
import { Redis } from 'ioredis';
import pg from 'pg';
import type { QueueBackendConfig } from './backend.js';
import { UnavailableError } from '@berth/errors';

export function selectQueueBackend(options: { databaseUrl: string; redisUrl?: string }): QueueBackendConfig {
  return options.redisUrl ? { kind: 'redis', url: options.redisUrl } : { kind: 'postgres', connectionString: options.databaseUrl };
}

/** Resolves when the backend's server answers; rejects with an UnavailableError otherwise. */
export async function pingQueueBackend(config: QueueBackendConfig, timeoutMs = 2000): Promise<void> {
  try {
    if (config.kind === 'redis') {
      const redis = new Redis(config.url, {
        lazyConnect: true,
        connectTimeout: timeoutMs,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
      // Connection errors reject connect()/ping() below, which is what this reports.
      redis.on('error', () => undefined);
      try {
        await redis.connect();
        await redis.ping();
      } finally {
        redis.disconnect();
      }
    } else {
      const client = new pg.Client({ connectionString: config.connectionString, connectionTimeoutMillis: timeoutMs });
      // A server going away also fails the connect or query below, which is what this reports; the
      // client's own error event (a session ended while idle) would crash the process unheard.
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.query('SELECT 1');
      } finally {
        // After a failed connect end() fails too; the connect's error is the one reported.
        await client.end().catch(() => undefined);
      }
    }
  } catch (error) {
    throw new UnavailableError(`the ${config.kind} queue backend does not answer: ${(error as Error).message}`, { cause: error });
  }
}
