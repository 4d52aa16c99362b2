/**
 * The production event broker: one Redis Stream per run (entry id `<seq>-1`, the sequence number
 * also stored in the entry), a hash with the run's counter and end mark, EXPIRE for retention
 * (refreshed by every publish and end). Wake-ups and control messages use Pub/Sub on per-run
 * channels, received by ONE subscriber connection per broker instance and fanned out
 * in-process; subscribers then read with one scripted XRANGE on the shared command connection
 * (or not at all when the events rode inside the wake-up).
 */
import { InvalidArgumentError } from '@berth/errors';
import { traceRedis } from '@berth/tracing';
import { Redis } from 'ioredis';
import { BaseEventBroker } from './base-broker.js';
import type { EventBrokerOptions } from './broker.js';
import { decodeEvent, inlineEvents, parseWake, type EncodedEvent, type StoredEvent } from './encoding.js';
import { APPEND, DELETE, END, READ, type LuaScript } from './redis-scripts.js';
import type { ReadResult } from './subscription.js';

/** The key prefix used when none is configured. */
export const DEFAULT_BROKER_PREFIX = 'berth';

/** Largest batch a read returns, in events. */
const READ_BATCH_EVENTS = 500;
/** A read stops adding events once the batch holds this many bytes of data (at least one event). */
const READ_BATCH_BYTES = 4 * 1024 * 1024;

/** Configuration of a {@link RedisEventBroker}. */
export interface RedisEventBrokerOptions extends EventBrokerOptions {
  /** `redis://[user:password@]host:port[/db]` */
  url: string;
  /**
   * Prefix of every key and channel (`<prefix>:broker:{<runId>}:…`).
   * @default 'berth'
   */
  prefix?: string;
}

/** Event broker on Redis Streams + Pub/Sub. */
export class RedisEventBroker extends BaseEventBroker {
  readonly #prefix: string;
  readonly #redis: Redis;
  readonly #subscriber: Redis;
  /** Subscribed channel → what it carries for which run. */
  readonly #channels = new Map<string, { runId: string; kind: 'wake' | 'control' }>();
  #subscriberReadyOnce = false;

