/**
 * Revision logs go to Postgres in batches: lines queue and one INSERT takes all of them, so a
 * chatty install or agent server does not cost a round trip per line.
 */
import type { Logger } from '@berth/log';
import type { DeploymentStore, LogLine } from './store.js';

/** Longest a line is kept (longer ones are cut). */
const MAX_LINE = 4000;

export type RevisionLog = (line: string, level?: 'info' | 'warn' | 'error') => void;

export class RevisionLogWriter {
  private queue: LogLine[] = [];
  private writing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: DeploymentStore,
    private readonly log: Logger,
    private readonly delayMs = 200,
  ) {}

  /** A log function writing into one revision's build or deploy log. */
  for(revisionId: string, type: 'build' | 'deploy'): RevisionLog {
    return (line, level = 'info') => {
      for (const part of line.split('\n')) {
        if (part.trim()) this.queue.push({ revision_id: revisionId, type, level, message: part.slice(0, MAX_LINE) });
      }
      this.timer ??= setTimeout(() => void this.flush(), this.delayMs);
    };
  }

  /** Writes everything queued so far. */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.writing) await this.writing;
    if (!this.queue.length) return;
    const batch = this.queue;
    this.queue = [];
    this.writing = this.store
      .appendLogs(batch)
      .catch((error: unknown) => this.log.warn({ err: error, lines: batch.length }, 'writing revision logs failed'))
      .finally(() => (this.writing = undefined));
    await this.writing;
  }

  async close(): Promise<void> {
    await this.flush();
  }
}
