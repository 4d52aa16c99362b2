/**
 * What both adapters share: argument validation, the closed state, error wrapping, the
 * subscription bookkeeping and the in-process fan-out of wake-ups and control messages. An
 * adapter supplies storage operations and how its backend listener attaches to a run.
 */
import { systemClock, type Clock } from '@berth/clock';
import { isBerthError, InvalidArgumentError } from '@berth/errors';
import { silentLogger, type Logger } from '@berth/log';
import {
  DEFAULT_MAX_EVENT_BYTES,
  DEFAULT_RETENTION_SECONDS,
  type BrokerSubscription,
  type ControlHandler,
  type ControlMessage,
  type EventBroker,
  type EventBrokerOptions,
  type EventInput,
  type PublishOptions,
  type SubscribeOptions,
} from './broker.js';
import { assertRunId, cursorOf, encodeControl, encodeEvent, parseControl, type EncodedEvent, type Wake } from './encoding.js';
import { BrokerBackendError, BrokerClosedError, RunEndedError } from './errors.js';
import { KeyedHub } from './hub.js';
import { Subscription, type ReadResult, type StreamSource } from './subscription.js';

/** Most events one `publishMany` call accepts. */
export const MAX_BATCH_EVENTS = 1000;

/** The shared half of an event broker; see `PostgresEventBroker` and `RedisEventBroker`. */
export abstract class BaseEventBroker implements EventBroker {
  protected readonly log: Logger;
  protected readonly retentionSeconds: number;
  protected readonly maxEventBytes: number;
  /** Wake-ups of runs with live subscriptions in this process. */
  protected readonly wakes: KeyedHub<Wake>;
  /** Control handlers of runs in this process. */
  protected readonly controls: KeyedHub<ControlMessage>;
  readonly #backend: 'postgres' | 'redis';
  readonly #subscriptions = new Set<Subscription>();
  readonly #source: StreamSource;
  readonly #clock: Clock;
  #ready: Promise<void> | undefined;
  #closed = false;

