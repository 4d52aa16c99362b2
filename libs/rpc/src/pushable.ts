/**
 * An async iterable fed by `push` calls: the request stream of a client- or bidi-streaming call
 * whose messages come from callbacks (a WebSocket, an HTTP body).
 */
export class Pushable<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #waiting: ((result: IteratorResult<T, undefined>) => void) | undefined;
  #ended = false;

  /** Queues a message; ignored after `end()`. */
  push(item: T): void {
    if (this.#ended) return;
    const waiting = this.#waiting;
    if (waiting) {
      this.#waiting = undefined;
      waiting({ value: item, done: false });
    } else {
      this.#items.push(item);
    }
  }

  /** Ends the stream after the queued messages. */
  end(): void {
    this.#ended = true;
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.({ value: undefined, done: true });
  }

  /** `end()`, returning this (an empty stream in one expression). */
  endNow(): this {
    this.end();
    return this;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for (;;) {
      if (this.#items.length > 0) {
        yield this.#items.shift()!;
        continue;
      }
      if (this.#ended) return;
      const next = await new Promise<IteratorResult<T, undefined>>((resolve) => {
        this.#waiting = resolve;
      });
      if (next.done) return;
      yield next.value;
    }
  }
}
