/**
 * The event broker port: how the agent server moves the events of a run from the worker that
 * executes it to any number of SSE handlers (possibly in other processes), and control messages
 * (interrupt, rollback) the other way. Adapters: `PostgresEventBroker` (embedded default) and
 * `RedisEventBroker` (production); both pass the one contract suite in `contract/`.
 */
import type { Clock } from '@berth/clock';
import type { Logger } from '@berth/log';

/**
 * One event of a run's stream.
 *
 * `id` is the event's decimal sequence number within its run: `"0"`, `"1"`, `"2"`, … without
 * gaps. It is what an SSE handler writes as `id:` and what a reconnecting client sends back as
 * `Last-Event-ID` (pass it as `{ after: id }`).
 */
export interface BrokerEvent {
  /** Decimal sequence number within the run, starting at `"0"`. */
  id: string;
  /** Event name (the SSE `event:` field), e.g. `values`, `messages/partial`, `end`. */
  event: string;
  /** The JSON value published (objects, arrays, strings, numbers, booleans, null). */
  data: unknown;
}

/**
 * Where a subscription starts.
 *
 * - `'start'` — replay every retained event of the run, then follow it live.
 * - `'now'` — only events published after the subscription's `ready` resolved (nothing published
 *   before `subscribe` was called is delivered).
 * - `{ after: id }` — events whose id is greater than `id` (a reconnect with `Last-Event-ID`).
 */
export type SubscribeFrom = 'start' | 'now' | { after: string };

/** Options of {@link EventBroker.subscribe}. */
export interface SubscribeOptions {
  /** Where to start; see {@link SubscribeFrom}. */
  from: SubscribeFrom;
  /** Aborting it ends the subscription promptly (the iteration finishes without an error). */
  signal?: AbortSignal;
}

/**
 * A live subscription to one run's events. Iterate it with `for await`; breaking out of the loop
 * (or calling `return()`) releases it. It starts listening as soon as `subscribe` returns, so
 * events are not missed between `subscribe` and the first `next()`.
 */
export interface BrokerSubscription extends AsyncIterableIterator<BrokerEvent> {
  /**
   * Resolves once the subscription listens for wake-ups and (for `'now'`) has fixed its starting
   * point: every event published after this is delivered. Rejects with the setup error (which the
   * first `next()` rethrows too).
   */
  readonly ready: Promise<void>;
  /** The next event; `{ done: true }` once the subscription ended. Calls are served in order. */
  next(): Promise<IteratorResult<BrokerEvent, undefined>>;
  /** Ends the subscription now (what `break` in a `for await` loop calls). */
  return(): Promise<IteratorResult<BrokerEvent, undefined>>;
}

/** What the control messages of a run ask its worker to do. */
export type ControlAction = 'interrupt' | 'rollback';

/**
 * A message from the API to the worker executing a run (cancellation). Extendable: extra
 * JSON fields travel along unchanged.
 */
export interface ControlMessage {
  /** `interrupt` stops the run keeping its state; `rollback` stops it and discards its state. */
  action: ControlAction;
  /** Extra JSON fields. */
  [field: string]: unknown;
}

/** Handler of control messages registered with {@link EventBroker.onControl}. */
export type ControlHandler = (message: ControlMessage) => void;

/** One event of a batch given to {@link EventBroker.publishMany}. */
export interface EventInput {
  /** Event name. */
  event: string;
  /** JSON value. */
  data: unknown;
}

/** Options of {@link EventBroker.publish} and {@link EventBroker.publishMany}. */
export interface PublishOptions {
  /**
   * The id the first event gets when the stream does not exist yet (never published to, deleted
   * or expired); ignored for an existing stream. A stream whose numbering must go on across its
   * expiry (a thread's protocol events) passes the next id it ever gave out.
   * @default 0
   */
  startAt?: number;
}

