/**
 * A lease on a row, as its holder keeps it: claimed for `leaseMs`, renewed every third of it, and
 * given up — with a {@link LeaseLostError} — when a renewal finds the row taken, or when no renewal
 * succeeded for `leaseMs + holdMs`. The rules every leased row follows (sql.ts writes them in SQL):
 *
 * - A claim holds the row for `leaseMs` and increments its fencing token: every write of the
 *   holder (renewals, its work's progress, its end) names the owner and the token and is refused
 *   once another claim took the row.
 * - When a renewal fails (the database is away) the holder goes on working and renews once the
 *   database is back. It gives the row up only when a renewal finds it taken, or when it could not
 *   renew for `leaseMs + holdMs` — after which others may take the row anyway.
 * - Another worker takes an expired lease over at once when the holder is dead (its liveness
 *   session, liveness.ts, is gone), and after `holdMs` more when the holder still looks alive but
 *   renews nothing (stalled, or cut off from the database with its session open).
 * - A worker takes nothing over before its own liveness session has been up for
 *   `takeoverGraceMs`: after an outage of the database every worker reconnects at about the same
 *   time, and the live holders renew their leases before anyone may take their rows.
 */
import { systemClock, type Clock, type Timer } from '@berth/clock';
import type { Logger } from '@berth/log';

export interface LeaseOptions {
  /**
   * How long a claim holds a row without a renewal; a dead worker's rows move after it.
   * @default 5000
   */
  leaseMs?: number;
  /**
   * How long a worker must have been connected (its liveness session up) before it takes over
   * another worker's row; at least a lease, so that after an outage the live holders renew first.
   * @default leaseMs
   */
  takeoverGraceMs?: number;
  /**
   * How long past its lease a row stays with a holder that is alive but renews nothing (cut off
   * from the database, or stalled): the longest database outage a worker rides through.
   * @default 60_000
   */
  holdMs?: number;
}

export type LeaseSettings = Required<LeaseOptions>;

export function leaseSettings(options: LeaseOptions = {}): LeaseSettings {
  const leaseMs = options.leaseMs ?? 5000;
  return { leaseMs, takeoverGraceMs: options.takeoverGraceMs ?? leaseMs, holdMs: options.holdMs ?? 60_000 };
}

/** Why a worker stopped working on a row: its lease was taken over, or it could not renew it in time. */
export class LeaseLostError extends Error {
  constructor(
    /** What the row is, for people: `run`, `export run`. */
    readonly subject: string,
    readonly id: string,
    readonly reason: 'taken' | 'expired',
    options?: ErrorOptions,
  ) {
    super(
      reason === 'taken'
        ? `lease lost on ${subject} ${id}: another worker holds it (or it ended) — it finishes the ${subject}`
        : `lease lost on ${subject} ${id}: it could not be renewed for longer than the lease and the hold period — another worker takes the ${subject} over`,
      options,
    );
    this.name = 'LeaseLostError';
  }
}

/** What a renewal found: whether this holder (owner and token) still holds the row. */
export interface Renewal {
  held: boolean;
}

export interface LeaseHolderOptions<R extends Renewal = Renewal> {
  /** What the row is, in logs and errors: `run`, `export run`. */
  subject: string;
  id: string;
  owner: string;
  settings: Pick<LeaseSettings, 'leaseMs' | 'holdMs'>;
  /** Extends the lease in the database, fenced by this holder's owner and token. */
  renew(): Promise<R>;
  /** Told of every renewal that found the row still held (what else it read: a cancel asked for meanwhile). */
  onRenewed?(renewal: R): void;
  /** Called once when the lease is lost: the work on the row must stop. */
  onLost(error: LeaseLostError): void;
  /** Where renewal failures and the loss are logged; it names the row (`runId`, `exportRunId`). */
  log: Logger;
  /**
   * The level of the log line of a loss to another claim or to the row's end: `info` where that is
   * the usual way work is stopped (a cancelled export), not a fault. A lease that expired is an error.
   * @default 'error'
   */
  takenLevel?: 'info' | 'warn' | 'error';
  /** @default systemClock */
  clock?: Clock;
}

/** Runs `fn` after the I/O callbacks already due (one turn of the event loop). */
const defer = (fn: () => void): void => void setImmediate(fn);

