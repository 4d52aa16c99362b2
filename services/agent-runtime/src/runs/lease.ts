/**
 * Leases on runs: who may execute a run, and when another worker may take it over. The rules, in
 * one place (docs/deployments.md, "Delivery of runs", says what they guarantee):
 *
 * - A claim holds a run for `leaseMs` (runs.lease_expires_at, database time) and increments its
 *   `attempt`, the fencing token: every write of the run (renewals, checkpoint writes, its end)
 *   names the attempt and is refused once another claim took the run.
 * - The holder renews the lease every third of `leaseMs`. When it cannot (the database is away),
 *   it goes on executing, keeps what the run produces (its writes are retried) and renews once the
 *   database is back. It gives the run up only when a renewal finds it taken, or when it has been
 *   unable to renew for `leaseMs + holdMs` — after which others may take the run anyway.
 * - Another worker takes an expired lease over at once when the holder is dead — the holder's
 *   liveness session (liveness.ts) is gone — and after `holdMs` more when the holder still looks
 *   alive but renews nothing (stalled, or cut off from the database with its session open).
 * - A worker takes no run over before its own liveness session has been up for `takeoverGraceMs`:
 *   after an outage of the database every worker reconnects at about the same time, and the live
 *   holders renew their leases (and their liveness) before anyone may take their runs.
 *
 * The timing is the RunLease class below (per run) with an injectable clock; the SQL of the
 * takeover rule is {@link takeoverCondition} with the functions of migration 0008.
 */
import type { Logger } from '@berth/log';

export interface LeaseOptions {
  /**
   * How long a claim holds a run without a renewal; a dead worker's runs move after it.
   * @default 5000
   */
  leaseMs?: number;
  /**
   * How long a worker must have been connected (its liveness session up) before it takes over
   * another worker's run; at least a lease, so that after an outage the live holders renew first.
   * @default leaseMs
   */
  takeoverGraceMs?: number;
  /**
   * How long past its lease a run stays with a holder that is alive but renews nothing (cut off
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

/**
 * SQL condition: the run row `row` (columns status, lease_owner, lease_expires_at) may be taken
 * over now, by a worker allowed to (`$takeover`, see OwnerLiveness.mayTakeOver), with `$holdMs`.
 */
export function takeoverCondition(row: string, takeover: string, holdMs: string): string {
  return `(${row}.status = 'running' AND ${takeover} AND ${row}.lease_expires_at < now()
    AND (NOT lease_owner_alive(${row}.lease_owner) OR ${row}.lease_expires_at < now() - make_interval(secs => ${holdMs}::double precision / 1000)))`;
}

/** Time and timers, injectable for tests. */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** Runs `fn` after the I/O callbacks already due (setImmediate). */
  defer(fn: () => void): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  defer: (fn) => void setImmediate(fn),
};

/** Why a worker stopped executing a run: its lease was taken over, or it could not renew it in time. */
export class RunLeaseLostError extends Error {
  constructor(
    readonly runId: string,
    readonly reason: 'taken' | 'expired',
  ) {
    super(
      reason === 'taken'
        ? `lease lost on run ${runId}: another worker holds it (or it ended) — it finishes the run`
        : `lease lost on run ${runId}: it could not be renewed for longer than the lease and the hold period — another worker takes the run over`,
    );
    this.name = 'RunLeaseLostError';
  }
}

/** What a renewal found: whether this attempt still holds the run, and a cancel asked for meanwhile. */
export interface Renewal {
  held: boolean;
  cancel?: 'interrupt' | 'rollback';
}

export interface RunLeaseOptions {
  runId: string;
  owner: string;
  settings: Pick<LeaseSettings, 'leaseMs' | 'holdMs'>;
  /** Extends the lease in the database (RunStore.heartbeat of this attempt). */
  renew(): Promise<Renewal>;
  log: Logger;
  /** Called once when the lease is lost: the run's execution must stop. */
  onLost(error: RunLeaseLostError): void;
  /** A cancellation recorded in the database (by an API process that could not message this one). */
  onCancel(action: 'interrupt' | 'rollback'): void;
  /** @default systemClock */
  clock?: Clock;
}

