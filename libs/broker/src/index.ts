export { DEFAULT_MAX_EVENT_BYTES, DEFAULT_RETENTION_SECONDS } from './broker.js';
export type {
  PublishOptions,
  BrokerEvent,
  BrokerSubscription,
  ControlAction,
  ControlHandler,
  ControlMessage,
  EventBroker,
  EventBrokerOptions,
  EventInput,
  SubscribeFrom,
  SubscribeOptions,
} from './broker.js';
export { MAX_BATCH_EVENTS } from './base-broker.js';
export { createEventBroker } from './factory.js';
export type { EventBrokerConfig } from './factory.js';
export { brokerMigrationsDir, DEFAULT_BROKER_SCHEMA, PostgresEventBroker } from './postgres-broker.js';
export type { PostgresEventBrokerOptions } from './postgres-broker.js';
export { PgListener } from './postgres-listener.js';
export type { PgListenerOptions } from './postgres-listener.js';
export { DEFAULT_BROKER_PREFIX, RedisEventBroker } from './redis-broker.js';
export type { RedisEventBrokerOptions } from './redis-broker.js';
export { BrokerBackendError, BrokerClosedError, EventTooLargeError, InvalidEventDataError, RunEndedError } from './errors.js';