/**
 * Renews a lease every third of its duration. A renewal that fails is logged and the work goes
 * on; the lease counts as lost when a renewal finds the row taken, or when none has succeeded for
 * `leaseMs + holdMs` (by the lease's clock, from when the last successful one was sent).
 */
export class Lease<R extends Renewal = Renewal> {
  readonly #options: LeaseHolderOptions<R>;
  readonly #clock: Clock;
  readonly #log: Logger;
  /** When the last successful renewal (or the claim) was sent. */
  #confirmedAt: number;
  #renewing = false;
  #failures = 0;
  #stopped = false;
  #finishing = false;
  #lost: LeaseLostError | undefined;
  #ticker: Timer | undefined;
  #watchdog: Timer | undefined;

  /** @param acquiredAt - when the claim that took the lease was sent (the clock's ms). */
  constructor(options: LeaseHolderOptions<R>, acquiredAt: number) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#log = options.log.child({ owner: options.owner });
    this.#confirmedAt = acquiredAt;
    this.#watchdog = this.#arm();
    this.#ticker = this.#clock.setInterval(
      () => {
        // #renew handles its errors (logged, and the watchdog counts the time without a renewal).
        void this.#renew();
      },
      Math.max(200, Math.floor(options.settings.leaseMs / 3)),
    );
  }

  /** Set once the lease is lost. */
  get lost(): LeaseLostError | undefined {
    return this.#lost;
  }

  /**
   * The end of the work is being recorded (by a statement fenced by this holder, which decides
   * whether it still holds the row): renewals go on through an outage, but one that finds the row
   * no longer held is that end committing first, not a takeover.
   */
  finishing(): void {
    this.#finishing = true;
  }

  /** Stops renewing (the work has ended here); the lease is released by the write that ends it. */
  stop(): void {
    this.#stopped = true;
    this.#ticker?.cancel();
    this.#watchdog?.cancel();
  }

  get #deadline(): number {
    const { leaseMs, holdMs } = this.#options.settings;
    return this.#confirmedAt + leaseMs + holdMs;
  }

  #arm(): Timer {
    // After a stalled event loop, due timers run before the I/O that arrived meanwhile: the check
    // waits one turn so that a renewal already answered counts.
    return this.#clock.setTimeout(() => defer(() => this.#expire()), this.#deadline - this.#clock.now());
  }

  #expire(): void {
    if (this.#stopped) return;
    if (this.#clock.now() >= this.#deadline) this.#lose('expired');
    else this.#watchdog = this.#arm();
  }

  async #renew(): Promise<void> {
    // A renewal still waiting for the database is not doubled; the watchdog covers a stuck one.
    if (this.#renewing || this.#stopped) return;
    this.#renewing = true;
    const sentAt = this.#clock.now();
    const { subject } = this.#options;
    try {
      const renewal = await this.#options.renew();
      if (this.#stopped) return;
      if (!renewal.held) {
        // While finishing, the row no longer held is its end committed: nothing left to renew.
        if (this.#finishing) return this.stop();
        return this.#lose('taken');
      }
      if (this.#failures > 0) this.#log.info({ failures: this.#failures, unconfirmedMs: sentAt - this.#confirmedAt }, `${subject} lease renewed again`);
      this.#failures = 0;
      this.#confirmedAt = sentAt;
      this.#options.onRenewed?.(renewal);
    } catch (error) {
      if (this.#stopped) return;
      this.#failures += 1;
      // Once per outage at warn level, then quietly: a minute of failures is hundreds of lines.
      const line = { err: error, failures: this.#failures, expiresInMs: this.#deadline - this.#clock.now() };
      if (this.#failures === 1)
        this.#log.warn(line, `${subject} lease renewal failed: the ${subject} goes on, and the lease is renewed once the database answers`);
      else this.#log.debug(line, `${subject} lease renewal failed`);
    } finally {
      this.#renewing = false;
    }
  }

  #lose(reason: 'taken' | 'expired'): void {
    if (this.#stopped) return;
    this.stop();
    const { subject, id } = this.#options;
    this.#lost = new LeaseLostError(subject, id, reason);
    const level = reason === 'taken' ? (this.#options.takenLevel ?? 'error') : 'error';
    this.#log[level]({ reason, failedRenewals: this.#failures }, `lease lost: stopping the ${subject} here`);
    this.#options.onLost(this.#lost);
  }
}
