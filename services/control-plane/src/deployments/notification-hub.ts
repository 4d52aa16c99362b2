/**
 * The streams a control plane holds open for clients (followed logs, watched deployments) wait for
 * Postgres notifications, not a timer: one LISTEN connection per control plane, each notification
 * handed to the subscriptions of its channel and key (its payload: a revision or deployment id).
 * Each tenant may hold a limited number of them at once.
 */
import { PgListener } from '@berth/broker';
import { ResourceExhaustedError, UnavailableError } from '@berth/errors';
import type { Logger } from '@berth/log';

export interface NotificationHubOptions {
  databaseUrl: string;
  channels: string[];
  log: Logger;
  /**
   * Streams (followed logs and watched deployments) one tenant may hold open at the same time
   * through this control plane; one more is refused with ResourceExhaustedError.
   * @default 20
   */
  maxStreamsPerTenant?: number;
}

/** A subscription to the notifications of one channel and key. A notification is kept until the next `reset`, so none is lost between a read and a wait. */
export class Subscription {
  private pending = false;
  private resolve: (() => void) | undefined;

  constructor(private readonly unsubscribe: () => void) {}

  /** @internal */
  fire(): void {
    this.pending = true;
    this.resolve?.();
  }

  /** Forgets notifications so far: call before reading, so that one about a later change wakes the next wait. */
  reset(): void {
    this.pending = false;
  }

  /** Resolves at a notification since the last reset (at once if one came), or when `signal` aborts. */
  wait(signal: AbortSignal): Promise<void> {
    if (this.pending || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        signal.removeEventListener('abort', done);
        this.resolve = undefined;
        resolve();
      };
      this.resolve = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }

  close(): void {
    this.unsubscribe();
  }
}

export class NotificationHub {
  private readonly listener: PgListener;
  /** Subscriptions by `${channel}\n${key}`. */
  private readonly subscriptions = new Map<string, Set<Subscription>>();
  private readonly perTenant = new Map<string, number>();
  private readonly maxPerTenant: number;

  constructor(options: NotificationHubOptions) {
    this.maxPerTenant = options.maxStreamsPerTenant ?? 20;
    this.listener = new PgListener({
      connectionString: options.databaseUrl,
      channels: options.channels,
      onNotification: (channel, key) => this.subscriptions.get(`${channel}\n${key}`)?.forEach((s) => s.fire()),
      // Notifications sent while the connection was down are lost: every subscriber reads again.
      onReconnect: () => this.subscriptions.forEach((set) => set.forEach((s) => s.fire())),
      log: options.log,
      applicationName: 'berth-control-plane-streams',
    });
  }

  /**
   * A tenant's subscription to the notifications of `channel` about `key`; close it when the stream ends.
   * @throws ResourceExhaustedError when the tenant holds `maxStreamsPerTenant` already
   * @throws UnavailableError when this control plane cannot listen
   */
  async subscribe(tenantId: string, channel: string, key: string): Promise<Subscription> {
    const count = this.perTenant.get(tenantId) ?? 0;
    if (count >= this.maxPerTenant) throw new ResourceExhaustedError(`at most ${this.maxPerTenant} logs or deployments can be followed at once`);
    this.perTenant.set(tenantId, count + 1);
    const id = `${channel}\n${key}`;
    const set = this.subscriptions.get(id) ?? new Set<Subscription>();
    this.subscriptions.set(id, set);
    const subscription = new Subscription(() => {
      if (!set.delete(subscription)) return;
      if (!set.size && this.subscriptions.get(id) === set) this.subscriptions.delete(id);
      const left = (this.perTenant.get(tenantId) ?? 1) - 1;
      if (left) this.perTenant.set(tenantId, left);
      else this.perTenant.delete(tenantId);
    });
    set.add(subscription);
    try {
      await this.listener.ensure();
    } catch (error) {
      subscription.close();
      throw new UnavailableError('the control plane cannot listen for changes now', { cause: error });
    }
    return subscription;
  }

  async close(): Promise<void> {
    await this.listener.close();
  }
}
