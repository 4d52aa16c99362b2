/**
 * Restarting what crashed, the one way Berth does it: the control plane's agent servers and the
 * processes `berth up` leaves running (Postgres, the sandbox engine, the platform) alike. A crash
 * waits `initialDelayMs` before the restart, each further crash in a row twice as long up to
 * `maxDelayMs`; a process that stayed up `resetAfterMs` counts as recovered. A restart that fails
 * is a crash too. What a process is, how it starts and how its end is noticed are the caller's.
 */
import { systemClock, type Clock, type Timer } from '@berth/clock';

/** How crashed processes are restarted. */
export interface RestartPolicy {
  /**
   * Wait before the first restart after a crash; each further crash in a row doubles it.
   * @default 500
   */
  initialDelayMs?: number;
  /**
   * Longest wait between restarts.
   * @default 30000
   */
  maxDelayMs?: number;
  /**
   * A process that stayed up this long counts as recovered: its next crash waits `initialDelayMs` again.
   * @default 60000
   */
  resetAfterMs?: number;
}

/** The policy with its defaults filled in. */
export function restartPolicy(policy: RestartPolicy = {}): Required<RestartPolicy> {
  return { initialDelayMs: policy.initialDelayMs ?? 500, maxDelayMs: policy.maxDelayMs ?? 30_000, resetAfterMs: policy.resetAfterMs ?? 60_000 };
}

/** The waits between restarts of one process. */
export class RestartBackoff {
  /** Crashes in a row (since it last stayed up `resetAfterMs`): the exponent of the backoff. */
  private crashes = 0;
  private upSince: number | undefined;

  constructor(
    private readonly policy: Required<RestartPolicy>,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Crashes in a row so far. */
  get inRow(): number {
    return this.crashes;
  }

  /** It started and serves. */
  up(): void {
    this.upSince = this.clock.now();
  }

  /** It crashed (or did not start): how long to wait before the next start. */
  crashed(): number {
    if (this.upSince !== undefined && this.clock.now() - this.upSince >= this.policy.resetAfterMs) this.crashes = 0;
    this.upSince = undefined;
    const delayMs = Math.min(this.policy.maxDelayMs, this.policy.initialDelayMs * 2 ** this.crashes);
    this.crashes += 1;
    return delayMs;
  }
}

/** One life of a supervised process, from a start to its end. */
export interface Incarnation {
  /** Resolves, with why in words, when it ended without being asked to. Never rejects. */
  ended: Promise<string>;
}

export interface Crash {
  /** Why it ended, or why it could not be started. */
  reason: string;
  /** It did not end: a restart of it failed. */
  failedStart: boolean;
  /** When the next start is: after this long. */
  delayMs: number;
  /** Crashes in a row, this one included. */
  inRow: number;
}

export interface SupervisorOptions {
  /** @default restartPolicy() */
  policy?: RestartPolicy;
  /** @default systemClock */
  clock?: Clock;
  /**
   * Starts the process again; resolves once it serves. A rejection (its message says why) is a crash
   * like any other. `signal` is aborted when the supervisor stops: stop waiting then, and leave what
   * was started to the caller's stop.
   */
  restart(signal: AbortSignal): Promise<Incarnation>;
  /** It crashed (or a restart failed); the next start is in `delayMs`. */
  onCrash(crash: Crash): void;
  /** A restart succeeded: it serves again. */
  onRestart(): void;
}

/** Restarts one process whenever it ends, with backoff, until stopped. */
export class Supervisor {
  private readonly backoff: RestartBackoff;
  private readonly clock: Clock;
  private current: Incarnation | undefined;
  private timer: Timer | undefined;
  private restarting: { controller: AbortController; done: Promise<void> } | undefined;
  private stopping = false;

  constructor(private readonly options: SupervisorOptions) {
    this.clock = options.clock ?? systemClock;
    this.backoff = new RestartBackoff(restartPolicy(options.policy), this.clock);
  }

  /** Supervises this life of the process (its first start is the caller's); it counts as up from now. */
  watch(incarnation: Incarnation): void {
    if (this.stopping) return;
    this.current = incarnation;
    this.backoff.up();
    void incarnation.ended.then((reason) => {
      if (!this.stopping && this.current === incarnation) this.crashed(reason, false);
    });
  }

  /** Restarts no more: a pending restart is cancelled, one under way aborted; resolves once that settled. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.current = undefined;
    this.timer?.cancel();
    this.timer = undefined;
    const restarting = this.restarting;
    restarting?.controller.abort(new Error('stopping'));
    await restarting?.done;
  }

  private crashed(reason: string, failedStart: boolean): void {
    this.current = undefined;
    const delayMs = this.backoff.crashed();
    this.options.onCrash({ reason, failedStart, delayMs, inRow: this.backoff.inRow });
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      const controller = new AbortController();
      const done = this.attempt(controller.signal).finally(() => {
        if (this.restarting?.controller === controller) this.restarting = undefined;
      });
      this.restarting = { controller, done };
    }, delayMs);
  }

  private async attempt(signal: AbortSignal): Promise<void> {
    let incarnation: Incarnation;
    try {
      incarnation = await this.options.restart(signal);
    } catch (error) {
      if (!this.stopping) this.crashed(error instanceof Error ? error.message : String(error), true);
      return;
    }
    if (this.stopping) return;
    this.watch(incarnation);
    this.options.onRestart();
  }
}
