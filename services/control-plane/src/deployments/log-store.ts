/**
 * The build and deploy logs of revisions in Postgres (the control plane's schema): written in
 * batches by the log writer, read by page and by followers (revision-logs.ts), whom each write
 * wakes through a NOTIFY.
 */
import { isForeignKeyViolation, sql, type Kysely } from '@berth/db';
import { REVISION_LOGS_CHANNEL, notify } from './notifications.js';
import type { DeploymentTables } from './tables.js';

export interface LogLine {
  revision_id: string;
  type: 'build' | 'deploy';
  level: 'info' | 'warn' | 'error';
  message: string;
}

export interface LogQuery {
  type?: 'build' | 'deploy';
  /** Entries with an id above this. */
  afterId: number;
  /** Entries with an id below this. */
  beforeId?: number;
  limit: number;
  /** The last `limit` entries of the selection rather than the first (still answered oldest first). */
  newest?: boolean;
  /** Written at or after this time. */
  since?: Date;
  /** Written before this time. */
  until?: Date;
}

export interface LogEntryRow {
  id: string;
  created_at: Date;
  level: 'info' | 'warn' | 'error';
  message: string;
  type: 'build' | 'deploy';
}

export class LogStore {
  constructor(private readonly db: Kysely<DeploymentTables>) {}

  /**
   * Appends log lines in order and ends the logs of `ended` after them, in one transaction that
   * announces each revision written to on REVISION_LOGS_CHANNEL. Writers of one revision take turns
   * (a lock per revision until commit), so its ids grow in commit order: a reader that saw id N has
   * seen every line of that revision below N, and a follower resuming after N misses none. Lines of
   * revisions no longer there are dropped: a deployment being deleted goes on printing (its agent
   * server stopping) after its revisions' rows are gone.
   */
  async append(lines: LogLine[], ended: string[] = []): Promise<void> {
    const revisions = [...new Set([...lines.map((l) => l.revision_id), ...ended])].sort();
    if (!revisions.length) return;
    const write = () =>
      this.db.transaction().execute(async (tx) => {
        // In one order, so that two writers of the same revisions never wait for each other in a circle.
        await sql`select pg_advisory_xact_lock(hashtextextended(id, 5167)) from (select id from unnest(${revisions}::text[]) as id order by id) as locked`.execute(
          tx,
        );
        if (lines.length) {
          await sql`
            INSERT INTO revision_logs (revision_id, type, level, message)
            SELECT (l.line->>'revision_id')::uuid, l.line->>'type', l.line->>'level', l.line->>'message'
            FROM jsonb_array_elements(${JSON.stringify(lines)}::jsonb) WITH ORDINALITY AS l(line, n)
            WHERE EXISTS (SELECT 1 FROM revisions r WHERE r.id = (l.line->>'revision_id')::uuid)
            ORDER BY l.n`.execute(tx);
        }
        if (ended.length) {
          await tx
            .updateTable('revisions')
            .set({ logs_ended_at: sql<Date>`clock_timestamp()` })
            .where('id', 'in', ended)
            .where('logs_ended_at', 'is', null)
            .execute();
        }
        await notify(tx, REVISION_LOGS_CHANNEL, revisions);
      });
    try {
      await write();
    } catch (error) {
      // A deletion committed between the check and the insert: once more, without its lines.
      if (!isForeignKeyViolation(error)) throw error;
      await write();
    }
  }

  /**
   * A revision's log entries between `afterId` and `beforeId`, optionally of one type and written
   * within [since, until): the first `limit` of them, or with `newest` the last; oldest first.
   */
  async read(revisionId: string, query: LogQuery): Promise<LogEntryRow[]> {
    let q = this.db
      .selectFrom('revision_logs')
      .select(['id', 'created_at', 'level', 'message', 'type'])
      .where('revision_id', '=', revisionId)
      .where('id', '>', String(query.afterId));
    if (query.type) q = q.where('type', '=', query.type);
    if (query.since) q = q.where('created_at', '>=', query.since);
    if (query.until) q = q.where('created_at', '<', query.until);
    if (query.beforeId) q = q.where('id', '<', String(query.beforeId));
    // Backwards along the (revision_id, id) index: the newest lines of a long log cost what the first do.
    if (query.newest) return (await q.orderBy('id', 'desc').limit(query.limit).execute()).reverse();
    return q.orderBy('id').limit(query.limit).execute();
  }

  /** Whether a revision's log ended (see REVISION_LOGS_CHANNEL); undefined when the revision is gone. */
  async ended(revisionId: string): Promise<boolean | undefined> {
    const row = await this.db.selectFrom('revisions').select('logs_ended_at').where('id', '=', revisionId).executeTakeFirst();
    return row && row.logs_ended_at !== null;
  }
}
