/**
 * A worker process's liveness, as other workers see it: one dedicated Postgres session holding a
 * session-level advisory lock keyed by the worker's owner id (sql.ts `ownerKey`). When the process
 * dies its connection closes and Postgres releases the lock at once, so another worker can tell a
 * dead holder (take its rows over now) from one that is alive but not renewing (leave its rows
 * for the hold period, see lease.ts).
 *
 * The session is probed every `probeMs`; a probe that fails or does not answer in time ends it and
 * the worker reconnects. `mayTakeOver` says whether this worker's own session has been up for the
 * takeover grace: a worker just back from an outage of the database takes nothing over before the
 * live holders have had time to renew.
 */
import { systemClock, type Clock, type Timer } from '@berth/clock';
import type { Logger } from '@berth/log';
import pg from 'pg';
import { ownerKey, type Takeover } from './sql.js';

export interface OwnerLivenessOptions {
  connectionString: string;
  owner: string;
  /** The session's `application_name` (how an operator finds it in pg_stat_activity). */
  applicationName: string;
  log: Logger;
  /**
   * How often the session is probed (and, while it does not hold its lock, the lock tried).
   * @default 1000
   */
  probeMs?: number;
  /** @default systemClock */
  clock?: Clock;
}

export class OwnerLiveness {
  readonly #options: OwnerLivenessOptions;
  readonly #clock: Clock;
  readonly #probeMs: number;
  #client: pg.Client | undefined;
  /** When the current session was established; undefined while there is none. */
  #connectedSince: number | undefined;
  #locked = false;
  #timer: Timer | undefined;
  #closed = false;
  #probing = false;
  #failures = 0;

  constructor(options: OwnerLivenessOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#probeMs = options.probeMs ?? 1000;
  }

  /** Connects and takes the lock (the database is up: the worker just migrated it), then keeps them. */
  async start(): Promise<void> {
    await this.#probe();
    this.#schedule();
  }

  /** True when this worker's session has been up, holding its lock, for at least `graceMs`. */
  mayTakeOver(graceMs: number): boolean {
    return this.#locked && this.#connectedSince !== undefined && this.#clock.now() - this.#connectedSince >= graceMs;
  }

  /** What a claim of this worker may take over now (see sql.ts `takeoverCondition`). */
  takeover(settings: { takeoverGraceMs: number; holdMs: number }): Takeover {
    return { allowed: this.mayTakeOver(settings.takeoverGraceMs), holdMs: settings.holdMs };
  }

  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#drop();
  }

  #schedule(): void {
    if (this.#closed) return;
    this.#timer = this.#clock.setTimeout(() => {
      void this.#probe().finally(() => this.#schedule());
    }, this.#probeMs);
  }

  /** Connects when there is no session, takes the lock when not held, else checks the session answers. */
  async #probe(): Promise<void> {
    if (this.#probing || this.#closed) return;
    this.#probing = true;
    try {
      if (!this.#client) await this.#connect();
      const client = this.#client!;
      if (this.#locked) await client.query('SELECT 1');
      else {
        // Refused while a previous session of this process still holds it (Postgres has not yet
        // noticed it is gone): the lock is held for us meanwhile; it is tried again next probe.
        const { rows } = await client.query<{ locked: boolean }>(`SELECT pg_try_advisory_lock(${ownerKey('$1')}) AS locked`, [this.#options.owner]);
        this.#locked = rows[0]!.locked;
      }
      if (this.#failures > 0) this.#options.log.info({ owner: this.#options.owner, failures: this.#failures }, 'worker liveness session restored');
      this.#failures = 0;
    } catch (error) {
      this.#failures += 1;
      if (this.#failures === 1)
        this.#options.log.warn({ err: error, owner: this.#options.owner }, 'worker liveness session lost: taking over nothing until it is back');
      this.#drop();
    } finally {
      this.#probing = false;
    }
  }

  async #connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.#options.connectionString,
      application_name: this.#options.applicationName,
      // A probe the network swallows counts as a lost session.
      query_timeout: this.#probeMs * 2,
      connectionTimeoutMillis: this.#probeMs * 2,
      keepAlive: true,
    });
    // An idle session that breaks emits here; the next probe notices and reconnects.
    client.on('error', () => undefined);
    await client.connect().catch(async (error: unknown) => {
      await client.end().catch(() => undefined);
      throw error;
    });
    if (this.#closed) {
      client.end().catch(() => undefined);
      throw new Error('worker liveness closed');
    }
    this.#client = client;
    this.#connectedSince = this.#clock.now();
  }

  /** Ends the session (releasing the lock). Not awaited: a peer the network lost may never answer the goodbye. */
  #drop(): void {
    const client = this.#client;
    this.#client = undefined;
    this.#connectedSince = undefined;
    this.#locked = false;
    client?.end().catch(() => undefined);
  }
}
