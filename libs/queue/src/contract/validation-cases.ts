/**
 * Queue contract cases about what may be enqueued and returned: payload validation at enqueue
 * and again in the worker, and text that not every backend can store. Registered by
 * `describeQueueContract`.
 */
import { expect, it } from '@jest/globals';
import { InvalidArgumentError, RequestValidationError } from '@berth/errors';
import { ZodError } from 'zod';
import { InvalidJobPayloadError, InvalidJobResultError, QueueClosedError, UnknownJobError } from '../errors.js';
import type { Harness } from './harness.js';
import { until } from '@berth/testing';
import { looseJobs } from './jobs.js';

export function validationCases(harness: () => Harness): void {
  it('rejects an invalid payload, an unknown job and bad options at enqueue, enqueueing nothing', async () => {
    const h = harness();
    const queue = h.queue();
    const error = await queue.enqueue('echo', { text: '' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidJobPayloadError);
    expect(error).toBeInstanceOf(RequestValidationError);
    expect((error as InvalidJobPayloadError).issues).toMatchObject([{ loc: ['payload', 'text'], type: 'too_small' }]);
    expect((error as Error).cause).toBeInstanceOf(ZodError);
    await expect(queue.enqueue('echo', { text: 3 } as never)).rejects.toBeInstanceOf(InvalidJobPayloadError);
    await expect(queue.enqueue('nope' as 'echo', { text: 'x' })).rejects.toBeInstanceOf(UnknownJobError);
    await expect(queue.enqueue('echo', { text: 'x' }, { jobId: '42' })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(queue.enqueue('echo', { text: 'x' }, { delayMs: -1 })).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(await queue.counts()).toEqual({ waiting: 0, delayed: 0, active: 0, completed: 0, failed: 0 });
    await queue.close();
    await expect(queue.enqueue('echo', { text: 'x' })).rejects.toBeInstanceOf(QueueClosedError);
  });

  it('validates the payload again in the worker and fails such a job without retrying it', async () => {
    const h = harness();
    const loose = h.queue(looseJobs); // same job name, no schema, 3 attempts
    await h.worker({ echo: async () => 'must not run' });
    const id = await loose.enqueue('echo', { text: 42 });
    const [failure] = await until('the job to fail', () => h.recorder.failedOf(id).length > 0 && h.recorder.failedOf(id));
    expect(failure?.error).toBeInstanceOf(InvalidJobPayloadError);
    expect(failure?.willRetry).toBe(false);
    const info = await until('the failed state', async () => ((await loose.getJob(id))?.state === 'failed' ? loose.getJob(id) : undefined));
    expect(info).toMatchObject({ state: 'failed', attemptsMade: 1, maxAttempts: 3 });
    expect(h.recorder.callsOf(id)).toEqual([]);
  });

  it('treats text no backend can store (U+0000, unpaired surrogates) the same way on every backend', async () => {
    const h = harness();
    const queue = h.queue();
    for (const text of ['nul\u0000byte', 'lone\ud800surrogate']) {
      const error = await queue.enqueue('echo', { text }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidJobPayloadError);
      expect((error as InvalidJobPayloadError).issues).toEqual([{ loc: ['payload', 'text'], msg: expect.any(String), type: 'string_unstorable' }]);
    }
    const keyError = await queue.enqueue('echo', { text: 'x', extra: { 'k\u0000': 1 } } as never).catch((e: unknown) => e);
    expect((keyError as InvalidJobPayloadError).issues).toMatchObject([{ loc: ['payload', 'extra', 'k\u0000'], type: 'key_unstorable' }]);
    await expect(queue.enqueue('echo', { text: 'x', count: 10n } as never)).rejects.toBeInstanceOf(InvalidJobPayloadError);
    expect((await queue.counts()).waiting).toBe(0);

    await h.worker({
      echo: async ({ text }) => {
        if (text === 'error') throw new Error('bad\u0000news\ud800');
        return 'a\u0000b';
      },
    });
    const badResult = await queue.enqueue('echo', { text: 'result' });
    const badError = await queue.enqueue('echo', { text: 'error' });
    const r = h.recorder;
    await until('both jobs to fail for good', () => r.failedOf(badResult).length === 1 && r.failedOf(badError).length === 2);
    expect(r.failedOf(badResult)).toMatchObject([{ willRetry: false }]);
    expect(r.failedOf(badResult)[0]?.error).toBeInstanceOf(InvalidJobResultError);
    expect(r.failedOf(badError).map((e) => [e.willRetry, e.error.message])).toEqual([
      [true, 'bad\u0000news\ud800'],
      [false, 'bad\u0000news\ud800'],
    ]);
    expect(await queue.getJob(badResult)).toMatchObject({ state: 'failed', attemptsMade: 1 });
    expect(await queue.getJob(badError)).toMatchObject({ state: 'failed', attemptsMade: 2, attemptsStarted: 2, failedReason: 'bad\ufffdnews\ufffd' });
    expect(r.stalled).toEqual([]);
  });
}
