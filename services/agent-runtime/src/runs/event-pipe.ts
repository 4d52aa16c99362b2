/**
 * Publishes a run's events in order without making the graph wait for each broker round trip:
 * events queue up (while a batch is in flight, and until the event loop's next turn) and go out
 * together with publishMany. While the broker's backend is unreachable they are kept and retried
 * (for `retryMs`, until the run's signal aborts), so a run rides through an outage of the
 * database; a batch retried after a failure whose commit was not acknowledged may be published
 * twice. Any other failure is final: the next push throws it.
 */
import type { EventBroker, EventInput, PublishOptions } from '@berth/broker';
import { backoffMs, isTransientDbError, sleep } from '../storage/retry.js';

/** The broker accepts at most this many events per batch. */
const MAX_BATCH = 1000;

export class EventPipe {
  private queue: EventInput[] = [];
  private flushing: Promise<void> | undefined;
  private failure: unknown;
  private readonly retryMs: number;
  private readonly signal: AbortSignal | undefined;
  private readonly publishOptions: PublishOptions;

  constructor(
    private readonly broker: EventBroker,
    private readonly runId: string,
    options: { retryMs?: number; signal?: AbortSignal; startAt?: number } = {},
  ) {
    this.retryMs = options.retryMs ?? 0;
    this.signal = options.signal;
    this.publishOptions = { startAt: options.startAt ?? 0 };
  }

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
        const batch = this.queue.slice(0, MAX_BATCH);
        await this.publish(batch);
        this.queue.splice(0, batch.length);
      }
    } catch (error) {
      this.failure = error;
    } finally {
      this.flushing = undefined;
    }
  }

  private async publish(batch: EventInput[]): Promise<void> {
    const since = Date.now();
    for (let attempt = 0; ; attempt++) {
      try {
        await this.broker.publishMany(this.runId, batch, this.publishOptions);
        return;
      } catch (error) {
        if (!isTransientDbError(error) || this.signal?.aborted || Date.now() - since >= this.retryMs) throw error;
        await sleep(backoffMs(attempt));
      }
    }
  }
}
