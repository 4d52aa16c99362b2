/**
 * A task of the manager's that runs every `intervalMs` and on demand (the reaper, the reconciler,
 * the engine check): one run at a time, in order; a failed run is logged and the next comes all the
 * same. Timers never keep the process alive.
 */
import { systemClock, type Clock, type Timer } from '@berth/clock';
import type { Logger } from '@berth/log';

export interface PeriodicOptions {
  intervalMs: number;
  logger: Logger;
  /** For the log line of a failed run, e.g. `sandbox reaper pass`. */
  what: string;
  /** @default systemClock */
  clock?: Clock;
}

export class Periodic {
  #timer: Timer | undefined;
  #last: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(
    private readonly task: () => Promise<unknown>,
    private readonly options: PeriodicOptions,
  ) {}

  /** Runs the task once more, after any run in flight; resolves when that run is over. */
  run(): Promise<void> {
    this.#last = this.#last
      .then(() => this.task())
      .then(
        () => undefined,
        (error: unknown) => this.options.logger.error({ err: error }, `${this.options.what} failed`),
      );
    return this.#last;
  }

  /** A run every interval from now on (the first one an interval from now). */
  start(): void {
    if (this.#stopped) return;
    this.#timer = (this.options.clock ?? systemClock).setTimeout(() => {
      void this.run();
      this.start();
    }, this.options.intervalMs);
  }

  /** No more runs; resolves once the one in flight is over. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#timer?.cancel();
    await this.#last;
  }
}
