/**
 * Whether a running revision step must stop because its revision was interrupted by another
 * process (a newer revision replaced it, or its deployment was deleted, through another control
 * plane): the step's process checks the revision when a notification says it may have been
 * (`checkNow`), and every `everyMs` in case one was lost. A check that fails is logged
 * (at warn once, and when checks answer again), and when none has answered for `failForMs` the
 * step is stopped with {@link InterruptCheckFailedError}: the control plane cannot tell whether it
 * should still be working (another may have resumed the step by then), so the step fails saying
 * why, as any step whose database went away does.
 */
import type { Clock, Timer } from '@berth/clock';
import type { Logger } from '@berth/log';

/** Thrown into a step whose revision was replaced meanwhile. */
export class RevisionInterruptedError extends Error {
  constructor(revisionId: string) {
    super(`revision ${revisionId} was interrupted`);
    this.name = 'RevisionInterruptedError';
  }
}

/** Thrown into a step whose interrupt check has failed for too long. */
export class InterruptCheckFailedError extends Error {
  constructor(revisionId: string, failingMs: number, options: ErrorOptions) {
    super(`could not check whether revision ${revisionId} was interrupted for ${Math.round(failingMs / 1000)} s: the step stops`, options);
    this.name = 'InterruptCheckFailedError';
  }
}

export interface InterruptWatchOptions {
  revisionId: string;
  /** Reads whether the revision still stands: false once it was interrupted (or is gone). */
  stands(): Promise<boolean>;
  /** Aborted with RevisionInterruptedError or InterruptCheckFailedError. */
  controller: AbortController;
  log: Logger;
  clock: Clock;
  /** How often the revision is checked. */
  everyMs: number;
  /** How long the checks may fail before the step stops. */
  failForMs: number;
}

/** A running watch: cancel it when the step ends. */
export interface InterruptWatch extends Timer {
  /** Checks now, besides the regular checks (a notification said the revision may have been interrupted). */
  checkNow(): void;
}

/** Checks the revision every `everyMs`, and when told to, until cancelled (or until it aborted the step). */
export function watchInterrupts(options: InterruptWatchOptions): InterruptWatch {
  const { revisionId, controller, log, clock } = options;
  let checking = false;
  /** When the first check of the current run of failures was sent. */
  let failingSince: number | undefined;
  let failures = 0;
  /** A check was asked for while one was in flight (whose read may predate the interruption). */
  let again = false;
  const check = async (): Promise<void> => {
    if (controller.signal.aborted) return;
    if (checking) {
      again = true;
      return;
    }
    checking = true;
    const sentAt = clock.now();
    try {
      const stands = await options.stands();
      if (failures > 0) log.info({ revisionId, failures }, 'the interrupt check of a revision step answers again');
      failures = 0;
      failingSince = undefined;
      if (!stands) controller.abort(new RevisionInterruptedError(revisionId));
    } catch (error) {
      failures += 1;
      failingSince ??= sentAt;
      const failingMs = clock.now() - failingSince;
      if (failingMs >= options.failForMs) {
        log.error({ err: error, revisionId, failures, failingMs }, 'the interrupt check of a revision step kept failing: stopping the step');
        controller.abort(new InterruptCheckFailedError(revisionId, failingMs, { cause: error }));
      } else if (failures === 1) {
        log.warn(
          { err: error, revisionId, stopsInMs: options.failForMs - failingMs },
          'the interrupt check of a revision step failed: the step goes on, and stops if the check keeps failing',
        );
      }
    } finally {
      checking = false;
    }
    if (again) {
      again = false;
      await check();
    }
  };
  const timer = clock.setInterval(() => void check(), options.everyMs);
  const stop = () => timer.cancel();
  controller.signal.addEventListener('abort', stop, { once: true });
  return {
    checkNow: () => void check(),
    cancel() {
      controller.signal.removeEventListener('abort', stop);
      stop();
    },
  };
}
