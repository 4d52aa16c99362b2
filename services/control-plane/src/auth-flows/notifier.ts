/**
 * Wakes waiters when their flow completes. One LISTEN connection per control-plane process
 * fans notifications out to in-process waiters by key, so a thousand waiting CLIs cost one
 * database connection, not a thousand. NOTIFY reaches every replica, whichever one the
 * approval went through.
 */
import { PgListener } from '@berth/broker';
import { systemClock, type Clock } from '@berth/clock';
import type { Logger } from '@berth/log';

/** Why a {@link FlowSubscription.next} returned. */
export type WakeReason = 'notified' | 'timer' | 'aborted' | 'closed';

export interface FlowNotifierOptions {
  connectionString: string;
  /** The NOTIFY channel; payloads are waiter keys. */
  channel: string;
  log: Logger;
  /** The timers of waiters' sleeps. @default systemClock */
  clock?: Clock;
}

/**
 * Interest in one key. Notifications that arrive before `next()` is called are kept, so a
 * subscriber can register, read the state it waits on, and only then sleep, without a gap in
 * which a notification could be missed.
 */
export class FlowSubscription {
  private latched: WakeReason | undefined;
  private pending: ((reason: WakeReason) => void) | undefined;

  constructor(
    private readonly signal: AbortSignal | undefined,
    private readonly detach: (subscription: FlowSubscription) => void,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Resolves on the next (or an already received) notification, after `ms`, on abort or close. */
  next(ms: number): Promise<WakeReason> {
    if (this.signal?.aborted) return Promise.resolve('aborted');
    if (this.latched) {
      const reason = this.latched;
      // `closed` stays: every later call must also return at once.
      if (reason !== 'closed') this.latched = undefined;
      return Promise.resolve(reason);
    }
    return new Promise<WakeReason>((resolve) => {
      const done = (reason: WakeReason) => {
        timer.cancel();
        this.signal?.removeEventListener('abort', onAbort);
        this.pending = undefined;
        resolve(reason);
      };
      const onAbort = () => done('aborted');
      const timer = this.clock.setTimeout(() => done('timer'), ms);
      this.signal?.addEventListener('abort', onAbort, { once: true });
      this.pending = done;
    });
  }

  /** Stops listening; a pending `next()` resolves with `closed`. */
  close(): void {
    this.detach(this);
    this.deliver('closed');
  }

  /** @internal called by the notifier */
  deliver(reason: WakeReason): void {
    if (this.pending) this.pending(reason);
    else if (this.latched !== 'closed') this.latched = reason;
  }
}

export class FlowNotifier {
  private readonly listener: PgListener;
  private readonly subscribers = new Map<string, Set<FlowSubscription>>();
  private closed = false;
  private readonly clock: Clock;

  constructor(options: FlowNotifierOptions) {
    this.clock = options.clock ?? systemClock;
    this.listener = new PgListener({
      connectionString: options.connectionString,
      channels: [options.channel],
      onNotification: (_channel, key) => this.deliver(key, 'notified'),
      // Notifications sent while the connection was down are lost: let every waiter re-check.
      onReconnect: () => {
        for (const key of [...this.subscribers.keys()]) this.deliver(key, 'notified');
      },
      log: options.log,
      applicationName: 'berth-control-plane-listen',
    });
  }

  /** Resolves once the LISTEN connection is up. */
  ready(): Promise<void> {
    return this.listener.ensure();
  }

  /** Starts receiving notifications for `key`; close the subscription when done. */
  subscribe(key: string, signal?: AbortSignal): FlowSubscription {
    const subscription = new FlowSubscription(
      signal,
      (s) => {
        const set = this.subscribers.get(key);
        set?.delete(s);
        if (set?.size === 0) this.subscribers.delete(key);
      },
      this.clock,
    );
    if (this.closed) {
      subscription.deliver('closed');
      return subscription;
    }
    // A dropped LISTEN connection reconnects on its own; meanwhile the waiters' timers still
    // bound every sleep, so this only speeds recovery up.
    this.listener.ensure().catch(() => undefined);
    const set = this.subscribers.get(key) ?? new Set();
    set.add(subscription);
    this.subscribers.set(key, set);
    return subscription;
  }

  /** Number of live subscriptions (for tests and metrics). */
  get size(): number {
    let count = 0;
    for (const set of this.subscribers.values()) count += set.size;
    return count;
  }

  /** Wakes every subscriber with `closed` and ends the LISTEN connection. */
  async close(): Promise<void> {
    this.closed = true;
    for (const key of [...this.subscribers.keys()]) this.deliver(key, 'closed');
    await this.listener.close();
  }

  private deliver(key: string, reason: WakeReason): void {
    for (const subscription of [...(this.subscribers.get(key) ?? [])]) subscription.deliver(reason);
  }
}
