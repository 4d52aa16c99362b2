/**
 * The embedded default event broker: events in Postgres tables keyed by (run_id, seq), wake-ups
 * through LISTEN/NOTIFY on ONE dedicated listening connection per broker instance, fanned out
 * in-process. Small batches ride inside the NOTIFY payload (no query for the subscriber), large
 * ones are read from the table. Control messages travel on a second NOTIFY channel. Runs idle for
 * longer than the retention are swept periodically.
 */
import { fileURLToPath } from 'node:url';
import { assertIdentifier, createPool, migrate } from '@berth/db';
import { InvalidArgumentError } from '@berth/errors';
import type pg from 'pg';
import { BaseEventBroker } from './base-broker.js';
import type { EventBrokerOptions } from './broker.js';
import { decodeEvent, inlineEvents, parseWake, type EncodedEvent, type StoredEvent } from './encoding.js';
import { PgListener } from './postgres-listener.js';
import {
  appendSql,
  DELETE_SQL,
  END_SQL,
  HEAD_SQL,
  NOTIFY_SQL,
  READ_BATCH_BYTES,
  READ_BATCH_EVENTS,
  READ_SQL,
  SWEEP_BATCH_RUNS,
  SWEEP_SQL,
} from './postgres-sql.js';
import type { ReadResult } from './subscription.js';

/** Folder of the broker's SQL migrations (applied into its schema by {@link PostgresEventBroker.migrate}). */
export const brokerMigrationsDir = fileURLToPath(new URL('../migrations', import.meta.url));

/** The schema used when none is configured. */
export const DEFAULT_BROKER_SCHEMA = 'broker';

/** Configuration of a {@link PostgresEventBroker}. */
export interface PostgresEventBrokerOptions extends EventBrokerOptions {
  /** `postgres://user:password@host:port/database` */
  connectionString: string;
  /**
   * Schema of the broker's tables (at most 55 characters: it also names the NOTIFY channels
   * `<schema>_events` and `<schema>_control`).
   * @default 'broker'
   */
  schema?: string;
  /**
   * Size of the query pool (the LISTEN connection comes on top).
   * @default 10
   */
  maxConnections?: number;
  /**
   * How often expired runs are swept, in milliseconds.
   * @default half the retention, at most 60000
   */
  sweepIntervalMs?: number;
}

/** Event broker on Postgres alone (LISTEN/NOTIFY for wake-ups). */
export class PostgresEventBroker extends BaseEventBroker {
  readonly #connectionString: string;
  readonly #schema: string;
  readonly #pool: pg.Pool;
  readonly #listener: PgListener;
  readonly #eventsChannel: string;
  readonly #controlChannel: string;
  readonly #sweepIntervalMs: number;
  #sweepTimer: NodeJS.Timeout | undefined;
  #migrated: Promise<number[]> | undefined;

