/** {@link until} gave up: `what` did not happen within `timeoutMs`. */
export class UntilTimeoutError extends Error {
  constructor(
    readonly what: string,
    readonly timeoutMs: number,
  ) {
    super(`timed out after ${timeoutMs} ms waiting for ${what}`);
    this.name = 'UntilTimeoutError';
  }
}

/**
 * The one way tests wait for something they cannot be told about: polls `probe` every
 * `intervalMs` until it returns a value (anything but undefined, null or false) and returns that
 * value; throws {@link UntilTimeoutError} naming `what` after `timeoutMs`. Prefer an event (a
 * promise the code under test resolves) or a ManualClock (@berth/clock) where there is one.
 */
export async function until<T>(what: string, probe: () => T | Promise<T>, timeoutMs = 10_000, intervalMs = 100): Promise<Exclude<T, undefined | null | false>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== null && value !== false) return value as Exclude<T, undefined | null | false>;
    if (Date.now() > deadline) throw new UntilTimeoutError(what, timeoutMs);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
