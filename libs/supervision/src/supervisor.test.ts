/**
 * The restart policy on a clock the test moves: the waits double per crash in a row up to the cap,
 * start over once a process stayed up long enough, a failed restart counts as a crash, and a stop
 * cancels what is pending.
 */
import { describe, expect, it } from '@jest/globals';
import { ManualClock } from '@berth/clock';
import { RestartBackoff, Supervisor, restartPolicy, type Crash, type Incarnation } from './index.js';

/** A process the test ends by hand. */
function life(): Incarnation & { end(reason: string): void } {
  let end!: (reason: string) => void;
  return { ended: new Promise<string>((resolve) => (end = resolve)), end: (reason) => end(reason) };
}

function supervised(policy = { initialDelayMs: 500, maxDelayMs: 4000, resetAfterMs: 10_000 }) {
  const clock = new ManualClock();
  const crashes: Crash[] = [];
  const lives: ReturnType<typeof life>[] = [];
  let restarts = 0;
  /** What the next restart does: start a new life, or fail with this message. */
  const next: (string | undefined)[] = [];
  const signals: AbortSignal[] = [];
  const supervisor = new Supervisor({
    policy,
    clock,
    restart: async (signal) => {
      signals.push(signal);
      const failure = next.shift();
      if (failure) throw new Error(failure);
      const started = life();
      lives.push(started);
      return started;
    },
    onCrash: (crash) => crashes.push(crash),
    onRestart: () => restarts++,
  });
  const first = life();
  lives.push(first);
  supervisor.watch(first);
  return { clock, supervisor, crashes, lives, next, signals, restarts: () => restarts };
}

describe('RestartBackoff', () => {
  it('doubles the wait per crash in a row up to the cap, and starts over after a healthy period', async () => {
    const clock = new ManualClock();
    const backoff = new RestartBackoff(restartPolicy({ initialDelayMs: 100, maxDelayMs: 500, resetAfterMs: 1000 }), clock);
    backoff.up();
    expect([backoff.crashed(), backoff.crashed(), backoff.crashed(), backoff.crashed(), backoff.crashed()]).toEqual([100, 200, 400, 500, 500]);
    backoff.up();
    await clock.advance(999);
    expect(backoff.crashed()).toBe(500);
    backoff.up();
    await clock.advance(1000);
    expect(backoff.crashed()).toBe(100);
    expect(backoff.inRow).toBe(1);
  });

  it('has the documented defaults', () => {
    expect(restartPolicy()).toEqual({ initialDelayMs: 500, maxDelayMs: 30_000, resetAfterMs: 60_000 });
  });
});

describe('Supervisor', () => {
  it('restarts a process that ended after the backoff, longer for each crash in a row', async () => {
    const { clock, crashes, lives, restarts } = supervised();
    lives[0]!.end('exited with signal SIGKILL');
    await clock.advance(0);
    expect(crashes).toEqual([{ reason: 'exited with signal SIGKILL', failedStart: false, delayMs: 500, inRow: 1 }]);
    await clock.advance(499);
    expect(lives).toHaveLength(1);
    await clock.advance(1);
    expect(lives).toHaveLength(2);
    expect(restarts()).toBe(1);

    for (const expected of [1000, 2000, 4000, 4000]) {
      lives.at(-1)!.end('exited with code 1');
      await clock.advance(0);
      expect(crashes.at(-1)?.delayMs).toBe(expected);
      await clock.advance(expected);
    }
    expect(lives).toHaveLength(6);
    expect(crashes.map((c) => c.inRow)).toEqual([1, 2, 3, 4, 5]);
  });

  it('waits the initial delay again once the process stayed up long enough', async () => {
    const { clock, crashes, lives } = supervised();
    lives[0]!.end('crash');
    await clock.advance(500);
    lives[1]!.end('crash');
    await clock.advance(1000);
    await clock.advance(10_000);
    lives[2]!.end('crash');
    await clock.advance(0);
    expect(crashes.map((c) => c.delayMs)).toEqual([500, 1000, 500]);
  });

  it('counts a restart that fails as a crash, with its reason', async () => {
    const { clock, crashes, lives, next, restarts } = supervised();
    next.push('port 5432 is taken');
    lives[0]!.end('exited with code 1');
    await clock.advance(500);
    expect(crashes.at(-1)).toEqual({ reason: 'port 5432 is taken', failedStart: true, delayMs: 1000, inRow: 2 });
    expect(restarts()).toBe(0);
    await clock.advance(1000);
    expect(lives).toHaveLength(2);
    expect(restarts()).toBe(1);
  });

  it('restarts nothing once stopped: a pending restart is cancelled, one under way aborted', async () => {
    const pending = supervised();
    pending.lives[0]!.end('crash');
    await pending.clock.advance(100);
    await pending.supervisor.stop();
    expect(pending.clock.pending).toBe(0);
    await pending.clock.advance(10_000);
    expect(pending.lives).toHaveLength(1);

    // A restart that waits until aborted.
    const clock = new ManualClock();
    let aborted = false;
    let restarted = false;
    const supervisor = new Supervisor({
      clock,
      restart: (signal) =>
        new Promise((_resolve, reject) =>
          signal.addEventListener('abort', () => {
            aborted = true;
            reject(signal.reason as Error);
          }),
        ),
      onCrash: () => undefined,
      onRestart: () => (restarted = true),
    });
    const first = life();
    supervisor.watch(first);
    first.end('crash');
    await clock.advance(500);
    await supervisor.stop();
    expect(aborted).toBe(true);
    expect(restarted).toBe(false);
    expect(clock.pending).toBe(0);
  });

  it('ignores the end of a life it no longer watches', async () => {
    const { clock, supervisor, crashes, lives } = supervised();
    await supervisor.stop();
    lives[0]!.end('stopped on purpose');
    await clock.advance(1000);
    expect(crashes).toEqual([]);
  });
});
