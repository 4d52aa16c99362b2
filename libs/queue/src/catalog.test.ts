// Argument checks that need no server: catalog definitions, queue names, worker options.
import { describe, expect, it } from '@jest/globals';
import { InvalidArgumentError } from '@berth/errors';
import { z } from 'zod';
import { defineJobCatalog, JobQueue, JobWorker, type JobHandlers, type QueueBackendConfig } from './index.js';

const schema = z.object({ id: z.string() });
const backend: QueueBackendConfig = { kind: 'redis', url: 'redis://127.0.0.1:1' };

describe('defineJobCatalog', () => {
  it('keeps the definitions and their names, frozen', () => {
    const catalog = defineJobCatalog({ a: { schema }, 'b.c': { schema, attempts: 3, backoff: { type: 'fixed', delayMs: 10 } } });
    expect(catalog.names).toEqual(['a', 'b.c']);
    expect(catalog.definitions['b.c'].attempts).toBe(3);
    expect(Object.isFrozen(catalog.definitions)).toBe(true);
  });

  it.each([
    ['no job', {}],
    ['a bad name', { 'a:b': { schema } }],
    ['no schema', { a: { schema: {} } }],
    ['zero attempts', { a: { schema, attempts: 0 } }],
    ['a fractional attempt count', { a: { schema, attempts: 1.5 } }],
    ['an unknown backoff', { a: { schema, backoff: { type: 'linear', delayMs: 1 } } }],
    ['a negative backoff', { a: { schema, backoff: { type: 'fixed', delayMs: -1 } } }],
    ['a zero timeout', { a: { schema, timeoutMs: 0 } }],
  ])('rejects %s', (_what, definitions) => {
    expect(() => defineJobCatalog(definitions as never)).toThrow(InvalidArgumentError);
  });
});

describe('JobQueue and JobWorker arguments', () => {
  const catalog = defineJobCatalog({ a: { schema }, b: { schema } });
  const handlers: JobHandlers<typeof catalog> = { a: async ({ id }) => id, b: async () => undefined };

  it('rejects queue names the backends would not both accept', () => {
    for (const name of ['', 'a:b', 'a b', '-a']) {
      expect(() => new JobQueue(catalog, name, backend)).toThrow(InvalidArgumentError);
      expect(() => new JobWorker(catalog, name, backend, handlers)).toThrow(InvalidArgumentError);
    }
  });

  it('rejects a missing handler and bad options before connecting', () => {
    expect(() => new JobWorker(catalog, 'q', backend, { a: handlers.a } as never)).toThrow(/no handler for job 'b'/);
    expect(() => new JobWorker(catalog, 'q', backend, handlers, { concurrency: 0 })).toThrow(InvalidArgumentError);
    expect(() => new JobWorker(catalog, 'q', backend, handlers, { lockDurationMs: 1.5 })).toThrow(InvalidArgumentError);
    expect(() => new JobWorker(catalog, 'q', backend, handlers, { maxStalledCount: -1 })).toThrow(InvalidArgumentError);
  });

  it('types payloads and handlers from the catalog (checked by tsc -p tsconfig.tests.json)', () => {
    const typeChecks = (queue: JobQueue<typeof catalog>): JobHandlers<typeof catalog> => {
      void queue.enqueue('a', { id: 'x' });
      // @ts-expect-error: not a job of the catalog
      void queue.enqueue('zzz', { id: 'x' });
      // @ts-expect-error: wrong payload type
      void queue.enqueue('a', { id: 1 });
      return {
        a: async (payload) => payload.id.toUpperCase(),
        // @ts-expect-error: no such payload field
        b: async (payload) => payload.nope,
      };
    };
    expect(typeof typeChecks).toBe('function');
  });
});
