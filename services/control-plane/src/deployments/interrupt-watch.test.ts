/**
 * A revision step's interrupt check on a clock the test moves: an interruption stops the step (at
 * once when a notification asks for a check); a check that fails is reported (not swallowed), the
 * step goes on through a short failure, and a check that keeps failing stops the step with the
 * reason.
 */
import { describe, expect, it } from '@jest/globals';
import { ManualClock } from '@berth/clock';
import { captureLogger, until } from '@berth/testing';
import { InterruptCheckFailedError, RevisionInterruptedError, watchInterrupts } from './interrupt-watch.js';

function watch(answer: () => Promise<boolean>) {
  const clock = new ManualClock();
  const controller = new AbortController();
  const logs = captureLogger();
  const timer = watchInterrupts({ revisionId: 'r1', stands: answer, controller, log: logs.logger, clock, everyMs: 1000, failForMs: 30_000 });
  return { clock, controller, logs, timer };
}

const refused = () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }));

describe('watchInterrupts', () => {
  it('stops the step once its revision was interrupted', async () => {
    let stands = true;
    const { clock, controller, timer } = watch(async () => stands);
    await clock.advance(3000);
    expect(controller.signal.aborted).toBe(false);
    stands = false;
    await clock.advance(1000);
    expect(controller.signal.reason).toBeInstanceOf(RevisionInterruptedError);
    expect(clock.pending).toBe(0);
    timer.cancel();
  });

  it('checks at once when told to (a notification), without the clock moving', async () => {
    let stands = true;
    const { controller, timer } = watch(async () => stands);
    stands = false;
    timer.checkNow();
    await until('the step to stop', () => controller.signal.aborted);
    expect(controller.signal.reason).toBeInstanceOf(RevisionInterruptedError);
  });

  it('checks again when told to while a check is in flight (whose read may predate the interruption)', async () => {
    const answers: ((stands: boolean) => void)[] = [];
    const { clock, controller, timer } = watch(() => new Promise<boolean>((resolve) => answers.push(resolve)));
    await clock.advance(1000); // the regular check reads...
    expect(answers).toHaveLength(1);
    timer.checkNow(); // ...when the notification arrives
    answers[0]!(true); // the read was from before the interruption
    await until('a second check', () => answers.length === 2);
    answers[1]!(false);
    await until('the step to stop', () => controller.signal.aborted);
    timer.cancel();
  });

  it('reports a failing check, keeps the step through a short failure, and says when checks answer again', async () => {
    let failing = true;
    const { clock, controller, logs, timer } = watch(() => (failing ? refused() : Promise.resolve(true)));
    await clock.advance(10_000);
    expect(controller.signal.aborted).toBe(false);
    // Reported once, with the error, not once per check.
    const warnings = logs.lines().filter((l) => l.level === 40);
    expect(warnings).toEqual([
      expect.objectContaining({
        revisionId: 'r1',
        err: expect.objectContaining({ message: expect.stringContaining('ECONNREFUSED') }),
        msg: expect.stringMatching(/^the interrupt check of a revision step failed/),
      }),
    ]);
    failing = false;
    await clock.advance(1000);
    expect(logs.lines().at(-1)).toMatchObject({ level: 30, failures: 10, msg: 'the interrupt check of a revision step answers again' });
    timer.cancel();
  });

  it('stops the step, with the reason, once the check has failed for failForMs', async () => {
    const { clock, controller, logs } = watch(refused);
    await clock.advance(30_000);
    expect(controller.signal.aborted).toBe(false);
    await clock.advance(1000);
    const reason = controller.signal.reason as InterruptCheckFailedError;
    expect(reason).toBeInstanceOf(InterruptCheckFailedError);
    expect(reason.message).toMatch(/could not check whether revision r1 was interrupted for 30 s/);
    expect((reason.cause as Error).message).toMatch(/ECONNREFUSED/);
    expect(logs.lines().filter((l) => l.level === 50)).toHaveLength(1);
    expect(clock.pending).toBe(0);
  });
});
