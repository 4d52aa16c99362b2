/**
 * How `berth deploy` reports what happens — as lines for a person or, with `--json`, as one JSON
 * event per line for scripts — and the loop that follows a revision until it settles.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { GatewayHttpError } from '../client.js';
import { isTerminal, type DeploymentsApi, type LogEntry, type Revision } from './api.js';
import { formatLog } from './log-line.js';

type Print = (line: string) => void;

/** What `--json` prints, one object per line. */
export type DeployEvent =
  | { type: 'note'; message: string }
  | { type: 'step'; message: string }
  | { type: 'upload_progress'; bytes: number; total: number }
  | { type: 'status'; status: string; revision_id: string; status_message: string }
  | { type: 'log'; id: number; timestamp: string; level: string; message: string; log_type: string }
  | {
      type: 'result';
      status: 'succeeded' | 'failed' | 'timed_out' | 'submitted';
      deployment_id: string;
      revision_id: string;
      deployment_url: string;
      revision_status?: string;
      status_message?: string;
    };

export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${bytes} B`;
}

export class Reporter {
  private lastUploadLine = 0;

  constructor(
    readonly json: boolean,
    private readonly print: Print,
    private readonly now: () => number = Date.now,
  ) {}

  emit(event: DeployEvent): void {
    if (this.json) {
      this.print(JSON.stringify(event));
      return;
    }
    switch (event.type) {
      case 'note':
        this.print(`note: ${event.message}`);
        break;
      case 'step':
        this.print(event.message);
        break;
      case 'upload_progress': {
        // A line per second at most (and the last one): a log file must not fill with progress.
        const done = event.bytes >= event.total;
        if (!done && this.now() - this.lastUploadLine < 1000) return;
        this.lastUploadLine = this.now();
        const percent = event.total ? Math.floor((event.bytes / event.total) * 100) : 100;
        this.print(`  uploaded ${formatBytes(event.bytes)} of ${formatBytes(event.total)} (${percent}%)`);
        break;
      }
      case 'status':
        this.print(`Revision ${event.revision_id}: ${event.status}${event.status_message ? ` (${event.status_message})` : ''}`);
        break;
      case 'log':
        this.print(`  ${formatLog({ ...event, type: event.log_type })}`);
        break;
      case 'result':
        // The command prints its own summary in text mode.
        break;
    }
  }

  note(message: string): void {
    this.emit({ type: 'note', message });
  }

  step(message: string): void {
    this.emit({ type: 'step', message });
  }
}

export interface WatchOptions {
  /** @default 1000 */
  pollMs?: number;
  /** Give up (`timedOut`) after this long. */
  timeoutMs: number;
  /** Consecutive failed polls tolerated (a gateway restarting) before the error is thrown. @default 5 */
  maxFailures?: number;
}

export interface WatchOutcome {
  revision: Revision;
  timedOut: boolean;
  /** The last entries seen (up to 30), oldest first, for a failure summary. */
  tail: LogEntry[];
}

/** Lines of a failed revision's log shown in the failure summary. */
export const TAIL_LINES = 30;

/**
 * Polls a revision until it is DEPLOYED, failed or interrupted (or the time is up), reporting
 * each status change and each new build/deploy log line as it comes. The status is read before
 * the logs, so the last lines a failing build wrote are always reported before the end.
 */
export async function watchRevision(
  api: DeploymentsApi,
  deploymentId: string,
  revisionId: string,
  reporter: Reporter,
  options: WatchOptions,
): Promise<WatchOutcome> {
  const pollMs = options.pollMs ?? 1000;
  const deadline = Date.now() + options.timeoutMs;
  const maxFailures = options.maxFailures ?? 5;
  const tail: LogEntry[] = [];
  let offset = 0;
  let lastStatus = '';
  let failures = 0;
  for (;;) {
    let revision: Revision;
    try {
      revision = await api.revision(deploymentId, revisionId);
      for (;;) {
        const page = await api.logs(deploymentId, { revisionId, offset, limit: 1000 });
        for (const entry of page.logs) {
          reporter.emit({ type: 'log', id: entry.id, timestamp: entry.timestamp, level: entry.level, message: entry.message, log_type: entry.type });
          tail.push(entry);
          if (tail.length > TAIL_LINES) tail.shift();
        }
        offset = Math.max(offset, page.next_offset);
        if (page.logs.length < 1000) break;
      }
      failures = 0;
    } catch (error) {
      // Answers about the request itself (401, 404, 422) will not get better by asking again.
      if (error instanceof GatewayHttpError && error.status < 500) throw error;
      if (++failures >= maxFailures) throw error;
      await sleep(pollMs);
      continue;
    }
    if (revision.status !== lastStatus) {
      lastStatus = revision.status;
      reporter.emit({ type: 'status', status: revision.status, revision_id: revision.id, status_message: revision.status_message });
    }
    if (isTerminal(revision.status)) return { revision, timedOut: false, tail };
    if (Date.now() >= deadline) return { revision, timedOut: true, tail };
    await sleep(pollMs);
  }
}
