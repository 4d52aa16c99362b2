/**
 * The subscription engine both adapters share. A subscription keeps a cursor (the last sequence
 * number it yielded) and reads from storage only when woken: wake-ups that carry the next events
 * inline are yielded without a query; anything else (a gap, a large event, a reconnect of the
 * listener) marks the subscription dirty and the next step re-reads from the cursor. Reads
 * return the stream's `next` sequence number and end mark from the same snapshot, so "ended and
 * nothing left after the cursor" is exact. Nothing is buffered beyond one read batch plus a
 * bounded number of inline events.
 */
import type { Clock } from '@berth/clock';
import type { BrokerEvent, BrokerSubscription } from './broker.js';
import { toBrokerEvent, type StoredEvent, type Wake } from './encoding.js';

/** One read of a run's stream after a cursor. */
export interface ReadResult {
  /** Events with `seq > after`, in order, contiguous (a bounded batch). */
  events: StoredEvent[];
  /** The sequence number the next event will get (the number of events ever appended). */
  next: number;
  /** Whether the stream was ended (in the same snapshot as `events` and `next`). */
  ended: boolean;
}

/** What a subscription needs from its adapter. */
export interface StreamSource {
  /** Starts delivering the run's wake-ups to `onWake`; resolves once listening, with the remover. */
  watch(runId: string, onWake: (wake: Wake) => void): Promise<() => void>;
  /** The run's `next` sequence number (0 for an unknown run). */
  head(runId: string): Promise<number>;
  /** Events after `after`, in a bounded batch. */
  read(runId: string, after: number): Promise<ReadResult>;
}

const STOPPED: unique symbol = Symbol('stopped');
const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });
/** Re-read this often even without wake-ups, in case one was lost. */
const POLL_INTERVAL_MS = 10_000;
/** Inline events kept while the consumer is slow; beyond that they are dropped and re-read. */
const MAX_INLINE_EVENTS = 256;

/** A live subscription (see `BrokerSubscription`). */
export class Subscription implements BrokerSubscription {
  readonly ready: Promise<void>;
  readonly #source: StreamSource;
  readonly #runId: string;
  readonly #signal: AbortSignal | undefined;
  readonly #onFinish: (subscription: Subscription) => void;
  readonly #clock: Clock;
  readonly #stopped: Promise<typeof STOPPED>;
  #stop: () => void = () => undefined;
  #cursor = -1;
  #fetched: StoredEvent[] = [];
  #inline: StoredEvent[] = [];
  #dirty = true;
  #endNext: number | undefined;
  #finished = false;
  #failure: { error: unknown } | undefined;
  #unwatch: (() => void) | undefined;
  #wake: (() => void) | undefined;
  #chain: Promise<unknown> = Promise.resolve();
  readonly #onAbort = () => this.finish();

  constructor(
    source: StreamSource,
    runId: string,
    from: number | 'now',
    signal: AbortSignal | undefined,
    onFinish: (subscription: Subscription) => void,
    clock: Clock,
  ) {
    this.#source = source;
    this.#clock = clock;
    this.#runId = runId;
    this.#signal = signal;
    this.#onFinish = onFinish;
    this.#stopped = new Promise((resolve) => (this.#stop = () => resolve(STOPPED)));
    if (signal?.aborted) {
      this.#finished = true;
      this.ready = Promise.resolve();
      return;
    }
    signal?.addEventListener('abort', this.#onAbort, { once: true });
    this.ready = this.#start(from);
    this.ready.catch(() => undefined); // rethrown by next(); not an unhandled rejection
  }

  /** True once the subscription ended (stream end, abort, return(), close, error). */
  get finished(): boolean {
    return this.#finished;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<BrokerEvent, undefined>> {
    const step = this.#chain.then(() => this.#step());
    this.#chain = step.catch(() => undefined);
    return step;
  }

  async return(): Promise<IteratorResult<BrokerEvent, undefined>> {
    this.finish();
    return DONE;
  }

  /** Ends the subscription: a pending `next()` resolves as done; releases its wake-up listener. */
  finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#signal?.removeEventListener('abort', this.#onAbort);
    this.#unwatch?.();
    this.#unwatch = undefined;
    this.#fetched = [];
    this.#inline = [];
    this.#stop();
    this.#wake?.();
    this.#onFinish(this);
  }

