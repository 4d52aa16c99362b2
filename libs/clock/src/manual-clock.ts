/**
 * A clock a test moves by hand: time stands still until `advance` (or `runNext`) moves it, and
 * timers fire in order of their time as it passes them, each followed by the promise jobs and
 * I/O callbacks it started (one turn of the event loop), so code that reacts to a timer with
 * async work has done it before the next timer fires.
 */
import { sleepOn, type Clock, type Timer } from './clock.js';

interface Pending {
  at: number;
  fn: () => void;
  /** Repeats every `every` ms (setInterval). */
  every?: number;
}

/** One turn of the event loop: pending promise jobs and due I/O callbacks run. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class ManualClock implements Clock {
  #time: number;
  readonly #timers = new Map<number, Pending>();
  #nextId = 1;

  /** @param start The time it starts at, in ms since the epoch. @default 2026-01-01T00:00:00Z */
  constructor(start: number | Date = Date.UTC(2026, 0, 1)) {
    this.#time = typeof start === 'number' ? start : start.getTime();
  }

  now(): number {
    return this.#time;
  }

  setTimeout(fn: () => void, ms: number): Timer {
    return this.#add({ at: this.#time + Math.max(0, ms), fn });
  }

  setInterval(fn: () => void, ms: number): Timer {
    const every = Math.max(1, ms);
    return this.#add({ at: this.#time + every, fn, every });
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }

  /** How many timers are pending. */
  get pending(): number {
    return this.#timers.size;
  }

  /** When the next timer fires, or undefined when none is pending. */
  get nextAt(): number | undefined {
    let next: number | undefined;
    for (const { at } of this.#timers.values()) if (next === undefined || at < next) next = at;
    return next;
  }

  /** Moves time forward by `ms`, firing every timer due on the way, in order. */
  async advance(ms: number): Promise<void> {
    if (!(ms >= 0)) throw new RangeError(`advance takes a non-negative number of ms, got ${ms}`);
    await this.advanceTo(this.#time + ms);
  }

  /** Moves time forward to `time` (ms since the epoch), firing every timer due on the way. */
  async advanceTo(time: number): Promise<void> {
    await turn();
    for (;;) {
      const due = this.#earliest();
      if (!due || due[1].at > time) break;
      await this.#fire(due);
    }
    this.#time = Math.max(this.#time, time);
    await turn();
  }

  /** Moves time to the next timer and fires it (and any due at the same time); false when none is pending. */
  async runNext(): Promise<boolean> {
    await turn();
    const due = this.#earliest();
    if (!due) return false;
    await this.advanceTo(due[1].at);
    return true;
  }

  #add(pending: Pending): Timer {
    const id = this.#nextId++;
    this.#timers.set(id, pending);
    return { cancel: () => void this.#timers.delete(id) };
  }

  /** The timer due first (the one set first among equals). */
  #earliest(): [number, Pending] | undefined {
    let due: [number, Pending] | undefined;
    for (const entry of this.#timers) if (!due || entry[1].at < due[1].at) due = entry;
    return due;
  }

  async #fire([id, pending]: [number, Pending]): Promise<void> {
    this.#time = pending.at;
    if (pending.every) pending.at += pending.every;
    else this.#timers.delete(id);
    pending.fn();
    await turn();
  }
}
