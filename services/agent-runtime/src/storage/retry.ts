/**
 * Which database failures pass by themselves, and how long to wait before trying again. A run's
 * writes (checkpoints, events, its end) are retried through an outage of the database, every other
 * failure of a write is final (see docs/deployments.md, "Delivery of runs").
 */
import { dependencyFailureOf } from '@berth/errors';
import type { Logger } from '@berth/log';

/**
 * The database is unreachable, restarting or refusing connections (see `dependencyFailureOf`), or
 * the statement lost a serialization conflict or a deadlock (SQLSTATE 40001, 40P01).
 */
export function isTransientDbError(error: unknown): boolean {
  if (dependencyFailureOf(error)) return true;
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return code === '40001' || code === '40P01';
}

/** Delay before retry number `attempt` (0-based): 100 ms doubling up to 2 s. */
export function backoffMs(attempt: number): number {
  return Math.min(2000, 100 * 2 ** Math.min(attempt, 5));
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `fn`, retrying while it fails because the database is unreachable, until `until` (ms since
 * the epoch) or until `stopped()`; then, or on any other failure, throws the last error.
 */
export async function retryTransient<T>(
  what: string,
  fn: () => Promise<T>,
  options: { until: number; log: Logger; context?: Record<string, unknown>; stopped?: () => boolean },
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      const result = await fn();
      if (attempt > 0) options.log.info({ ...options.context, attempts: attempt + 1 }, `${what}: done once the database answered again`);
      return result;
    } catch (error) {
      if (!isTransientDbError(error) || Date.now() >= options.until || options.stopped?.()) throw error;
      if (attempt === 0) options.log.warn({ err: error, ...options.context }, `${what} failed: retrying while the database is unreachable`);
      await sleep(backoffMs(attempt));
    }
  }
}
