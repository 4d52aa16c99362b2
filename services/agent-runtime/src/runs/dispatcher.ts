/**
 * Puts run ids on the run queue (BullMQ, Postgres or Redis backend). The queue only says "look
 * at this run"; the runs table decides whether it may start, so duplicates are harmless.
 */
import { JobQueue, defineJobCatalog, type QueueBackendConfig } from '@berth/queue';
import type { Logger } from '@berth/log';
import { z } from 'zod';

export const RUN_QUEUE = 'agent-runs';

export const runJobs = defineJobCatalog({
  'run.execute': { schema: z.object({ run_id: z.uuid() }), removeOnComplete: true, removeOnFail: true },
  'thread.delete': { schema: z.object({ thread_id: z.uuid() }), removeOnComplete: true, removeOnFail: true },
});

/** How long the temporary thread of a threadless run outlives it, so waiters can still read its result. */
export const TEMPORARY_THREAD_GRACE_MS = 30_000;

export class RunDispatcher {
  private readonly queue: JobQueue<typeof runJobs>;

  constructor(backend: QueueBackendConfig, log: Logger) {
    this.queue = new JobQueue(runJobs, RUN_QUEUE, backend, { log });
  }

  async ready(): Promise<void> {
    await this.queue.ready();
  }

  async dispatch(runId: string, delayMs = 0): Promise<void> {
    await this.queue.enqueue('run.execute', { run_id: runId }, delayMs > 0 ? { delayMs } : {});
  }

  /** Deletes a threadless run's temporary thread once waiters have had time to read the result. */
  async deleteThreadLater(threadId: string, delayMs = TEMPORARY_THREAD_GRACE_MS): Promise<void> {
    await this.queue.enqueue('thread.delete', { thread_id: threadId }, { delayMs });
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
