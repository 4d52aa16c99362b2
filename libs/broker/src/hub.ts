/**
 * In-process fan-out of messages keyed by run id: one backend listener per broker instance, any
 * number of local listeners per key. The backend is told when a key gains its first listener
 * (`attach`, e.g. a Redis SUBSCRIBE) and loses its last (`detach`); both run one at a time per key,
 * in order, so a quick detach/attach sequence cannot leave the key unsubscribed.
 */
import type { Logger } from '@berth/log';

/** What the backend does when a key gains its first listener or loses its last. */
export interface HubHooks {
  /** Start receiving the key's messages; resolves once they are received. */
  attach(key: string): Promise<void>;
  /** Stop receiving the key's messages. */
  detach(key: string): Promise<void>;
}

interface Entry<T> {
  listeners: Set<(value: T) => void>;
  attached: Promise<void>;
}

/** Listeners keyed by run id, with backend attach/detach on the first/last one. */
export class KeyedHub<T> {
  readonly #entries = new Map<string, Entry<T>>();
  readonly #ops = new Map<string, Promise<void>>();
  readonly #hooks: HubHooks;
  readonly #log: Logger;
  readonly #what: string;

  constructor(what: string, hooks: HubHooks, log: Logger) {
    this.#what = what;
    this.#hooks = hooks;
    this.#log = log;
  }

  /** Adds a listener; resolves once the backend delivers the key's messages, with its remover. */
  async add(key: string, listener: (value: T) => void): Promise<() => void> {
    let entry = this.#entries.get(key);
    if (!entry) {
      const created: Entry<T> = { listeners: new Set(), attached: this.#serial(key, () => this.#hooks.attach(key)) };
      created.attached.catch(() => {
        if (this.#entries.get(key) === created) this.#entries.delete(key);
      });
      this.#entries.set(key, created);
      entry = created;
    }
    const joined = entry;
    joined.listeners.add(listener);
    try {
      await joined.attached;
    } catch (error) {
      joined.listeners.delete(listener);
      throw error;
    }
    return () => this.#remove(key, listener, joined);
  }

  /** Delivers `value` to the key's listeners (a throwing listener is logged and skipped). */
  emit(key: string, value: T): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    for (const listener of [...entry.listeners]) {
      try {
        listener(value);
      } catch (error) {
        this.#log.warn({ err: error, runId: key }, `${this.#what} listener threw`);
      }
    }
  }

  /** Delivers `value` to every listener of every key. */
  emitAll(value: T): void {
    for (const key of [...this.#entries.keys()]) this.emit(key, value);
  }

  /** Forgets every listener without detaching (the backend connection is going away). */
  clear(): void {
    this.#entries.clear();
  }

  #remove(key: string, listener: (value: T) => void, entry: Entry<T>): void {
    if (!entry.listeners.delete(listener) || entry.listeners.size > 0) return;
    if (this.#entries.get(key) !== entry) return;
    this.#entries.delete(key);
    this.#serial(key, () => this.#hooks.detach(key)).catch((error: unknown) => this.#log.warn({ err: error, runId: key }, `${this.#what}: detach failed`));
  }

  /** Runs `op` after every earlier attach/detach of the same key. */
  #serial(key: string, op: () => Promise<void>): Promise<void> {
    const previous = this.#ops.get(key) ?? Promise.resolve();
    const result = previous.then(op);
    const settled = result.catch(() => undefined);
    this.#ops.set(key, settled);
    void settled.then(() => {
      if (this.#ops.get(key) === settled) this.#ops.delete(key);
    });
    return result;
  }
}
