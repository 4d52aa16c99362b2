/**
 * A fixed-window counter per key (a client address): enough to keep public endpoints such as
 * starting a login cheap to serve and dull to hammer. In-process, so each gateway replica
 * counts on its own.
 */
import { ResourceExhaustedError } from '@berth/errors';

export interface RateLimitOptions {
  /** Requests allowed per key and window. */
  limit: number;
  /**
   * Window length in milliseconds.
   * @default 60000
   */
  windowMs?: number;
  /** Words for the 429 message, e.g. "login attempts". */
  what: string;
}

export class RateLimiter {
  private readonly windowMs: number;
  private readonly counts = new Map<string, { windowStart: number; count: number }>();

  constructor(private readonly options: RateLimitOptions) {
    this.windowMs = options.windowMs ?? 60_000;
  }

  /** Counts one request for `key`; throws ResourceExhaustedError (429) over the limit. */
  take(key: string, now = Date.now()): void {
    this.forgetOldWindows(now);
    const entry = this.counts.get(key);
    if (!entry || now - entry.windowStart >= this.windowMs) {
      this.counts.set(key, { windowStart: now, count: 1 });
      return;
    }
    entry.count += 1;
    if (entry.count > this.options.limit) {
      const retryIn = Math.ceil((entry.windowStart + this.windowMs - now) / 1000);
      throw new ResourceExhaustedError(`Too many ${this.options.what} from this address; try again in ${retryIn} s`);
    }
  }

  // Bounded memory: entries of finished windows are dropped once the map grows.
  private forgetOldWindows(now: number): void {
    if (this.counts.size < 10_000) return;
    for (const [key, entry] of this.counts) if (now - entry.windowStart >= this.windowMs) this.counts.delete(key);
  }
}
