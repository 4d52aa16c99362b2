import { describe, expect, it } from '@jest/globals';
import { ManualClock, systemClock } from './index.js';

describe('ManualClock', () => {
  it('fires timers in order of their time only as advance passes it, with now() at each', async () => {
    const clock = new ManualClock(1_000);
    const fired: [string, number][] = [];
    clock.setTimeout(() => fired.push(['b', clock.now()]), 200);
    clock.setTimeout(() => fired.push(['a', clock.now()]), 100);
    clock.setTimeout(() => fired.push(['c', clock.now()]), 300).cancel();
    await clock.advance(150);
    expect(fired).toEqual([['a', 1_100]]);
    expect(clock.now()).toBe(1_150);
    await clock.advance(1_000);
    expect(fired).toEqual([
      ['a', 1_100],
      ['b', 1_200],
    ]);
    expect(clock.pending).toBe(0);
  });

  it('lets the promise jobs and callbacks a timer starts run before the next timer fires', async () => {
    const clock = new ManualClock();
    const log: string[] = [];
    clock.setTimeout(() => {
      void Promise.resolve().then(() => log.push('promise job'));
      setImmediate(() => log.push('callback'));
    }, 10);
    clock.setTimeout(() => log.push('second timer'), 20);
    await clock.advance(20);
    expect(log).toEqual(['promise job', 'callback', 'second timer']);
  });

  it('repeats intervals until cancelled, and a timer set while firing runs in the same advance when due', async () => {
    const clock = new ManualClock(0);
    const ticks: number[] = [];
    const interval = clock.setInterval(() => {
      ticks.push(clock.now());
      if (ticks.length === 2) clock.setTimeout(() => ticks.push(-clock.now()), 5);
    }, 100);
    await clock.advance(350);
    expect(ticks).toEqual([100, 200, -205, 300]);
    interval.cancel();
    await clock.advance(1_000);
    expect(ticks).toHaveLength(4);
    expect(await clock.runNext()).toBe(false);
  });

  it('sleeps until advanced, and rejects a sleep whose signal aborts', async () => {
    const clock = new ManualClock(0);
    let woke = false;
    const sleeping = clock.sleep(1_000).then(() => (woke = true));
    await clock.advance(999);
    expect(woke).toBe(false);
    expect(clock.nextAt).toBe(1_000);
    await clock.runNext();
    await sleeping;
    expect(woke).toBe(true);

    const abort = new AbortController();
    const aborted = clock.sleep(1_000, abort.signal);
    abort.abort(new Error('stop'));
    await expect(aborted).rejects.toThrow('stop');
    expect(clock.pending).toBe(0);
    await expect(clock.sleep(1, abort.signal)).rejects.toThrow('stop');
    await expect(clock.advance(-1)).rejects.toThrow(RangeError);
  });
});

describe('systemClock', () => {
  it('tells the time, sleeps, and stops a sleep when its signal aborts', async () => {
    const before = Date.now();
    expect(Math.abs(systemClock.now() - before)).toBeLessThan(1_000);
    await systemClock.sleep(1);
    expect(systemClock.now()).toBeGreaterThanOrEqual(before + 1);
    const abort = new AbortController();
    const sleeping = systemClock.sleep(60_000, abort.signal);
    abort.abort(new Error('no more'));
    await expect(sleeping).rejects.toThrow('no more');
    let fired = 0;
    const interval = systemClock.setInterval(() => fired++, 1);
    await new Promise((resolve) => systemClock.setTimeout(() => resolve(undefined), 20));
    interval.cancel();
    expect(fired).toBeGreaterThan(0);
  });
});
