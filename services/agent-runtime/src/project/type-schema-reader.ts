/**
 * Reads graphs' TypeScript-declared schemas (type-schemas.ts) in a worker thread: type-checking a
 * module takes seconds, which must not stall the server. Jobs run one at a time (a queue), each
 * within a time limit; a job over it has its worker terminated and reads as null (the caller keeps
 * the schema it derives at runtime). The worker is started for the first job and ended when the
 * queue is empty, so its memory is held only while it works. Results are cached per graph export.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { systemClock, type Clock, type Timer } from '@berth/clock';
import type { Logger } from '@berth/log';
import type { GraphTypeSchemas } from './type-schemas.js';
import type { TypeSchemaAnswer, TypeSchemaJob } from './type-schemas-worker.js';

/**
 * From sources (tests, `tsx`) the worker is TypeScript too: a small bootstrap registers tsx's loader
 * in the worker thread (Node 20 does not carry `--import` loaders into workers), then loads it.
 */
const FROM_SOURCE = import.meta.url.endsWith('.ts');
function startThread(): Worker {
  if (!FROM_SOURCE) return new Worker(new URL('./type-schemas-worker.js', import.meta.url));
  // By path: the ESM build (resolving `tsx/esm/api` from here would give the CommonJS one).
  const tsxApi = pathToFileURL(join(dirname(createRequire(import.meta.url).resolve('tsx/package.json')), 'dist/esm/api/index.mjs')).href;
  const script = new URL('./type-schemas-worker.ts', import.meta.url).href;
  return new Worker(`import(${JSON.stringify(tsxApi)}).then(({ register }) => { register(); return import(${JSON.stringify(script)}); });`, { eval: true });
}

export interface TypeSchemaReaderOptions {
  log: Logger;
  /** Longest one graph module's type check may take. @default 60_000 */
  timeoutMs?: number;
  /** The time limit runs on. @default systemClock */
  clock?: Clock;
}

interface Pending {
  key: string;
  job: TypeSchemaJob;
  graphId: string;
  resolve: (schemas: GraphTypeSchemas | null) => void;
}

export class TypeSchemaReader {
  private readonly cache = new Map<string, Promise<GraphTypeSchemas | null>>();
  private readonly queue: Pending[] = [];
  private worker: Worker | undefined;
  private current: { pending: Pending; timer: Timer; started: number } | undefined;
  private nextId = 1;
  private closed = false;
  private readonly clock: Clock;

  constructor(private readonly options: TypeSchemaReaderOptions) {
    this.clock = options.clock ?? systemClock;
  }

  /**
   * The schemas declared by export `exportName` of `sourceFile` (read once; later calls share the
   * result), null when they cannot be read in time. Never rejects. With `urgent` (someone waits for
   * the answer), a job still queued moves to the front, ahead of those begun for later.
   */
  read(graphId: string, sourceFile: string, exportName: string, urgent = false): Promise<GraphTypeSchemas | null> {
    const key = `${sourceFile}#${exportName}`;
    let result = this.cache.get(key);
    if (!result) {
      result = new Promise((resolve) => {
        if (this.closed) return resolve(null);
        const pending = { key, job: { id: this.nextId++, sourceFile, exportName }, graphId, resolve };
        if (urgent) this.queue.unshift(pending);
        else this.queue.push(pending);
        this.startNext();
      });
      this.cache.set(key, result);
    } else if (urgent) {
      const index = this.queue.findIndex((pending) => pending.key === key);
      if (index > 0) this.queue.unshift(...this.queue.splice(index, 1));
    }
    return result;
  }

  /** Ends the worker; jobs not done read as null. */
  async close(): Promise<void> {
    this.closed = true;
    for (const pending of this.queue.splice(0)) pending.resolve(null);
    if (this.current) this.finish(this.current.pending.job.id, null);
    await this.stopWorker();
  }

  private startNext(): void {
    if (this.current || this.closed) return;
    const pending = this.queue.shift();
    if (!pending) {
      void this.stopWorker();
      return;
    }
    const worker = this.worker ?? this.startWorker();
    const timeoutMs = this.options.timeoutMs ?? 60_000;
    const timer = this.clock.setTimeout(() => {
      this.options.log.warn(
        { graph_id: pending.graphId, timeout_ms: timeoutMs },
        "reading the graph's TypeScript types took too long: its schemas list channel names only",
      );
      this.finish(pending.job.id, null);
      void this.stopWorker().then(() => this.startNext());
    }, timeoutMs);
    this.current = { pending, timer, started: this.clock.now() };
    worker.postMessage(pending.job);
  }

  private startWorker(): Worker {
    const worker = startThread();
    worker.unref(); // Never what keeps the process alive.
    worker.on('message', (answer: TypeSchemaAnswer) => {
      if (answer.id !== this.current?.pending.job.id) return;
      if ('error' in answer) {
        this.options.log.warn(
          { graph_id: this.current.pending.graphId, err: answer.error },
          "cannot read the graph's TypeScript types: its schemas list channel names only",
        );
        this.finish(answer.id, null);
      } else {
        this.options.log.debug(
          { graph_id: this.current.pending.graphId, ms: this.clock.now() - this.current.started },
          'read graph schemas from TypeScript types',
        );
        this.finish(answer.id, answer.schemas);
      }
      this.startNext();
    });
    worker.on('error', (error) => {
      this.options.log.warn({ err: error }, 'the TypeScript type worker failed: schemas list channel names only');
      if (this.worker === worker) this.worker = undefined;
      if (this.current) this.finish(this.current.pending.job.id, null);
      this.startNext();
    });
    this.worker = worker;
    return worker;
  }

  private finish(id: number, schemas: GraphTypeSchemas | null): void {
    if (this.current?.pending.job.id !== id) return;
    this.current.timer.cancel();
    this.current.pending.resolve(schemas);
    this.current = undefined;
  }

  private async stopWorker(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }
}
