/**
 * THE behavioural contract of a queue backend: every `QueueBackendConfig` kind must pass it,
 * through the public API only (`JobQueue`, `JobWorker`). Each backend's test file calls
 * {@link describeQueueContract} with a factory that provides an isolated namespace on a real server.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { captureLogger, until } from '@berth/testing';
import type { QueueBackendConfig } from '../backend.js';
import { JobLockLostError, JobTimeoutError } from '../errors.js';
import { Harness } from './harness.js';
import { sleep } from './jobs.js';
import { validationCases } from './validation-cases.js';

/** A backend namespace for one test file (fresh database/schema, or unique key prefix). */
export interface QueueContractTarget {
  backend: QueueBackendConfig;
  teardown?: () => Promise<void>;
  /** Gives an active job's lock to someone else, in the backend's storage (as a worker that recovered it would). */
  stealLock(queue: string, jobId: string): Promise<void>;
}

/** Registers the queue contract tests for the backend that `setup` provides. */
export function describeQueueContract(label: string, setup: () => Promise<QueueContractTarget>): void {
  describe(`queue contract: ${label}`, () => {
    let target: QueueContractTarget | undefined;
    let h: Harness;

    beforeAll(async () => {
      target = await setup();
    });
    afterAll(async () => {
      await target?.teardown?.();
    });
    beforeEach(() => {
      if (!target) throw new Error('queue contract setup failed');
      h = new Harness(target.backend);
    });
    afterEach(async () => {
      await h.close();
    });

    it('enqueues a typed payload and hands the handler its parsed form', async () => {
      const queue = h.queue();
      await h.worker({ echo: async (payload, ctx) => ({ upper: payload.text.toUpperCase(), count: payload.count, attempt: ctx.attempt }) });
      const id = await queue.enqueue('echo', { text: 'hello' });
      const done = await until('the job to complete', () => h.recorder.completedOf(id));
      expect(done).toEqual({ jobId: id, name: 'echo', attempt: 1, result: { upper: 'HELLO', count: 1, attempt: 1 }, worker: 'local' });
      // The handler got the schema's output (default applied); the queue stores the input.
      expect(h.recorder.callsOf(id)).toMatchObject([{ name: 'echo', attempt: 1, payload: { text: 'hello', count: 1 } }]);
      expect(await queue.getJob(id)).toMatchObject({
        id,
        name: 'echo',
        state: 'completed',
        payload: { text: 'hello' },
        attemptsMade: 1,
        attemptsStarted: 1,
        maxAttempts: 2,
        returnValue: { upper: 'HELLO', count: 1, attempt: 1 },
      });
      expect(await queue.getJob('no-such-job')).toBeUndefined();
    });

    it('makes enqueue idempotent with a caller-chosen job id', async () => {
      const queue = h.queue();
      await h.worker({ echo: async ({ text }) => text });
      expect(await queue.enqueue('echo', { text: 'first' }, { jobId: 'order-1' })).toBe('order-1');
      expect(await queue.enqueue('echo', { text: 'second' }, { jobId: 'order-1' })).toBe('order-1');
      await until('the job to complete', () => h.recorder.completedOf('order-1'));
      expect(await queue.enqueue('echo', { text: 'third' }, { jobId: 'order-1' })).toBe('order-1');
      await sleep(300);
      expect(h.recorder.callsOf('order-1').map((c) => c.payload)).toEqual([{ text: 'first', count: 1 }]);
      expect((await queue.counts()).completed).toBe(1);
    });

    it('forgets a completed job whose definition says removeOnComplete, freeing its id', async () => {
      const queue = h.queue();
      await h.worker({ ephemeral: async ({ text }) => text });
      expect(await queue.enqueue('ephemeral', { text: 'once' }, { jobId: 'tmp-1' })).toBe('tmp-1');
      await until('the first run', () => h.recorder.completedOf('tmp-1'));
      await until('the job to be removed', async () => (await queue.getJob('tmp-1')) === undefined);
      expect(await queue.enqueue('ephemeral', { text: 'twice' }, { jobId: 'tmp-1' })).toBe('tmp-1');
      await until('the second run', () => h.recorder.completed.filter((e) => e.jobId === 'tmp-1').length === 2);
      expect(h.recorder.callsOf('tmp-1').map((c) => c.payload)).toEqual([{ text: 'once' }, { text: 'twice' }]);
      expect(await queue.counts()).toEqual({ waiting: 0, delayed: 0, active: 0, completed: 0, failed: 0 });
    });

    validationCases(() => h);

    it('retries failed attempts with fixed and exponential backoff, then gives up', async () => {
      const queue = h.queue();
      const flaky = async ({ failTimes }: { failTimes: number }, { attempt }: { attempt: number }) => {
        if (attempt <= failTimes) throw new Error(`failure ${attempt}`);
        return `ok on attempt ${attempt}`;
      };
      await h.worker({ 'flaky-fixed': flaky, 'flaky-exponential': flaky }, { concurrency: 3 });
      const fixed = await queue.enqueue('flaky-fixed', { failTimes: 2 });
      const exponential = await queue.enqueue('flaky-exponential', { failTimes: 2 });
      const hopeless = await queue.enqueue('flaky-fixed', { failTimes: 5 });
      const r = h.recorder;
      await until('all three jobs to finish', () => r.completedOf(fixed) && r.completedOf(exponential) && r.failedOf(hopeless).length === 3);
      const gaps = (id: string) =>
        r
          .callsOf(id)
          .slice(1)
          .map((c, i) => c.at - (r.callsOf(id)[i]?.at ?? 0));

      expect(r.callsOf(fixed).map((c) => c.attempt)).toEqual([1, 2, 3]);
      expect(r.failedOf(fixed).map((e) => [e.attempt, e.willRetry, e.error.message])).toEqual([
        [1, true, 'failure 1'],
        [2, true, 'failure 2'],
      ]);
      expect(r.completedOf(fixed)).toMatchObject({ attempt: 3, result: 'ok on attempt 3' });
      for (const gap of gaps(fixed)) expect(gap).toBeGreaterThanOrEqual(300);
      const [first, second] = gaps(exponential);
      expect(first).toBeGreaterThanOrEqual(150);
      expect(second).toBeGreaterThanOrEqual(300);
      // Retries are picked up promptly once due (no waiting for an idle poll).
      for (const gap of [...gaps(fixed), ...gaps(exponential)]) expect(gap).toBeLessThan(1_800);

      expect(r.callsOf(hopeless)).toHaveLength(3);
      expect(r.failedOf(hopeless).map((e) => e.willRetry)).toEqual([true, true, false]);
      expect(await queue.getJob(hopeless)).toMatchObject({ state: 'failed', attemptsMade: 3, failedReason: 'failure 3' });
      expect(await queue.getJob(fixed)).toMatchObject({ state: 'completed', attemptsMade: 3 });
    });

    it('runs a delayed job after its delay and not before', async () => {
      const queue = h.queue();
      await h.worker({ echo: async ({ text }) => text });
      const enqueuedAt = Date.now();
      const later = await queue.enqueue('echo', { text: 'later' }, { delayMs: 1_000 });
      expect((await queue.getJob(later))?.state).toBe('delayed');
      const now = await queue.enqueue('echo', { text: 'now' });
      await until('the immediate job', () => h.recorder.completedOf(now));
      expect(h.recorder.callsOf(later)).toEqual([]);
      await until('the delayed job', () => h.recorder.completedOf(later), 5_000);
      const ranAfter = (h.recorder.callsOf(later)[0]?.at ?? 0) - enqueuedAt;
      expect(ranAfter).toBeGreaterThanOrEqual(1_000);
      expect(ranAfter).toBeLessThan(2_500);
    });

    it('times out a hung attempt, aborts its signal and retries it', async () => {
      const queue = h.queue();
      const reasons: unknown[] = [];
      let stubbornFinished = false;
      await h.worker(
        {
          slow: async ({ honourSignal }, { attempt, signal }) => {
            if (attempt > 1) return 'second attempt';
            if (!honourSignal) {
              await sleep(1_000); // ignores its signal: the attempt fails at the timeout anyway
              stubbornFinished = true;
              return 'too late';
            }
            signal.addEventListener('abort', () => reasons.push(signal.reason));
            await sleep(10_000, signal);
            return 'never';
          },
        },
        { concurrency: 2 },
      );
      const polite = await queue.enqueue('slow', { honourSignal: true });
      const stubborn = await queue.enqueue('slow', { honourSignal: false });
      await until('both jobs to complete', () => h.recorder.completedOf(polite) && h.recorder.completedOf(stubborn));
      for (const id of [polite, stubborn]) {
        const [failure] = h.recorder.failedOf(id);
        expect(failure?.error).toBeInstanceOf(JobTimeoutError);
        expect(failure).toMatchObject({ attempt: 1, willRetry: true });
        expect(h.recorder.completedOf(id)).toMatchObject({ attempt: 2, result: 'second attempt' });
        const [a1, a2] = h.recorder.callsOf(id);
        expect((a2?.at ?? 0) - (a1?.at ?? 0)).toBeGreaterThanOrEqual(250);
        expect((a2?.at ?? 0) - (a1?.at ?? 0)).toBeLessThan(1_000);
        expect(await queue.getJob(id)).toMatchObject({ state: 'completed', attemptsMade: 2 });
      }
      expect(reasons).toHaveLength(1);
      expect(reasons[0]).toBeInstanceOf(JobTimeoutError);
      await until('the stubborn first attempt to end', () => stubbornFinished, 3_000);
    });

    it('recovers the job of a worker killed mid-job once its lock expires', async () => {
      const queue = h.queue();
      const timing = { lockDurationMs: 1_000, stalledIntervalMs: 500 };
      const child = await h.childWorker(timing);
      const id = await queue.enqueue('echo', { text: 'survivor' });
      await until('the child to take the job', () => child.taken() ?? child.failure());
      expect(child.taken()).toBe(id);
      expect((await queue.getJob(id))?.state).toBe('active');
      await child.kill();

      await h.worker({ echo: async ({ text }) => `recovered ${text}` }, timing);
      const done = await until('the job to be recovered', () => h.recorder.completedOf(id), 10_000);
      // Only the stalled-job check brings back a job whose worker died: without it, never.
      expect(done).toMatchObject({ attempt: 1, result: 'recovered survivor' });
      expect(h.recorder.stalled).toContain(id);
      expect(await queue.getJob(id)).toMatchObject({ state: 'completed', attemptsMade: 1, attemptsStarted: 2 });
    });

    it('keeps renewing the lock of a job that outlives lockDuration, so it is not taken as stalled', async () => {
      const queue = h.queue();
      const timing = { lockDurationMs: 800, stalledIntervalMs: 200 };
      const work = async ({ sleepMs }: { sleepMs: number }) => sleep(sleepMs);
      await h.worker({ work }, timing, 'runner');
      const id = await queue.enqueue('work', { index: 0, sleepMs: 2_000 });
      await until('the job to start', () => h.recorder.callsOf(id).length > 0);
      await h.worker({ work }, timing, 'watcher'); // checks for stalled jobs every 200 ms
      await until('the job to complete', () => h.recorder.completedOf(id), 5_000);
      expect(h.recorder.callsOf(id).map((c) => c.worker)).toEqual(['runner']);
      expect(h.recorder.stalled).toEqual([]);
    });

    it('stops a handler whose job lock was taken from its worker: JobLockLostError on its signal, logged', async () => {
      const queue = h.queue();
      const logs = captureLogger();
      const reasons: unknown[] = [];
      const work = async ({ sleepMs }: { sleepMs: number }, { signal }: { signal: AbortSignal }) => {
        signal.addEventListener('abort', () => reasons.push(signal.reason));
        await sleep(sleepMs, signal);
      };
      // Renewed every 150 ms; no stalled check of its own meanwhile.
      await h.worker({ work }, { lockDurationMs: 600, stalledIntervalMs: 60_000, log: logs.logger }, 'runner');
      // The handler would run for an hour: it stops only because its lock was lost.
      const id = await queue.enqueue('work', { index: 0, sleepMs: 3_600_000 });
      await until('the job to start', () => h.recorder.callsOf(id).length > 0);
      await target!.stealLock(h.queueName, id);

      await until('the handler to be stopped', () => reasons.length > 0);
      expect(reasons).toHaveLength(1);
      expect(reasons[0]).toBeInstanceOf(JobLockLostError);
      expect(logs.lines().filter((l) => l.msg === 'job lock lost: stopping the job here; another worker runs it')).toMatchObject([
        { level: 50, jobId: id, job: 'work' },
      ]);
      // The attempt is not recorded as this worker's: the job belongs to whoever holds its lock.
      await sleep(300);
      expect(h.recorder.completedOf(id)).toBeUndefined();
      expect(h.recorder.failedOf(id)).toEqual([]);
      expect(await queue.getJob(id)).toMatchObject({ state: 'active', attemptsMade: 0 });
    });

    it('lets the process exit right after close, forced or not, even with a delayed job pending', async () => {
      const queue = h.queue();
      const timing = { lockDurationMs: 30_000, stalledIntervalMs: 30_000 };
      const [graceful, forced] = await Promise.all([h.childWorker(timing), h.childWorker(timing)]);
      const id = await queue.enqueue('echo', { text: 'much later' }, { delayMs: 60_000 });
      await sleep(300); // both workers now block until the delayed job is due
      // They exit without waiting for the job due in a minute.
      graceful.send('close');
      forced.send('close-force');
      await until('both child processes to exit', () => graceful.exited() && forced.exited());
      await until('both to report closed', () => graceful.lines.includes('closed') && forced.lines.includes('closed'), 2_000);
      expect((await queue.getJob(id))?.state).toBe('delayed');
    });

    it('delivers every job at least once across concurrent workers, one closing gracefully and one forcibly', async () => {
      const total = 60;
      const queue = h.queue();
      const options = { concurrency: 3, lockDurationMs: 1_000, stalledIntervalMs: 500 };
      const work = async ({ sleepMs }: { sleepMs: number }, { signal }: { signal: AbortSignal }) => sleep(sleepMs, signal);
      const [a, b] = [await h.worker({ work }, options, 'a'), await h.worker({ work }, options, 'b')];
      await h.worker({ work }, options, 'c');
      const ids: string[] = [];
      for (let index = 0; index < total; index++) ids.push(await queue.enqueue('work', { index, sleepMs: 40 + (index % 5) * 20 }));

      const r = h.recorder;
      await until('a third of the jobs', () => r.completed.length >= total / 3);
      const aClosed = a.close(); // graceful: finishes its running jobs
      await until('half of the jobs', () => r.completed.length >= total / 2);
      await b.close({ force: true }); // its running jobs are abandoned, then recovered as stalled
      await aClosed;
      await until('every job to complete', async () => (await queue.counts()).completed === total, 15_000);

      expect(await queue.counts()).toEqual({ waiting: 0, delayed: 0, active: 0, completed: total, failed: 0 });
      expect(new Set(r.calls.map((c) => c.jobId))).toEqual(new Set(ids));
      expect(new Set(r.calls.map((c) => c.worker))).toEqual(new Set(['a', 'b', 'c']));
      expect(r.failed).toEqual([]);
      // The queue's counts are the truth. A job whose handler finished just as b was closed by
      // force can be completed without b emitting its event (and may have been started again by
      // c meanwhile, at least once): only jobs b ran may lack one.
      const announced = new Set(r.completed.map((e) => e.jobId));
      const silent = ids.filter((id) => !announced.has(id));
      expect(silent.length).toBeLessThanOrEqual(options.concurrency);
      for (const id of silent) expect(r.calls.some((c) => c.jobId === id && c.worker === 'b')).toBe(true);
      expect(r.completed.length).toBe(total - silent.length);
      // The jobs b abandoned were found stalled and run again by c; a lost none.
      const doneBy = (w: string) => new Set(r.completed.filter((e) => e.worker === w).map((e) => e.jobId));
      const abandoned = [...new Set(r.calls.filter((c) => c.worker === 'b' && !doneBy('b').has(c.jobId) && !silent.includes(c.jobId)).map((c) => c.jobId))];
      expect(abandoned.length).toBeGreaterThan(0);
      for (const id of abandoned) {
        expect(r.stalled).toContain(id);
        expect(doneBy('c').has(id)).toBe(true);
      }
      expect(r.calls.filter((c) => c.worker === 'a' && !doneBy('a').has(c.jobId))).toEqual([]);
    });
  });
}
