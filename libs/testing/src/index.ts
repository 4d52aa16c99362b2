export { createTestDatabase, testPostgresAdminUrl } from './postgres.js';
export type { TestDatabase } from './postgres.js';
export { testRedisUrl } from './redis.js';
export { createTestBucket, testS3 } from './s3.js';
export type { TestS3 } from './s3.js';
export { testEnv } from './env.js';
export { captureLogger } from './logs.js';
export type { CapturedLogs } from './logs.js';
export { until } from './until.js';