  constructor(options: PostgresEventBrokerOptions) {
    super('postgres', options);
    const schema = options.schema ?? DEFAULT_BROKER_SCHEMA;
    try {
      assertIdentifier(schema);
    } catch (error) {
      throw new InvalidArgumentError(`invalid broker schema ${JSON.stringify(schema)}`, { cause: error });
    }
    if (schema.length > 55) throw new InvalidArgumentError(`broker schema '${schema}' is longer than 55 characters`);
    this.#connectionString = options.connectionString;
    this.#schema = schema;
    this.#eventsChannel = `${schema}_events`;
    this.#controlChannel = `${schema}_control`;
    this.#sweepIntervalMs = options.sweepIntervalMs ?? Math.min(60_000, (this.retentionSeconds * 1000) / 2);
    this.#pool = createPool({
      connectionString: options.connectionString,
      schema,
      max: options.maxConnections ?? 10,
      applicationName: `berth-broker-${schema}`,
      // Events are a stream buffer for live and reconnecting clients; a machine crash may lose
      // the last fraction of a second of them, and publishing must not wait for an fsync.
      synchronousCommit: false,
      log: this.log,
    });
    this.#listener = new PgListener({
      connectionString: options.connectionString,
      channels: [this.#eventsChannel, this.#controlChannel],
      onNotification: (channel, payload) => this.#onNotification(channel, payload),
      onReconnect: () => this.wakes.emitAll({ kind: 'resync' }),
      log: this.log,
      applicationName: `berth-broker-${schema}-listen`,
    });
  }

  /** Creates or updates the broker's tables; returns the migration versions applied now. Idempotent. */
  migrate(): Promise<number[]> {
    this.#migrated ??= migrate({ connectionString: this.#connectionString, schema: this.#schema, directory: brokerMigrationsDir, log: this.log }).catch(
      (error: unknown) => {
        this.#migrated = undefined;
        throw error;
      },
    );
    return this.#migrated;
  }

  /**
   * Deletes the runs idle for longer than the retention (with their events); returns how many.
   * Runs periodically on its own; exposed for operators and tests.
   */
  async sweep(): Promise<number> {
    await this.ready();
    let total = 0;
    for (;;) {
      const { rows } = await this.#pool.query<{ runs: number }>(SWEEP_SQL, [this.retentionSeconds, SWEEP_BATCH_RUNS]);
      const runs = rows[0]?.runs ?? 0;
      total += runs;
      if (runs < SWEEP_BATCH_RUNS || this.closed) return total;
    }
  }

  protected async connect(): Promise<void> {
    await this.migrate();
    if (this.closed) return;
    this.#sweepTimer = setInterval(() => {
      this.sweep().catch((error: unknown) => this.log.warn({ err: error }, 'event broker sweep failed'));
    }, this.#sweepIntervalMs);
    this.#sweepTimer.unref();
  }

  protected async append(runId: string, events: readonly EncodedEvent[], startAt: number): Promise<number | 'ended'> {
    const inline = inlineEvents(events, Buffer.byteLength(JSON.stringify(runId)));
    const params: unknown[] = [runId, events.length, this.#eventsChannel, inline, startAt];
    for (const e of events) params.push(e.event, e.json);
    const { rows } = await this.#pool.query<{ first: string }>(appendSql(events.length), params);
    return rows[0] ? Number(rows[0].first) : 'ended';
  }

  protected async markEnded(runId: string): Promise<void> {
    await this.#pool.query(END_SQL, [runId, this.#eventsChannel]);
  }

  protected async readEnded(runId: string): Promise<boolean> {
    const { rows } = await this.#pool.query<{ ended: boolean }>(HEAD_SQL, [runId]);
    return rows[0]?.ended ?? false;
  }

  protected async readHead(runId: string): Promise<number> {
    const { rows } = await this.#pool.query<{ next: string }>(HEAD_SQL, [runId]);
    return rows[0] ? Number(rows[0].next) : 0;
  }

  protected async readAfter(runId: string, after: number): Promise<ReadResult> {
    type Row = { next: string; ended: boolean; seq: string | null; event: string | null; data: string | null };
    const { rows } = await this.#pool.query<Row>(READ_SQL, [runId, after, READ_BATCH_EVENTS, READ_BATCH_BYTES]);
    const first = rows[0];
    if (!first) return { events: [], next: 0, ended: false };
    const events: StoredEvent[] = [];
    for (const row of rows) {
      if (row.seq !== null) events.push(decodeEvent(Number(row.seq), row.event ?? '', row.data ?? 'null'));
    }
    return { events, next: Number(first.next), ended: first.ended };
  }

  protected async remove(runId: string): Promise<void> {
    await this.#pool.query(DELETE_SQL, [runId, this.#eventsChannel]);
  }

  protected async broadcastControl(runId: string, json: string): Promise<void> {
    await this.#pool.query(NOTIFY_SQL, [this.#controlChannel, `{"r":${JSON.stringify(runId)},"m":${json}}`]);
  }

  protected attachWakes(): Promise<void> {
    return this.#listener.ensure();
  }

  protected async detachWakes(): Promise<void> {
    // One channel for every run: nothing to unsubscribe.
  }

  protected attachControl(): Promise<void> {
    return this.#listener.ensure();
  }

  protected async detachControl(): Promise<void> {
    // One channel for every run: nothing to unsubscribe.
  }

  protected async disconnect(): Promise<void> {
    clearInterval(this.#sweepTimer);
    await this.#listener.close();
    await this.#pool.end().catch((error: unknown) => this.log.warn({ err: error }, "error while closing the event broker's pool"));
  }

  #onNotification(channel: string, payload: string): void {
    if (channel === this.#eventsChannel) {
      const parsed = parseWake(payload);
      if (parsed?.runId !== undefined) this.wakes.emit(parsed.runId, parsed.wake);
      else this.log.warn({ channel }, 'ignoring a malformed event notification');
      return;
    }
    if (channel === this.#controlChannel) {
      let message: { r?: unknown; m?: unknown };
      try {
        message = JSON.parse(payload) as { r?: unknown; m?: unknown };
      } catch {
        message = {};
      }
      if (typeof message.r === 'string') this.deliverControl(message.r, message.m);
      else this.log.warn({ channel }, 'ignoring a malformed control notification');
    }
  }
}
