/**
 * Pruning threads — `POST /threads/prune` and the TTL sweep of the worker role — by strategy:
 * `delete` removes a thread with its runs and checkpoints; `keep_latest` keeps the thread and the
 * latest checkpoint of each of its namespaces (with that checkpoint's pending writes and the
 * channel values it refers to) and removes the rest of its history. A thread with a pending or
 * running run is never pruned: its run may be writing checkpoints; the sweep takes it once the
 * run ended (the end of a run restarts its TTL anyway).
 */
import type pg from 'pg';
import type { Logger } from '@berth/log';
import { systemClock, type Clock } from '../runs/lease.js';
import { deleteCheckpointsOf } from './checkpoints.js';

export type PruneStrategy = 'delete' | 'keep_latest';

/**
 * SQL condition on a `threads` row: it may be pruned now. `status <> 'busy'` is re-checked on the
 * row a concurrent run creation just updated (which the NOT EXISTS of an older snapshot misses).
 */
export const PRUNABLE = `status <> 'busy' AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.thread_id = threads.thread_id AND r.status IN ('pending', 'running'))`;

/** Prunes threads the transaction of `client` has locked (FOR UPDATE) by `strategy`. */
export async function pruneLocked(client: pg.PoolClient, threadIds: readonly string[], strategy: PruneStrategy): Promise<void> {
  if (!threadIds.length) return;
  const ids = [threadIds];
  if (strategy === 'delete') {
    await deleteCheckpointsOf(client, threadIds);
    // Runs go with their thread (ON DELETE CASCADE).
    await client.query('DELETE FROM threads WHERE thread_id = ANY($1::uuid[])', ids);
    return;
  }
  await client.query(
    `DELETE FROM checkpoints c WHERE c.thread_id = ANY($1::text[])
       AND c.checkpoint_id < (SELECT max(k.checkpoint_id) FROM checkpoints k WHERE k.thread_id = c.thread_id AND k.checkpoint_ns = c.checkpoint_ns)`,
    ids,
  );
  await client.query(
    `DELETE FROM checkpoint_writes w WHERE w.thread_id = ANY($1::text[]) AND NOT EXISTS (
       SELECT 1 FROM checkpoints c WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)`,
    ids,
  );
  await client.query(
    `DELETE FROM checkpoint_blobs b WHERE b.thread_id = ANY($1::text[]) AND NOT EXISTS (
       SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns
         AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)`,
    ids,
  );
  // Nothing is left to prune until the thread's next activity sets its expiry again.
  await client.query('UPDATE threads SET expires_at = NULL WHERE thread_id = ANY($1::uuid[])', ids);
}

export interface ThreadSweeperOptions {
  /** Time between sweeps. @default 5 minutes */
  intervalMs?: number;
  /** Most threads pruned by one sweep (the next sweep takes the rest). @default 1000 */
  limit?: number;
  /** @default the system clock */
  clock?: Clock;
}

/** Prunes threads whose TTL expired, every `intervalMs` (the server's worker role runs one). */
export class ThreadSweeper {
  private timer: unknown;
  private running: Promise<void> | undefined;
  private closed = false;
  private readonly intervalMs: number;
  private readonly limit: number;
  private readonly clock: Clock;

  constructor(
    private readonly threads: { sweepExpired(now: Date, limit: number): Promise<{ deleted: number; trimmed: number }> },
    private readonly log: Logger,
    options: ThreadSweeperOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? 5 * 60_000;
    this.limit = options.limit ?? 1000;
    this.clock = options.clock ?? systemClock;
  }

  start(): void {
    if (this.timer !== undefined || this.closed) return;
    this.schedule();
  }

  /** Stops sweeping, after a pass in progress. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** Resolves once a pass in progress (if any) has finished. */
  async idle(): Promise<void> {
    await this.running;
  }

  /** One pass: prunes what is due by the clock's time. */
  private async sweep(): Promise<void> {
    try {
      const { deleted, trimmed } = await this.threads.sweepExpired(new Date(this.clock.now()), this.limit);
      if (deleted || trimmed) this.log.info({ deleted, trimmed }, 'threads past their TTL pruned');
    } catch (error) {
      // The next pass retries; an expired thread stays readable meanwhile.
      this.log.warn({ err: error }, 'thread TTL sweep failed');
    }
  }

  private schedule(): void {
    const timer = this.clock.setTimeout(() => {
      this.running = this.sweep().finally(() => {
        this.running = undefined;
        if (!this.closed) this.schedule();
      });
    }, this.intervalMs);
    (timer as { unref?: () => void }).unref?.();
    this.timer = timer;
  }
}
