/**
 * A clock the test moves by hand (see runs/lease.ts `Clock`): timers fire, in order, only when
 * `advance` passes their time, each followed by the promise jobs and I/O callbacks it started.
 */
import type { Clock } from '../runs/lease.js';

export class ManualClock implements Clock {
  private time: number;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();
  private nextId = 1;

  constructor(start = 1_000_000) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  setTimeout(fn: () => void, ms: number): number {
    const id = this.nextId++;
    this.timers.set(id, { at: this.time + Math.max(0, ms), fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  defer(fn: () => void): void {
    fn();
  }

  /** Moves time forward by `ms`, firing every timer due on the way. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    for (;;) {
      let due: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.timers) if (entry[1].at <= end && (!due || entry[1].at < due[1].at)) due = entry;
      if (!due) break;
      this.time = due[1].at;
      this.timers.delete(due[0]);
      due[1].fn();
      await new Promise((resolve) => setImmediate(resolve));
    }
    this.time = end;
    await new Promise((resolve) => setImmediate(resolve));
  }
}