  protected constructor(backend: 'postgres' | 'redis', options: EventBrokerOptions) {
    this.#backend = backend;
    this.log = options.log ?? silentLogger();
    this.#clock = options.clock ?? systemClock;
    this.retentionSeconds = options.retentionSeconds ?? DEFAULT_RETENTION_SECONDS;
    this.maxEventBytes = options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
    if (!Number.isInteger(this.retentionSeconds) || this.retentionSeconds < 1) {
      throw new InvalidArgumentError(`retentionSeconds must be a positive integer, got ${options.retentionSeconds}`);
    }
    if (!Number.isInteger(this.maxEventBytes) || this.maxEventBytes < 1) {
      throw new InvalidArgumentError(`maxEventBytes must be a positive integer, got ${options.maxEventBytes}`);
    }
    this.wakes = new KeyedHub('event wake-up', { attach: (k) => this.attachWakes(k), detach: (k) => this.detachWakes(k) }, this.log);
    this.controls = new KeyedHub('control', { attach: (k) => this.attachControl(k), detach: (k) => this.detachControl(k) }, this.log);
    this.#source = {
      watch: (runId, onWake) => this.#call('subscribe', runId, () => this.wakes.add(runId, onWake)),
      head: (runId) => this.#call('subscribe', runId, () => this.readHead(runId)),
      read: (runId, after) => this.#call('read', runId, () => this.readAfter(runId, after)),
    };
  }

  /** Connects / prepares storage once (Postgres: applies migrations). */
  protected abstract connect(): Promise<void>;
  /** Appends encoded events atomically (a new stream numbered from `startAt`); the first one's sequence number, or `'ended'`. */
  protected abstract append(runId: string, events: readonly EncodedEvent[], startAt: number): Promise<number | 'ended'>;
  /** Marks the stream ended and wakes its subscribers. */
  protected abstract markEnded(runId: string): Promise<void>;
  /** Whether the stream is marked ended. */
  protected abstract readEnded(runId: string): Promise<boolean>;
  /** The stream's next sequence number (0 when unknown). */
  protected abstract readHead(runId: string): Promise<number>;
  /** A bounded batch of events after `after`, with `next` and the end mark of the same snapshot. */
  protected abstract readAfter(runId: string, after: number): Promise<ReadResult>;
  /** Deletes the stream and tells its subscribers. */
  protected abstract remove(runId: string): Promise<void>;
  /** Broadcasts a serialized control message to the run's handlers in every process. */
  protected abstract broadcastControl(runId: string, json: string): Promise<void>;
  /** Starts receiving the run's wake-ups (resolves once listening). */
  protected abstract attachWakes(runId: string): Promise<void>;
  /** Stops receiving the run's wake-ups. */
  protected abstract detachWakes(runId: string): Promise<void>;
  /** Starts receiving the run's control messages (resolves once listening). */
  protected abstract attachControl(runId: string): Promise<void>;
  /** Stops receiving the run's control messages. */
  protected abstract detachControl(runId: string): Promise<void>;
  /** Releases every connection. */
  protected abstract disconnect(): Promise<void>;

  ready(): Promise<void> {
    if (this.#closed) return Promise.reject(new BrokerClosedError());
    this.#ready ??= this.connect().catch((error: unknown) => {
      this.#ready = undefined;
      throw isBerthError(error) ? error : new BrokerBackendError(this.#backend, 'connect', undefined, error);
    });
    return this.#ready;
  }

  async publish(runId: string, event: string, data: unknown, options?: PublishOptions): Promise<string> {
    const [id] = await this.publishMany(runId, [{ event, data }], options);
    return id!;
  }

  async publishMany(runId: string, events: readonly EventInput[], options?: PublishOptions): Promise<string[]> {
    assertRunId(runId);
    if (!Array.isArray(events) || events.length > MAX_BATCH_EVENTS) {
      throw new InvalidArgumentError(`publishMany takes an array of at most ${MAX_BATCH_EVENTS} events`);
    }
    const startAt = options?.startAt ?? 0;
    if (!Number.isSafeInteger(startAt) || startAt < 0) throw new InvalidArgumentError(`startAt must be a non-negative safe integer, got ${String(startAt)}`);
    const encoded = events.map((e) => encodeEvent(runId, e, this.maxEventBytes));
    if (encoded.length === 0) return [];
    const first = await this.#call('publish', runId, () => this.append(runId, encoded, startAt));
    if (first === 'ended') throw new RunEndedError(runId);
    return encoded.map((_, k) => String(first + k));
  }

  async end(runId: string): Promise<void> {
    assertRunId(runId);
    await this.#call('end', runId, () => this.markEnded(runId));
  }

  subscribe(runId: string, options: SubscribeOptions): BrokerSubscription {
    assertRunId(runId);
    const from = cursorOf(options?.from);
    if (this.#closed) throw new BrokerClosedError();
    const subscription = new Subscription(this.#source, runId, from, options.signal, (s) => this.#subscriptions.delete(s), this.#clock);
    if (!subscription.finished) this.#subscriptions.add(subscription);
    return subscription;
  }

  subscriberCount(): number {
    return this.#subscriptions.size;
  }

  async isEnded(runId: string): Promise<boolean> {
    assertRunId(runId);
    return this.#call('isEnded', runId, () => this.readEnded(runId));
  }

  async sendControl(runId: string, message: ControlMessage): Promise<void> {
    assertRunId(runId);
    const json = encodeControl(message);
    await this.#call('sendControl', runId, () => this.broadcastControl(runId, json));
  }

  async onControl(runId: string, handler: ControlHandler): Promise<() => Promise<void>> {
    assertRunId(runId);
    if (typeof handler !== 'function') throw new InvalidArgumentError('onControl needs a handler function');
    const listener = (message: ControlMessage) => handler(message);
    const remove = await this.#call('onControl', runId, () => this.controls.add(runId, listener));
    return async () => remove();
  }

  async delete(runId: string): Promise<void> {
    assertRunId(runId);
    await this.#call('delete', runId, () => this.remove(runId));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const subscription of [...this.#subscriptions]) subscription.finish();
    this.wakes.clear();
    this.controls.clear();
    const ready = this.#ready;
    await ready?.catch(() => undefined);
    await this.disconnect();
  }

  /** Whether {@link close} was called. */
  protected get closed(): boolean {
    return this.#closed;
  }

  /** Hands a control message received by the backend listener to the run's local handlers. */
  protected deliverControl(runId: string, payload: unknown): void {
    const message = parseControl(payload);
    if (message) this.controls.emit(runId, message);
    else this.log.warn({ runId }, 'ignoring a control message this version does not understand');
  }

  /** Runs a backend operation once ready, turning backend failures into `BrokerBackendError`. */
  async #call<T>(operation: string, runId: string, fn: () => Promise<T>): Promise<T> {
    if (this.#closed) throw new BrokerClosedError();
    await this.ready();
    try {
      return await fn();
    } catch (error) {
      if (isBerthError(error)) throw error;
      if (this.#closed) throw new BrokerClosedError();
      throw new BrokerBackendError(this.#backend, operation, runId, error);
    }
  }
}