  async #start(from: number | 'now'): Promise<void> {
    try {
      const unwatch = await this.#source.watch(this.#runId, (wake) => this.#onWakeUp(wake));
      if (this.#finished) return unwatch();
      this.#unwatch = unwatch;
      this.#cursor = from === 'now' ? (await this.#source.head(this.#runId)) - 1 : from;
    } catch (error) {
      this.#failure = { error };
      this.finish();
      throw error;
    }
  }

  async #step(): Promise<IteratorResult<BrokerEvent, undefined>> {
    if (this.#failure) {
      const { error } = this.#failure;
      this.#failure = undefined; // thrown once, then the iteration is simply done
      throw error;
    }
    if (this.#finished) return DONE;
    await this.#race(this.ready.catch(() => undefined));
    if (this.#failure) return this.#step();
    for (;;) {
      if (this.#finished) return DONE;
      const want = this.#cursor + 1;
      const next = this.#take(want);
      if (next) {
        this.#cursor = next.seq;
        return { done: false, value: toBrokerEvent(next) };
      }
      if (this.#endNext !== undefined && want >= this.#endNext) {
        this.finish();
        return DONE;
      }
      if (this.#dirty) {
        this.#dirty = false;
        let result: ReadResult | typeof STOPPED;
        try {
          result = await this.#race(this.#source.read(this.#runId, this.#cursor));
        } catch (error) {
          this.finish();
          throw error;
        }
        if (result === STOPPED) return DONE;
        this.#absorb(result, want);
        continue;
      }
      if ((await this.#race(this.#nextWake())) === STOPPED) return DONE;
    }
  }

  /** The event to yield next, if one is at hand. */
  #take(want: number): StoredEvent | undefined {
    while (this.#fetched.length > 0 && this.#fetched[0]!.seq < want) this.#fetched.shift();
    // A read's batch is contiguous from the cursor; its first event is the next one.
    if (this.#fetched.length > 0) return this.#fetched.shift();
    while (this.#inline.length > 0 && this.#inline[0]!.seq < want) this.#inline.shift();
    if (this.#inline[0]?.seq === want) return this.#inline.shift();
    if (this.#inline.length > 0) this.#dirty = true; // a gap before the inline events: read it
    return undefined;
  }

  #absorb(result: ReadResult, want: number): void {
    this.#fetched = result.events.filter((e) => e.seq >= want);
    const last = this.#fetched.at(-1)?.seq ?? this.#cursor;
    if (this.#fetched.length > 0 && last < result.next - 1) this.#dirty = true; // a bounded batch: more to read
    if (result.ended) this.#endNext = this.#fetched.length > 0 ? result.next : Math.min(result.next, want);
  }

  #onWakeUp(wake: Wake): void {
    switch (wake.kind) {
      case 'events': {
        const known = Math.max(this.#cursor, this.#fetched.at(-1)?.seq ?? -1, this.#inline.at(-1)?.seq ?? -1);
        if (wake.first + wake.count - 1 <= known) return; // already read
        if (wake.inline && wake.first <= known + 1 && this.#inline.length < MAX_INLINE_EVENTS) {
          for (const e of wake.inline) if (e.seq > known) this.#inline.push(e);
        } else {
          this.#dirty = true;
        }
        break;
      }
      case 'end':
        this.#endNext = wake.next;
        this.#dirty = true;
        break;
      case 'deleted':
        this.finish();
        return;
      case 'resync':
        this.#dirty = true;
        break;
    }
    this.#wake?.();
  }

  /** Resolves at the next wake-up (or after the poll interval, marking the subscription dirty). */
  #nextWake(): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = this.#clock.setTimeout(() => {
        this.#dirty = true;
        done();
      }, POLL_INTERVAL_MS);
      const done = () => {
        timer.cancel();
        this.#wake = undefined;
        resolve();
      };
      this.#wake = done;
    });
  }

  #race<T>(promise: Promise<T>): Promise<T | typeof STOPPED> {
    return Promise.race([promise, this.#stopped]);
  }
}
