/**
 * Reading and following the build and deploy logs of revisions. A follower reads what is there,
 * then waits for the NOTIFY its revision's writers send on commit (REVISION_LOGS_CHANNEL, through
 * the control plane's NotificationHub) and reads on from the last id it sent: no
 * poll, and, since writers of one revision take turns (LogStore.append), no line is
 * skipped or sent twice. It ends when the revision's log ends (the end is written with its last
 * lines) or the revision is gone.
 */
import type { NotificationHub } from './notification-hub.js';
import type { LogEntryRow, LogQuery } from './log-store.js';
import { REVISION_LOGS_CHANNEL } from './notifications.js';
import type { DeploymentStore } from './store.js';

export interface RevisionLogsOptions {
  /**
   * Most entries a follower sends in one message.
   * @default 500
   */
  followBatch?: number;
}

/** Which log of which revision, from where (a revision id of '' means the deployment's latest). */
export interface LogSelector {
  revisionId?: string;
  type?: 'build' | 'deploy';
  /** Entries with an id above this. */
  offset: number;
  since?: Date;
  /** Above 0: the last this many entries (a follow starts with them), not the first. */
  tail?: number;
}

/** One message of a follow: entries in order, or (last) the end of the log. */
export interface FollowedLogs {
  revisionId: string;
  logs: LogEntryRow[];
  ended: boolean;
}

export class RevisionLogs {
  private readonly batch: number;

  /** @param hub listens on REVISION_LOGS_CHANNEL and limits the streams of each tenant */
  constructor(
    private readonly store: DeploymentStore,
    private readonly hub: NotificationHub,
    options: RevisionLogsOptions = {},
  ) {
    this.batch = options.followBatch ?? 500;
  }

  /** The revision a selector names, checked to be the tenant's (NotFoundError otherwise). */
  private async revisionOf(tenantId: string, deploymentId: string, revisionId: string | undefined): Promise<string> {
    const deployment = await this.store.get(tenantId, deploymentId);
    // As stored (lower case): notifications name it so.
    return (await this.store.revision(deployment.id, revisionId || deployment.latest_revision_id!)).id;
  }

  /**
   * One page of a revision's log, oldest first, and the offset to read on from: the first `limit`
   * entries after `offset`, the last `tail` ones, or the last `limit` before the entry `before`
   * (paging backwards from a line).
   */
  async read(
    tenantId: string,
    deploymentId: string,
    query: LogSelector & { limit: number; until?: Date; before?: number },
  ): Promise<{ logs: LogEntryRow[]; nextOffset: number; revisionId: string }> {
    const revisionId = await this.revisionOf(tenantId, deploymentId, query.revisionId);
    const logs = await this.store.logs.read(revisionId, {
      ...this.logQuery(query, query.tail || query.limit, query.until),
      ...(query.before ? { beforeId: query.before } : {}),
      ...(query.tail || query.before ? { newest: true } : {}),
    });
    return { logs, nextOffset: logs.length ? Number(logs.at(-1)!.id) : query.offset, revisionId };
  }

  /**
   * The entries of a revision's log there are, then each as it is written, until the log ends
   * (the last message says `ended`) or `signal` aborts.
   * @throws NotFoundError for a deployment or revision that is not the tenant's
   * @throws ResourceExhaustedError when the tenant holds as many streams as it may (NotificationHub)
   * @throws UnavailableError when this control plane cannot listen for new lines
   */
  async *follow(tenantId: string, deploymentId: string, query: LogSelector, signal: AbortSignal): AsyncGenerator<FollowedLogs> {
    const revisionId = await this.revisionOf(tenantId, deploymentId, query.revisionId);
    const subscription = await this.hub.subscribe(tenantId, REVISION_LOGS_CHANNEL, revisionId);
    try {
      let offset = query.offset;
      if (query.tail) {
        // Followed from the first of the last `tail` entries: the loop below sends them, then on.
        const [first] = await this.store.logs.read(revisionId, { ...this.logQuery(query, query.tail), newest: true });
        if (first) offset = Number(first.id) - 1;
      }
      const next = async () => {
        const logs = await this.store.logs.read(revisionId, this.logQuery({ ...query, offset }, this.batch));
        if (logs.length) offset = Number(logs.at(-1)!.id);
        return logs;
      };
      // The first message, entries or not, tells the caller the follow started.
      let first = true;
      while (!signal.aborted) {
        subscription.reset();
        const logs = await next();
        if (logs.length || first) yield { revisionId, logs, ended: false };
        first = false;
        if (logs.length === this.batch) continue;
        if ((await this.store.logs.ended(revisionId)) !== false) {
          // The end commits with the last lines, maybe after the read above: read those, then end.
          for (let rest = await next(); rest.length; rest = await next()) yield { revisionId, logs: rest, ended: false };
          yield { revisionId, logs: [], ended: true };
          return;
        }
        await subscription.wait(signal);
      }
    } finally {
      subscription.close();
    }
  }

  private logQuery(query: LogSelector, limit: number, until?: Date): LogQuery {
    return {
      afterId: query.offset,
      limit,
      ...(query.type ? { type: query.type } : {}),
      ...(query.since ? { since: query.since } : {}),
      ...(until ? { until } : {}),
    };
  }
}
