import { testEnv } from './env.js';

/** URL of the shared test redis-server. Isolate by unique queue names or key prefixes. */
export function testRedisUrl(): string {
  return testEnv('redisUrl');
}
