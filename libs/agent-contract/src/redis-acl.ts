/**
 * What an agent server touches in Redis, for the control plane's per-deployment Redis users: every
 * key and Pub/Sub channel of its run queue (BullMQ) and event broker starts with
 * `redisKeyPrefix(schema)`, and `redisAclRules(schema)` are the `ACL SETUSER` rules that allow that
 * and nothing else.
 */
import { assertIdentifier } from '@berth/db';

/**
 * The prefix of an agent server's Redis keys and channels (`berth:<schema>`). The schema is an SQL
 * identifier (no glob characters), so the ACL patterns below match this deployment's keys only.
 */
export function redisKeyPrefix(schema: string): string {
  return `berth:${assertIdentifier(schema)}`;
}

/**
 * `ACL SETUSER` rules (Redis 7) for an agent server of `schema`, after `reset on <password>`:
 *
 * - keys `~berth:<schema>:*` and channels `&berth:<schema>:*` only — BullMQ's keys are
 *   `<prefix>:<queue>:…`, the broker's keys and channels `<prefix>:broker:{<run>}:…`;
 * - the data, keyspace, transaction, scripting (EVALSHA/EVAL: BullMQ's and the broker's Lua;
 *   Redis checks the keys a script touches against the same patterns), Pub/Sub and connection
 *   (AUTH, HELLO, PING, SELECT, CLIENT SETNAME) categories, without anything `@admin` or
 *   `@dangerous` (FLUSHALL, FLUSHDB, KEYS, CONFIG, ACL, DEBUG, MONITOR, SHUTDOWN, CLIENT KILL/LIST,
 *   SORT, MIGRATE, RESTORE, …);
 * - none of the commands that would reach past the patterns: SCAN and RANDOMKEY (they return other
 *   deployments' key names), PUBSUB (lists their channels), FUNCTION/FCALL and SCRIPT
 *   FLUSH/KILL/DEBUG (server-wide), CLIENT TRACKING;
 * - INFO back: ioredis' ready check and BullMQ's version check read it (server statistics, no data).
 */
export function redisAclRules(schema: string): string[] {
  const prefix = redisKeyPrefix(schema);
  return [
    `~${prefix}:*`,
    `&${prefix}:*`,
    '-@all',
    ...['@read', '@write', '@keyspace', '@transaction', '@scripting', '@pubsub', '@connection'].map((c) => `+${c}`),
    '-@admin',
    '-@dangerous',
    ...['scan', 'randomkey', 'pubsub', 'function', 'fcall', 'fcall_ro', 'script|flush', 'script|kill', 'script|debug', 'client|tracking'].map((c) => `-${c}`),
    '+info',
  ];
}
