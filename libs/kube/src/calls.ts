/**
 * Calls that wait or race: per-call abort signals, abortable sleeps and polls, and writes under
 * optimistic concurrency (read, write at the resourceVersion read, and on a 409 read again).
 */
import { Observable, type ConfigurationOptions, type RequestContext, type ResponseContext, type V1ObjectMeta } from '@kubernetes/client-node';
import { isStatus } from './errors.js';

export type Named = { metadata?: V1ObjectMeta };

/** Per-call options (the last argument of every typed client method) that tie the HTTP request to `signal`. */
export function callOptions(signal: AbortSignal): ConfigurationOptions {
  return {
    middleware: [
      {
        pre: (context: RequestContext) => {
          context.setSignal(signal);
          return new Observable(Promise.resolve(context));
        },
        post: (response: ResponseContext) => new Observable(Promise.resolve(response)),
      },
    ],
    middlewareMergeStrategy: 'append',
  };
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Thrown by {@link poll} when the time is up. */
export class PollTimeoutError extends Error {
  override readonly name = 'PollTimeoutError';
}

/**
 * Calls `check` every `intervalMs` until it returns a value other than undefined, and returns
 * that; a `check` that throws ends the wait with its error. After `timeoutMs`, PollTimeoutError.
 */
export async function poll<T>(
  check: () => Promise<T | undefined>,
  options: { timeoutMs: number; intervalMs: number; signal: AbortSignal; what: string },
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const result = await check();
    if (result !== undefined) return result;
    const left = deadline - Date.now();
    if (left <= 0) throw new PollTimeoutError(`${options.what} did not happen within ${formatMs(options.timeoutMs)}`);
    await sleep(Math.min(options.intervalMs, left), options.signal);
  }
}

/** `500ms`, `30s`: a duration for messages. */
export function formatMs(ms: number): string {
  return ms < 1000 ? `${ms}ms` : `${Math.round(ms / 1000)}s`;
}

/** Only what a write may carry over from a read object (no uid, status or managed fields). */
export function writable<T extends Named>(object: T): T {
  const { name, namespace, labels, annotations } = object.metadata ?? {};
  const { status: _status, ...rest } = object as T & { status?: unknown };
  return { ...rest, metadata: { name, namespace, labels, annotations } } as T;
}

/** One kind of object, as read/create/replace/delete/list on the typed clients, in one namespace. */
export interface KindApi<T extends Named> {
  kind: string;
  read(name: string): Promise<T>;
  create(body: T): Promise<T>;
  replace(name: string, body: T): Promise<T>;
  remove(name: string): Promise<unknown>;
  list(labelSelector: string): Promise<T[]>;
}

/** The object, or undefined when it does not exist. */
export async function findObject<T extends Named>(kind: KindApi<T>, name: string): Promise<T | undefined> {
  try {
    return await kind.read(name);
  } catch (error) {
    if (isStatus(error, 404)) return undefined;
    throw error;
  }
}

/** Deletes the object; true when it was there, false when it already was not. */
export async function removeObject(kind: Pick<KindApi<Named>, 'remove'>, name: string): Promise<boolean> {
  try {
    await kind.remove(name);
    return true;
  } catch (error) {
    if (isStatus(error, 404)) return false;
    throw error;
  }
}

/**
 * Retries of a write that lost an optimistic-concurrency race.
 * @default 4
 */
export const WRITE_ATTEMPTS = 4;

export interface ApplyOptions<T> {
  /** What is stored now (read earlier); undefined creates. */
  existing: T | undefined;
  /** Told before each write ("creating", "replacing"), for a deploy log. */
  onWrite?: (action: 'creating' | 'replacing', kind: string, name: string) => void;
  /** Carries over from the stored object what must not change (a Service's cluster IP). */
  keep?: (body: T, existing: T) => T;
}

/** Creates the object, or replaces it (at the resourceVersion read) when it exists; a lost race reads again and retries. */
export async function createOrReplace<T extends Named>(kind: KindApi<T>, body: T, options: ApplyOptions<T>): Promise<T> {
  const name = body.metadata!.name!;
  let current = options.existing;
  for (let attempt = 1; ; attempt++) {
    try {
      if (!current) {
        options.onWrite?.('creating', kind.kind, name);
        return await kind.create(body);
      }
      options.onWrite?.('replacing', kind.kind, name);
      const next = options.keep ? options.keep(body, current) : body;
      return await kind.replace(name, { ...next, metadata: { ...next.metadata, resourceVersion: current.metadata?.resourceVersion } });
    } catch (error) {
      // Lost a race with another writer (or a create met an object made meanwhile): read again and retry.
      if (attempt >= WRITE_ATTEMPTS || !isStatus(error, 409)) throw error;
      current = await findObject(kind, name);
    }
  }
}