/**
 * Renews a run's lease every third of its duration. A renewal that fails is logged and the run
 * goes on; the lease counts as lost when a renewal finds the run taken, or when none has succeeded
 * for `leaseMs + holdMs` (by this process's clock, from when the last successful one was sent).
 */
export class RunLease {
  readonly #options: RunLeaseOptions;
  readonly #clock: Clock;
  readonly #log: Logger;
  /** When the last successful renewal (or the claim) was sent. */
  #confirmedAt: number;
  #renewing = false;
  #failures = 0;
  #stopped = false;
  #finishing = false;
  #lost: RunLeaseLostError | undefined;
  #ticker: unknown;
  #watchdog: unknown;

  /** @param acquiredAt - when the claim that took the lease was sent (ms since the epoch). */
  constructor(options: RunLeaseOptions, acquiredAt: number) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#log = options.log.child({ runId: options.runId, owner: options.owner });
    this.#confirmedAt = acquiredAt;
    this.#watchdog = this.#arm();
    this.#tick();
  }

  /** Set once the lease is lost. */
  get lost(): RunLeaseLostError | undefined {
    return this.#lost;
  }

  /**
   * The run's end is being recorded (by a statement fenced by this attempt, which decides whether
   * it still holds the run): renewals go on through an outage, but one that finds the run no
   * longer running is that end committing first, not a takeover.
   */
  finishing(): void {
    this.#finishing = true;
  }

  /** Stops renewing (the run has ended here); the lease is released by completing the run. */
  stop(): void {
    this.#stopped = true;
    this.#clock.clearTimeout(this.#ticker);
    this.#clock.clearTimeout(this.#watchdog);
  }

  get #every(): number {
    return Math.max(200, Math.floor(this.#options.settings.leaseMs / 3));
  }

  get #deadline(): number {
    const { leaseMs, holdMs } = this.#options.settings;
    return this.#confirmedAt + leaseMs + holdMs;
  }

  #tick(): void {
    this.#ticker = this.#clock.setTimeout(() => {
      if (this.#stopped) return;
      // #renew handles its errors (logged, and the watchdog counts the time without a renewal).
      void this.#renew();
      this.#tick();
    }, this.#every);
  }

  #arm(): unknown {
    // After a stalled event loop, due timers run before the I/O that arrived meanwhile: the check
    // waits one turn so that a renewal already answered counts.
    return this.#clock.setTimeout(() => this.#clock.defer(() => this.#expire()), Math.max(0, this.#deadline - this.#clock.now()));
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
    try {
      const { held, cancel } = await this.#options.renew();
      if (this.#stopped) return;
      if (!held) {
        // While finishing, the run no longer running is its end committed: nothing left to renew.
        if (this.#finishing) return this.stop();
        return this.#lose('taken');
      }
      if (this.#failures > 0) this.#log.info({ failures: this.#failures, unconfirmedMs: sentAt - this.#confirmedAt }, 'run lease renewed again');
      this.#failures = 0;
      this.#confirmedAt = sentAt;
      if (cancel) this.#options.onCancel(cancel);
    } catch (error) {
      if (this.#stopped) return;
      this.#failures += 1;
      // Once per outage at warn level, then quietly: a minute of failures is hundreds of lines.
      const line = { err: error, failures: this.#failures, expiresInMs: this.#deadline - this.#clock.now() };
      if (this.#failures === 1) this.#log.warn(line, 'run lease renewal failed: the run goes on, and the lease is renewed once the database answers');
      else this.#log.debug(line, 'run lease renewal failed');
    } finally {
      this.#renewing = false;
    }
  }

  #lose(reason: 'taken' | 'expired'): void {
    if (this.#stopped) return;
    this.stop();
    this.#lost = new RunLeaseLostError(this.#options.runId, reason);
    this.#log.error({ reason, failedRenewals: this.#failures }, 'lease lost: stopping the run here');
    this.#options.onLost(this.#lost);
  }
}
