/**
 * Publishes a run's events in order without making the graph wait for each broker round trip:
 * events queue up (while a batch is in flight, and until the event loop's next turn) and go out
 * together with publishMany.
 */
import type { EventBroker, EventInput } from '@berth/broker';

/** The broker accepts at most this many events per batch. */
const MAX_BATCH = 1000;

export class EventPipe {
  private queue: EventInput[] = [];
  private flushing: Promise<void> | undefined;
  private failure: unknown;

  constructor(private readonly broker: EventBroker, private readonly runId: string) {}

  /** Queues an event; it is published after every event queued before it. */
  push(event: string, data: unknown): void {
    if (this.failure) throw this.failure;
    this.queue.push({ event, data });
    this.flushing ??= this.drain();
  }

  /** Resolves when everything queued so far is published; rejects with a publishing failure. */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.failure) throw this.failure;
  }

  private async drain(): Promise<void> {
    try {
      // Wait for the current turn of the event loop: everything the graph emits until it next
      // waits for I/O (often the whole of a short run, with the metadata event) is one batch.
      await new Promise((resolve) => setImmediate(resolve));
      while (this.queue.length && !this.failure) {
        const batch = this.queue.splice(0, MAX_BATCH);
        await this.broker.publishMany(this.runId, batch);
      }
    } catch (error) {
      this.failure = error;
    } finally {
      this.flushing = undefined;
    }
  }
}
