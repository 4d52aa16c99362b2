/**
 * Plumbing for the broker contract suite: brokers created on one backend and closed after each
 * test, unique run ids, and bounded ways to read a subscription. Test support only: excluded from
 * the package build.
 */
import { randomBytes } from 'node:crypto';
import { ManualClock } from '@berth/clock';
import { until } from '@berth/testing';
import type { BrokerEvent, EventBroker, EventBrokerOptions } from '../broker.js';

/** A backend namespace for one test file (fresh database/schema, or unique key prefix). */
export interface BrokerContractTarget {
  /** A new broker instance (a new "process") on the shared namespace. */
  create(options?: EventBrokerOptions): EventBroker;
  teardown?: () => Promise<void>;
}

export class Harness {
  /**
   * The brokers' clock, held still: a subscription's safety re-read (every 10 s without a
   * wake-up) never runs, so whatever a case's subscribers read, a wake-up brought.
   */
  readonly clock = new ManualClock();
  readonly #target: BrokerContractTarget;
  readonly #brokers: EventBroker[] = [];

  constructor(target: BrokerContractTarget) {
    this.#target = target;
  }

  /** A broker closed after the test. */
  broker(options?: EventBrokerOptions): EventBroker {
    const broker = this.#target.create({ clock: this.clock, ...options });
    this.#brokers.push(broker);
    return broker;
  }

  async close(): Promise<void> {
    await Promise.all(this.#brokers.splice(0).map((b) => b.close().catch(() => undefined)));
  }
}

/** A run id no other test uses. */
export function newRunId(label = 'run'): string {
  return `${label}-${randomBytes(6).toString('hex')}`;
}

/**
 * Resolves once a subscription of a broker on `clock` waits for a wake-up: having read what there
 * was, it set its safety re-read on the clock.
 */
export function waitingForWakeUp(clock: ManualClock): Promise<true> {
  return until('the subscriber to wait for a wake-up', () => (clock.pending > 0 ? true : undefined), 10_000, 5);
}

/** `next()` with a deadline: throws (and releases the iterator) when it takes longer. */
export async function nextWithin(sub: AsyncIterator<BrokerEvent>, timeoutMs: number): Promise<IteratorResult<BrokerEvent>> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no event or end within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([sub.next(), timeout]);
  } catch (error) {
    await sub.return?.();
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** Reads until the subscription ends (or `max` events); each step must finish within `stepMs`. */
export async function drain(sub: AsyncIterator<BrokerEvent>, options: { max?: number; stepMs?: number } = {}): Promise<BrokerEvent[]> {
  const events: BrokerEvent[] = [];
  while (events.length < (options.max ?? Infinity)) {
    const result = await nextWithin(sub, options.stepMs ?? 5_000);
    if (result.done) return events;
    events.push(result.value);
  }
  return events;
}

/** `"0"`, `"1"`, … `"n-1"` offset by `from`. */
export function ids(count: number, from = 0): string[] {
  return Array.from({ length: count }, (_, k) => String(from + k));
}
