import { describe, expect, it } from '@jest/globals';
import { until, UntilTimeoutError } from './until.js';

describe('until', () => {
  it('returns the first value that is not undefined, null or false', async () => {
    const answers = [undefined, null, false, 0];
    expect(await until('an answer', () => answers.shift(), 1_000, 1)).toBe(0);
    expect(answers).toEqual([]);
  });

  it('throws UntilTimeoutError naming what it waited for', async () => {
    const waiting = until('the door to open', async () => false, 20, 5);
    await expect(waiting).rejects.toBeInstanceOf(UntilTimeoutError);
    await expect(waiting).rejects.toMatchObject({ what: 'the door to open', timeoutMs: 20, message: 'timed out after 20 ms waiting for the door to open' });
  });
});
