/**
 * Whether the sandbox engine (the driver's backend: a Docker or Podman API, a Kubernetes API)
 * answers: asked every few seconds and before every call that changes a sandbox. While it does
 * not, `onChange(false)` reports it (the manager's gRPC health of SandboxService goes NOT_SERVING,
 * which the gateway's /readyz shows as sandboxes failing) and sandbox calls answer 503 with
 * Retry-After and a plain message (the reason, which names sockets and hosts, is for the log).
 * When it answers again, `onUp` runs (the manager resumes what waited for it and removes the
 * containers of what was deleted meanwhile) before the check resolves.
 */
import type { Clock } from '@berth/clock';
import { UnavailableError } from '@berth/errors';
import type { Logger } from '@berth/log';
import type { SandboxDriver } from '../drivers/driver.js';
import { UnavailableDriver } from '../drivers/unavailable.js';
import { Periodic } from '../periodic.js';

/** The engine is down: a 503 with Retry-After. */
export class EngineUnavailableError extends UnavailableError {
  constructor(options?: { cause?: unknown }) {
    super('The sandbox engine is not answering right now; retry shortly', options);
  }
}

export interface EngineMonitorOptions {
  driver: SandboxDriver;
  logger: Logger;
  /** Every change of whether the engine answers (and the first check's answer). */
  onChange: (up: boolean) => void;
  /** After the first check that finds it up (`first`), and after each that finds it back. */
  onUp: (first: boolean) => Promise<void>;
  /** @default 2000 */
  intervalMs?: number;
  /** @default systemClock */
  clock?: Clock;
}

export class EngineMonitor {
  #up: boolean | undefined;
  /** onUp ran once: later ones are recoveries. */
  #resumed = false;
  #checking: Promise<boolean> | undefined;
  readonly #periodic: Periodic;

  constructor(private readonly options: EngineMonitorOptions) {
    this.#periodic = new Periodic(() => this.check(), {
      intervalMs: options.intervalMs ?? 2000,
      logger: options.logger,
      what: 'sandbox engine check',
      clock: options.clock,
    });
  }

  /** Sandboxes are off on this platform (no driver configured): nothing to monitor. */
  get disabled(): boolean {
    return this.options.driver instanceof UnavailableDriver;
  }

  /** Whether the engine answered the last check (false before the first). */
  get up(): boolean {
    return this.#up === true;
  }

  /** Asks the engine now (one question at a time); resolves once a recovery's `onUp` has run. */
  check(): Promise<boolean> {
    this.#checking ??= this.#check().finally(() => (this.#checking = undefined));
    return this.#checking;
  }

  /**
   * Throws while sandboxes cannot run: off by configuration (the driver's reason, which says how to
   * turn them on) or the engine down. `fresh` asks the engine first rather than trusting the last check.
   */
  async assertUp(fresh: boolean): Promise<void> {
    if (this.options.driver instanceof UnavailableDriver) throw new UnavailableError(this.options.driver.reason);
    if (!(fresh ? await this.check() : this.up)) throw new EngineUnavailableError();
  }

  start(): void {
    this.#periodic.start();
  }

  async stop(): Promise<void> {
    await this.#periodic.stop();
    await this.#checking;
  }

  async #check(): Promise<boolean> {
    const { driver, logger } = this.options;
    const reason = await driver.unavailableReason().catch((error: unknown) => (error instanceof Error ? error.message : String(error)));
    const up = reason === undefined;
    const was = this.#up;
    this.#up = up;
    if (was === up) return up;
    this.options.onChange(up);
    if (!up) {
      if (!this.disabled) logger.warn({ reason }, 'the sandbox engine does not answer: sandbox calls answer 503 until it does');
      return up;
    }
    if (was === false) logger.info('the sandbox engine answers again');
    try {
      await this.options.onUp(!this.#resumed);
      this.#resumed = true;
    } catch (error) {
      // Tried again at the next check.
      this.#up = undefined;
      logger.error({ err: error }, 'resuming sandboxes once the engine answered failed');
    }
    return up;
  }
}
