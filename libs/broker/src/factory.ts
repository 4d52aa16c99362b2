/**
 * Choosing the platform's event broker from configuration: Postgres (embedded default) or Redis
 * (production).
 */
import { InvalidArgumentError } from '@berth/errors';
import type { EventBroker, EventBrokerOptions } from './broker.js';
import { PostgresEventBroker } from './postgres-broker.js';
import { RedisEventBroker } from './redis-broker.js';

/**
 * Where a broker keeps its streams.
 *
 * - `postgres` — tables in `schema` (created by the broker's migrations on first use), wake-ups
 *   through LISTEN/NOTIFY.
 * - `redis` — Redis Streams and Pub/Sub under `prefix`.
 */
export type EventBrokerConfig =
  | {
      kind: 'postgres';
      /** `postgres://user:password@host:port/database` */
      connectionString: string;
      /**
       * Schema of the broker's tables.
       * @default 'broker'
       */
      schema?: string;
    }
  | {
      kind: 'redis';
      /** `redis://[user:password@]host:port[/db]` */
      url: string;
      /**
       * Prefix of every key and channel.
       * @default 'berth'
       */
      prefix?: string;
    };

/**
 * Creates the configured broker. It connects (and, on Postgres, migrates) on first use; await
 * `ready()` to surface start-up failures early.
 */
export function createEventBroker(config: EventBrokerConfig, options: EventBrokerOptions = {}): EventBroker {
  switch (config.kind) {
    case 'postgres':
      return new PostgresEventBroker({ ...options, connectionString: config.connectionString, schema: config.schema });
    case 'redis':
      return new RedisEventBroker({ ...options, url: config.url, prefix: config.prefix });
    default:
      throw new InvalidArgumentError(`unknown event broker kind '${(config as { kind: unknown }).kind}'`);
  }
}
