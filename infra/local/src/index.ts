export { PostgresServer, findPostgresBinaries } from './postgres-server.js';
export type { PostgresBinaries, PostgresServerOptions } from './postgres-server.js';
export { RedisServer, findRedisServer } from './redis-server.js';
export type { RedisServerOptions } from './redis-server.js';
export { S3Server } from './s3-server.js';
export type { S3ServerOptions } from './s3-server.js';
export { freePort, isPortFree, portOrFree } from './ports.js';
export { CommandError, run, sleep } from './run.js';
