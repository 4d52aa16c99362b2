/**
 * The lease a worker holds on a run while it executes it (runs.lease_owner / lease_expires_at).
 * Another worker takes a run over once its lease has expired, so a worker that cannot renew its
 * lease in time, or finds it taken, must stop executing the run: otherwise the run executes twice.
 */
import type { Logger } from '@berth/log';
import type { RunStore } from '../storage/runs.js';

/** Why a worker stopped executing a run: its lease was taken over, or expired without a renewal. */
export class RunLeaseLostError extends Error {
  constructor(
    readonly runId: string,
    readonly reason: 'taken' | 'expired',
  ) {
    super(
      reason === 'taken'
        ? `lease lost on run ${runId}: another worker holds it (or it ended) — it finishes the run`
        : `lease lost on run ${runId}: it could not be renewed before it expired — another worker takes the run over`,
    );
    this.name = 'RunLeaseLostError';
  }
}

export interface RunLeaseOptions {
  runs: Pick<RunStore, 'heartbeat'>;
  runId: string;
  owner: string;
  leaseMs: number;
  log: Logger;
  /** Called once when the lease is lost: the run's execution must stop. */
  onLost(error: RunLeaseLostError): void;
  /** A cancellation recorded in the database (by an API process that could not message this one). */
  onCancel(action: 'interrupt' | 'rollback'): void;
}

/**
 * Renews a run's lease every third of its duration. Each renewal that fails is logged; when none
 * has succeeded by the time the lease runs out (by this process's clock, counted from when the
 * last successful renewal was sent), the lease counts as lost.
 */
export class RunLease {
  readonly #options: RunLeaseOptions;
  readonly #log: Logger;
  #expiresAt: number;
  #renewing = false;
  #failures = 0;
  #stopped = false;
  readonly #ticker: NodeJS.Timeout;
  #watchdog: NodeJS.Timeout;

  /** @param acquiredAt - when the claim that took the lease was sent (ms since the epoch). */
  constructor(options: RunLeaseOptions, acquiredAt: number) {
    this.#options = options;
    this.#log = options.log.child({ runId: options.runId, owner: options.owner });
    this.#expiresAt = acquiredAt + options.leaseMs;
    this.#watchdog = this.#arm();
    // #renew handles its errors (logged, and the watchdog counts the missed renewals).
    this.#ticker = setInterval(() => void this.#renew(), Math.max(200, Math.floor(options.leaseMs / 3)));
  }

  /** Stops renewing (the run has ended here); the lease is released by completing the run. */
  stop(): void {
    this.#stopped = true;
    clearInterval(this.#ticker);
    clearTimeout(this.#watchdog);
  }

  #arm(): NodeJS.Timeout {
    // After a stalled event loop, due timers run before the I/O that arrived meanwhile: the check
    // waits one turn (setImmediate runs after I/O callbacks) so that a renewal already answered counts.
    return setTimeout(() => setImmediate(() => this.#expire()), Math.max(0, this.#expiresAt - Date.now()));
  }

  #expire(): void {
    if (Date.now() >= this.#expiresAt) this.#lose('expired');
  }

  async #renew(): Promise<void> {
    // A renewal still waiting for the database is not doubled; the watchdog covers a stuck one.
    if (this.#renewing || this.#stopped) return;
    this.#renewing = true;
    const sentAt = Date.now();
    const { runs, runId, owner, leaseMs } = this.#options;
    try {
      const { held, cancel } = await runs.heartbeat(runId, owner, leaseMs);
      if (this.#stopped) return;
      if (!held) return this.#lose('taken');
      if (this.#failures > 0) this.#log.info({ failures: this.#failures }, 'run lease renewed again');
      this.#failures = 0;
      this.#expiresAt = sentAt + leaseMs;
      clearTimeout(this.#watchdog);
      this.#watchdog = this.#arm();
      if (cancel) this.#options.onCancel(cancel);
    } catch (error) {
      if (this.#stopped) return;
      this.#failures += 1;
      this.#log.warn({ err: error, failures: this.#failures, expiresInMs: this.#expiresAt - Date.now() }, 'run lease renewal failed');
    } finally {
      this.#renewing = false;
    }
  }

  #lose(reason: 'taken' | 'expired'): void {
    if (this.#stopped) return;
    this.stop();
    const error = new RunLeaseLostError(this.#options.runId, reason);
    this.#log.error({ reason, failedRenewals: this.#failures }, 'lease lost: stopping the run here');
    this.#options.onLost(error);
  }
}
