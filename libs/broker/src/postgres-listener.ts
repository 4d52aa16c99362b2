/**
 * The ONE dedicated LISTEN connection of a `PostgresEventBroker` instance. Started on first use,
 * it listens on the broker's channels and hands every notification to the broker, which fans it
 * out in-process. A lost connection is re-established with backoff; after a reconnect the broker
 * is told (`onReconnect`) so subscribers re-read whatever notifications they may have missed.
 */
import type { Logger } from '@berth/log';
import pg from 'pg';

/** Configuration of a {@link PgListener}. */
export interface PgListenerOptions {
  connectionString: string;
  /** Channel names to LISTEN on (any text; quoted here). */
  channels: string[];
  /** Called for each notification. */
  onNotification: (channel: string, payload: string) => void;
  /** Called after the connection was lost and re-established. */
  onReconnect: () => void;
  log: Logger;
  applicationName: string;
}

const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 5_000;

/** A self-healing LISTEN connection. */
export class PgListener {
  readonly #options: PgListenerOptions;
  #client: pg.Client | undefined;
  #connecting: Promise<void> | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #retryDelay = RETRY_MIN_MS;
  #everConnected = false;
  #closed = false;

  constructor(options: PgListenerOptions) {
    this.#options = options;
  }

  /** Resolves once the connection is listening on every channel. */
  ensure(): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('the listener is closed'));
    if (this.#client) return Promise.resolve();
    this.#connecting ??= this.#connect().finally(() => (this.#connecting = undefined));
    return this.#connecting;
  }

  /** Ends the connection; no reconnects afterwards. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    // A connect in flight failed for its callers already (ensure): only its end is awaited here.
    await this.#connecting?.catch(() => undefined);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch((error: unknown) => this.#options.log.warn({ err: error }, "error while closing the event broker's LISTEN connection"));
  }

  async #connect(): Promise<void> {
    const { connectionString, channels, applicationName } = this.#options;
    const client = new pg.Client({ connectionString, keepAlive: true, application_name: applicationName });
    client.on('notification', (n) => this.#options.onNotification(n.channel, n.payload ?? ''));
    client.on('error', (error) => this.#lost(client, error));
    client.on('end', () => this.#lost(client, undefined));
    try {
      await client.connect();
      for (const channel of channels) await client.query(`LISTEN "${channel.replaceAll('"', '""')}"`);
    } catch (error) {
      // The connect failed and `error` says why (thrown to ensure's callers): whatever the dying
      // client reports after it is the same failure.
      client.removeAllListeners('end');
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.#closed) {
      await client.end().catch((error: unknown) => this.#options.log.warn({ err: error }, "error while closing the event broker's LISTEN connection"));
      throw new Error('the listener is closed');
    }
    this.#client = client;
    this.#retryDelay = RETRY_MIN_MS;
    if (this.#everConnected) this.#options.onReconnect();
    this.#everConnected = true;
  }

  #lost(client: pg.Client, error: unknown): void {
    if (this.#client !== client) return;
    this.#client = undefined;
    // Logged below (once, with the reconnect); later errors of the same dead client add nothing.
    client.on('error', () => undefined);
    if (this.#closed) return;
    this.#options.log.warn({ err: error }, 'event broker lost its LISTEN connection; reconnecting');
    this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    if (this.#closed || this.#retryTimer) return;
    const delay = this.#retryDelay;
    this.#retryDelay = Math.min(this.#retryDelay * 2, RETRY_MAX_MS);
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      this.ensure().catch((error: unknown) => {
        this.#options.log.warn({ err: error, retryInMs: this.#retryDelay }, 'event broker LISTEN reconnect failed');
        this.#scheduleReconnect();
      });
    }, delay);
    this.#retryTimer.unref();
  }
}
