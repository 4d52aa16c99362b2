/**
 * Revision logs go to Postgres in batches: lines queue and one INSERT takes all of them, so a
 * chatty install or agent server does not cost a round trip per line. The end of a revision's log
 * queues behind its lines and is written with them (followers learn of both at once).
 */
import type { Logger } from '@berth/log';
import type { LogLine, LogStore } from './log-store.js';

/** Longest a line is kept (longer ones are cut). */
const MAX_LINE = 4000;

export type RevisionLog = (line: string, level?: 'info' | 'warn' | 'error') => void;

export class RevisionLogWriter {
  private queue: LogLine[] = [];
  private ended = new Set<string>();
  private writing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: LogStore,
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

  /** Ends a revision's log after the lines queued so far: its followers are told nothing more comes. */
  end(revisionId: string): void {
    this.ended.add(revisionId);
    this.timer ??= setTimeout(() => void this.flush(), this.delayMs);
  }

  /** Writes everything queued so far. */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.writing) await this.writing;
    if (!this.queue.length && !this.ended.size) return;
    const batch = this.queue;
    const ended = [...this.ended];
    this.queue = [];
    this.ended = new Set();
    this.writing = this.store
      .append(batch, ended)
      .catch((error: unknown) => this.log.warn({ err: error, lines: batch.length, ended }, 'writing revision logs failed'))
      .finally(() => (this.writing = undefined));
    await this.writing;
  }

  async close(): Promise<void> {
    await this.flush();
  }
}
