/**
 * Backend selection. BullMQ 6 ships two queue backends behind one `IQueueBackend` interface;
 * this module binds BullMQ's `Queue`/`Worker` classes to the configured one with `withBackend`
 * (never the process-wide default, so two backends can coexist in one process).
 */
import {
  createPostgresBackend,
  createRedisBackend,
  withBackend,
  type IQueueBackend,
  type JobProgress,
  type Processor,
  type Queue,
  type QueueOptions,
  type Worker,
  type WorkerOptions,
} from 'bullmq';
import { InvalidArgumentError } from '@berth/errors';

/**
 * Where a queue lives.
 *
 * - `postgres` — the embedded default: BullMQ's PostgreSQL backend (jobs in tables of `schema`,
 *   workers woken by LISTEN/NOTIFY). The schema and its tables are created on first use.
 * - `redis` — production: BullMQ's Redis backend; `prefix` namespaces the keys.
 */
export type QueueBackendConfig =
  | {
      kind: 'postgres';
      /** `postgres://user:password@host:port/database` */
      connectionString: string;
      /**
       * Schema holding the queue tables (shared by every queue of this database).
       * @default 'bullmq'
       */
      schema?: string;
    }
  | {
      kind: 'redis';
      /** `redis://[user:password@]host:port[/db]` */
      url: string;
      /**
       * Key prefix of every queue key.
       * @default 'bull'
       */
      prefix?: string;
    };

/** The Postgres schema used when a `postgres` config names none (BullMQ's own default). */
export const DEFAULT_POSTGRES_SCHEMA = 'bullmq';
/** The Redis key prefix used when a `redis` config names none (BullMQ's own default). */
export const DEFAULT_REDIS_PREFIX = 'bull';

// `any`: BullMQ's classes are generic over payload types; payloads are validated by the catalog instead.
/** A BullMQ queue bound to either backend. */
export type BullQueue = Queue<any, any, string, any, any, string, IQueueBackend, any>;
/** A BullMQ worker bound to either backend. */
export type BullWorker = Worker<any, any, string, IQueueBackend, JobProgress, any>;

/** The BullMQ options both classes share, resolved from a backend config. */
interface BaseOptions {
  connection: unknown;
  prefix?: string;
}

const QUEUE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Validates a queue name the same way for both backends (Redis forbids ':'; ids stay portable). */
export function assertQueueName(name: string): void {
  if (!QUEUE_NAME.test(name) || name.length > 200) {
    throw new InvalidArgumentError(`invalid queue name '${name}': use letters, digits, '.', '_' and '-' (at most 200)`);
  }
}

function baseOptions(config: QueueBackendConfig): BaseOptions {
  switch (config.kind) {
    case 'postgres':
      // A config object (not a bare string) is the only form that honours `schema` and `migrate`.
      return {
        connection: {
          connectionString: config.connectionString,
          schema: config.schema ?? DEFAULT_POSTGRES_SCHEMA,
          migrate: true,
        },
      };
    case 'redis':
      return {
        connection: { url: config.url, maxRetriesPerRequest: null },
        prefix: config.prefix ?? DEFAULT_REDIS_PREFIX,
      };
    default:
      throw new InvalidArgumentError(`unknown queue backend kind '${(config as { kind: unknown }).kind}'`);
  }
}

function classesFor(config: QueueBackendConfig) {
  return config.kind === 'postgres' ? withBackend(createPostgresBackend) : withBackend(createRedisBackend);
}

/** Creates a BullMQ producer queue on the configured backend. */
export function createBullQueue(config: QueueBackendConfig, name: string): BullQueue {
  const { Queue: BackendQueue } = classesFor(config);
  const opts = baseOptions(config) as QueueOptions<never>;
  return new BackendQueue(name, opts) as unknown as BullQueue;
}

/** Creates (and starts) a BullMQ worker on the configured backend. */
export function createBullWorker(config: QueueBackendConfig, name: string, processor: Processor, extra: Partial<WorkerOptions>): BullWorker {
  const { Worker: BackendWorker } = classesFor(config);
  const opts = { ...extra, ...baseOptions(config) } as WorkerOptions<never>;
  return new BackendWorker(name, processor, opts) as unknown as BullWorker;
}