  constructor(options: RedisEventBrokerOptions) {
    super('redis', options);
    const prefix = options.prefix ?? DEFAULT_BROKER_PREFIX;
    if (!/^[A-Za-z0-9][A-Za-z0-9:._-]{0,99}$/.test(prefix)) {
      throw new InvalidArgumentError(`invalid broker key prefix ${JSON.stringify(prefix)}`);
    }
    this.#prefix = prefix;
    // Named after the prefix so operators (and tests) can tell the connections apart in CLIENT LIST.
    this.#redis = traceRedis(new Redis(options.url, { lazyConnect: true, connectionName: `berth-broker:${prefix}` }));
    this.#subscriber = new Redis(options.url, { lazyConnect: true, connectionName: `berth-broker-sub:${prefix}` });
    this.#redis.on('error', (error: unknown) => this.log.warn({ err: error }, 'event broker redis connection error'));
    this.#subscriber.on('error', (error: unknown) => this.log.warn({ err: error }, 'event broker redis subscriber error'));
    this.#subscriber.on('message', (channel: string, message: string) => this.#onMessage(channel, message));
    this.#subscriber.on('ready', () => {
      // Pub/Sub messages sent while reconnecting are lost: make every subscriber re-read.
      if (this.#subscriberReadyOnce) this.wakes.emitAll({ kind: 'resync' });
      this.#subscriberReadyOnce = true;
    });
  }

  protected async connect(): Promise<void> {
    // A first attempt connects; after a failed one ioredis keeps reconnecting on its own and a
    // PING waits for it (or fails after its retries).
    await Promise.all(
      [this.#redis, this.#subscriber].map((connection) => (connection.status === 'wait' ? connection.connect() : connection.ping().then(() => undefined))),
    );
  }

  protected async append(runId: string, events: readonly EncodedEvent[], startAt: number): Promise<number | 'ended'> {
    const inline = inlineEvents(events, 0) ?? '';
    const args: (string | number)[] = [this.retentionSeconds, this.#channel(runId, 'wake'), events.length, inline, startAt];
    for (const e of events) args.push(e.event, e.json);
    const first = await this.#run(APPEND, runId, args);
    return first === null || first === undefined ? 'ended' : Number(first);
  }

  protected async markEnded(runId: string): Promise<void> {
    await this.#run(END, runId, [this.retentionSeconds, this.#channel(runId, 'wake')]);
  }

  protected async readEnded(runId: string): Promise<boolean> {
    return (await this.#redis.hexists(this.#key(runId, 'meta'), 'ended')) === 1;
  }

  protected async readHead(runId: string): Promise<number> {
    const next = await this.#redis.hget(this.#key(runId, 'meta'), 'next');
    return next === null ? 0 : Number(next);
  }

  protected async readAfter(runId: string, after: number): Promise<ReadResult> {
    const reply = (await this.#run(READ, runId, [after + 1, READ_BATCH_EVENTS, READ_BATCH_BYTES])) as [string | null, string | null, string[]];
    const [next, ended, flat] = reply;
    const events: StoredEvent[] = [];
    for (let k = 0; k + 2 < flat.length; k += 3) events.push(decodeEvent(Number(flat[k]), flat[k + 1]!, flat[k + 2]!));
    return { events, next: next === null ? 0 : Number(next), ended: ended !== null };
  }

  protected async remove(runId: string): Promise<void> {
    await this.#run(DELETE, runId, [this.#channel(runId, 'wake')]);
  }

  protected async broadcastControl(runId: string, json: string): Promise<void> {
    await this.#redis.publish(this.#channel(runId, 'control'), json);
  }

  protected attachWakes(runId: string): Promise<void> {
    return this.#subscribe(runId, 'wake');
  }

  protected detachWakes(runId: string): Promise<void> {
    return this.#unsubscribe(runId, 'wake');
  }

  protected attachControl(runId: string): Promise<void> {
    return this.#subscribe(runId, 'control');
  }

  protected detachControl(runId: string): Promise<void> {
    return this.#unsubscribe(runId, 'control');
  }

  protected async disconnect(): Promise<void> {
    await Promise.all(
      [this.#redis, this.#subscriber].map(async (connection) => {
        if (connection.status === 'ready') await connection.quit().catch(() => connection.disconnect());
        else connection.disconnect();
      }),
    );
  }

  async #subscribe(runId: string, kind: 'wake' | 'control'): Promise<void> {
    const channel = this.#channel(runId, kind);
    this.#channels.set(channel, { runId, kind });
    await this.#subscriber.subscribe(channel);
  }

  async #unsubscribe(runId: string, kind: 'wake' | 'control'): Promise<void> {
    const channel = this.#channel(runId, kind);
    this.#channels.delete(channel);
    if (!this.closed) await this.#subscriber.unsubscribe(channel);
  }

  #onMessage(channel: string, message: string): void {
    const target = this.#channels.get(channel);
    if (!target) return;
    if (target.kind === 'wake') {
      const parsed = parseWake(message);
      if (parsed) this.wakes.emit(target.runId, parsed.wake);
      else this.log.warn({ channel }, 'ignoring a malformed event wake-up');
      return;
    }
    let payload: unknown;
    try {
      payload = JSON.parse(message);
    } catch {
      payload = undefined;
    }
    this.deliverControl(target.runId, payload);
  }

  #key(runId: string, kind: 'events' | 'meta'): string {
    return `${this.#prefix}:broker:{${runId}}:${kind}`;
  }

  #channel(runId: string, kind: 'wake' | 'control'): string {
    return `${this.#prefix}:broker:{${runId}}:${kind}`;
  }

  /** EVALSHA with the run's two keys, loading the script on NOSCRIPT. */
  async #run(lua: LuaScript, runId: string, args: (string | number)[]): Promise<unknown> {
    const keys = [this.#key(runId, 'events'), this.#key(runId, 'meta')];
    try {
      return await this.#redis.evalsha(lua.sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return this.#redis.eval(lua.source, keys.length, ...keys, ...args);
    }
  }
}
