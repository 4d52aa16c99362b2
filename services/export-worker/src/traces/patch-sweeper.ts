/**
 * Deletes run patches that waited too long for their create (a client that lost the create
 * never sends it), and whatever else waits for runs (feedback), on a timer. Every replica may
 * sweep: the DELETE is idempotent.
 */
import type { Logger } from '@berth/log';
import type { TraceStore } from './trace-store.js';

export const DEFAULT_PENDING_PATCH_MAX_AGE_HOURS = 24;

export class PendingPatchSweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  /**
   * @param maxAgeMs a patch older than this is deleted
   * @param intervalMs time between sweeps; @default a quarter of maxAgeMs, at most an hour
   */
  constructor(
    private readonly store: Pick<TraceStore, 'sweepPendingPatches'>,
    private readonly logger: Logger,
    private readonly maxAgeMs: number,
    private readonly intervalMs = Math.min(maxAgeMs / 4, 3_600_000),
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.sweep(), this.intervalMs).unref();
  }

  /** One sweep now; answers how many patches went (0 when one is already running). */
  async sweep(): Promise<number> {
    if (this.running) return 0;
    let swept = 0;
    this.running = (async () => {
      try {
        swept = await this.store.sweepPendingPatches(this.maxAgeMs);
        if (swept > 0) this.logger.warn({ swept, maxAgeMs: this.maxAgeMs }, 'deleted run patches (or feedback) whose run never arrived');
      } catch (error) {
        // The next sweep retries; nothing is lost by waiting.
        this.logger.error({ err: error }, 'sweeping pending run patches failed');
      }
    })();
    await this.running;
    this.running = undefined;
    return swept;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