/**
 * The event broker of agent runs. Events of a run are appended in order with gap-free ids and
 * retained for `retentionSeconds` after the run's last publish (or end), so late subscribers and
 * reconnecting clients can replay them.
 */
export interface EventBroker {
  /**
   * Resolves once the backend answers and its storage exists (Postgres: migrations applied).
   * Every other method waits for it, so calling it is optional; it makes start-up failures early.
   */
  ready(): Promise<void>;

  /**
   * Appends one event to the run's stream and returns its id. Ids strictly increase per run even
   * when several publishers (in several processes) publish to the same run.
   * @throws InvalidEventDataError when `data` has no JSON form
   * @throws EventTooLargeError when its JSON is larger than `maxEventBytes`
   * @throws RunEndedError when the run's stream was ended
   * @throws InvalidArgumentError for a `startAt` that is not a non-negative safe integer
   */
  publish(runId: string, event: string, data: unknown, options?: PublishOptions): Promise<string>;

  /**
   * Appends several events atomically (consecutive ids, one round trip) and returns their ids.
   * An empty batch appends nothing and returns `[]`.
   */
  publishMany(runId: string, events: readonly EventInput[], options?: PublishOptions): Promise<string[]>;

  /**
   * Marks the run's stream as ended: live subscribers finish once they yielded every event
   * published before; later subscribers replay (per `from`) and finish. Idempotent; ending a run
   * that never published creates an empty, ended stream.
   */
  end(runId: string): Promise<void>;

  /**
   * Subscribes to a run's events. The iteration ends after the last event once the stream is
   * ended, when `signal` aborts, when the run is deleted or when the broker closes; it throws a
   * `BrokerBackendError` if the backend fails (reconnect with `{ after: lastId }`).
   * Subscribing to a run nobody published to yet waits for its first event.
   * @throws InvalidArgumentError (synchronously) for an invalid run id or `after` id
   */
  subscribe(runId: string, options: SubscribeOptions): BrokerSubscription;

  /** Subscriptions of this broker (in this process) still listening, for the metrics. */
  subscriberCount(): number;

  /** True once {@link end} was called for the run (and its stream is still retained). */
  isEnded(runId: string): Promise<boolean>;

  /**
   * Sends a control message to every {@link onControl} handler of the run, in every process;
   * handlers registered at the time of sending receive it within milliseconds. Messages are not
   * stored: with no handler listening, the message is dropped.
   */
  sendControl(runId: string, message: ControlMessage): Promise<void>;

  /**
   * Calls `handler` for each control message sent to the run from now on. Resolves once
   * listening, with a function that stops the handler.
   */
  onControl(runId: string, handler: ControlHandler): Promise<() => Promise<void>>;

  /** Forgets the run's events and end mark; live subscriptions of the run end. */
  delete(runId: string): Promise<void>;

  /**
   * Ends every live subscription and control handler of this broker instance and releases its
   * connections. Later calls reject with `BrokerClosedError`. Idempotent.
   */
  close(): Promise<void>;
}

/** Options both adapters take. */
export interface EventBrokerOptions {
  /**
   * How long a run's events are kept after its last publish or end, in seconds. Then the run is
   * forgotten entirely, as if deleted (a later publish starts again at id `"0"`, or `startAt`).
   * @default 3600
   */
  retentionSeconds?: number;
  /**
   * Largest accepted event, in bytes of its JSON `data`.
   * @default 16777216 (16 MiB)
   */
  maxEventBytes?: number;
  /** Where warnings (lost connections, malformed messages) go. @default a silent logger */
  log?: Logger;
  /**
   * The clock of a subscription's safety re-read (every 10 s without a wake-up, in case one was
   * lost); tests that must tell a wake-up from that re-read hold it still.
   * @default systemClock
   */
  clock?: Clock;
}

/** Default of {@link EventBrokerOptions.retentionSeconds}. */
export const DEFAULT_RETENTION_SECONDS = 3600;
/** Default of {@link EventBrokerOptions.maxEventBytes}. */
export const DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024;
