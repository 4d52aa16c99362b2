/**
 * The one clock of the project. Code that waits (leases, TTLs, crons, reapers, schedules,
 * retries, caches) takes a {@link Clock} in its options, defaulting to {@link systemClock}; its
 * tests pass a {@link ManualClock} and move time by hand instead of waiting for it.
 */

/** A pending timer of a {@link Clock}. */
export interface Timer {
  /** Stops the timer; nothing happens if it already fired or was cancelled. */
  cancel(): void;
}

/** Time and timers. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls `fn` once after `ms` (0 when negative). The timer does not keep the process alive. */
  setTimeout(fn: () => void, ms: number): Timer;
  /** Calls `fn` every `ms` until cancelled. The timer does not keep the process alive. */
  setInterval(fn: () => void, ms: number): Timer;
  /**
   * Resolves after `ms`; rejects with the signal's reason when `signal` aborts first (at once
   * when it already did).
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Sleep on top of a clock's `setTimeout`, honouring an abort signal. */
export function sleepOn(clock: Pick<Clock, 'setTimeout'>, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      timer.cancel();
      reject(signal!.reason);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The system's time and Node's timers (unref'd). */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const handle = setTimeout(fn, Math.max(0, ms)).unref();
    return { cancel: () => clearTimeout(handle) };
  },
  setInterval(fn, ms) {
    const handle = setInterval(fn, Math.max(1, ms)).unref();
    return { cancel: () => clearInterval(handle) };
  },
  sleep(ms, signal) {
    return sleepOn(systemClock, ms, signal);
  },
};
