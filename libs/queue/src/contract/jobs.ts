/**
 * The catalog and small helpers shared by the queue contract suite and its child-process worker
 * (`child-worker.ts`). Test support only: excluded from the package build.
 */
import { z } from 'zod';
import { defineJobCatalog } from '../catalog.js';
import type { QueueBackendConfig } from '../backend.js';

export const contractJobs = defineJobCatalog({
  echo: { schema: z.object({ text: z.string().min(1), count: z.number().int().default(1) }), attempts: 2 },
  'flaky-fixed': { schema: z.object({ failTimes: z.number().int() }), attempts: 3, backoff: { type: 'fixed', delayMs: 300 } },
  'flaky-exponential': {
    schema: z.object({ failTimes: z.number().int() }),
    attempts: 3,
    backoff: { type: 'exponential', delayMs: 150 },
  },
  slow: { schema: z.object({ honourSignal: z.boolean() }), attempts: 2, timeoutMs: 250 },
  work: { schema: z.object({ index: z.number().int(), sleepMs: z.number().int() }), attempts: 2 },
  ephemeral: { schema: z.object({ text: z.string() }), removeOnComplete: true },
});

/** A catalog with the same job name but no schema: a producer that bypasses validation. */
export const looseJobs = defineJobCatalog({ echo: { schema: z.unknown(), attempts: 3 } });

/** What the parent test hands the child worker (JSON in `BERTH_QUEUE_CONTRACT_CHILD`). */
export interface ChildWorkerSpec {
  backend: QueueBackendConfig;
  queue: string;
  lockDurationMs: number;
  stalledIntervalMs: number;
}

export const CHILD_SPEC_ENV = 'BERTH_QUEUE_CONTRACT_CHILD';

/** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
