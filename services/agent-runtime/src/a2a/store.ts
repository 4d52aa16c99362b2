/**
 * The A2A module's own queries: the tasks (runs) of an assistant, across threads, for ListTasks.
 */
import type pg from 'pg';
import type { Run, RunStatus } from '../storage/runs.js';
import { filterClauses, type Json, type JsonObject, type MetadataFilter } from '../storage/sql.js';
import type { ThreadStatus } from '../storage/threads.js';
import type { TaskView } from './tasks.js';

const COLUMNS =
  'r.run_id, r.thread_id, r.assistant_id, r.status, r.metadata, r.kwargs, r.multitask_strategy, r.attempt, r.available_at, r.created_at, r.updated_at';

export interface TaskQuery {
  assistantId: string;
  threadId?: string;
  statuses?: RunStatus[];
  updatedAfter?: Date;
  /** Authorization filter on the threads' metadata. */
  filter?: MetadataFilter;
  limit: number;
  offset: number;
}

export class A2aStore {
  constructor(private readonly pool: pg.Pool) {}

  /** The tasks (what each is read from) of the assistant's runs, newest first, and how many match in all: one round trip per page. */
  async listTasks(query: TaskQuery): Promise<{ views: TaskView[]; total: number }> {
    const params: unknown[] = [query.assistantId];
    const where = ['r.assistant_id = $1'];
    if (query.threadId) {
      params.push(query.threadId);
      where.push(`r.thread_id = $${params.length}`);
    }
    if (query.statuses) {
      params.push(query.statuses);
      where.push(`r.status = ANY($${params.length}::text[])`);
    }
    if (query.updatedAfter) {
      params.push(query.updatedAfter);
      where.push(`r.updated_at >= $${params.length}`);
    }
    where.push(...filterClauses('t.metadata', query.filter, params));
    const from = `FROM runs r JOIN threads t ON t.thread_id = r.thread_id WHERE ${where.join(' AND ')}`;
    const { rows: counted } = await this.pool.query<{ total: number }>(`SELECT count(*)::int AS total ${from}`, params);
    params.push(query.limit, query.offset);
    const { rows } = await this.pool.query<
      Run & { output: Json | null; thread_status: ThreadStatus; thread_interrupts: JsonObject; thread_error: Json | null; latest_run_id: string }
    >(
      `SELECT ${COLUMNS}, r.output, t.status AS thread_status, t.interrupts AS thread_interrupts, t.error AS thread_error,
         (SELECT l.run_id FROM runs l WHERE l.thread_id = r.thread_id ORDER BY l.created_at DESC LIMIT 1) AS latest_run_id
       ${from} ORDER BY r.created_at DESC, r.run_id DESC LIMIT $${params.length - 1} OFFSET $${params.length}`,
      params,
    );
    const views = rows.map(({ output, thread_status, thread_interrupts, thread_error, latest_run_id, ...run }) => ({
      run,
      output,
      thread: { status: thread_status, interrupts: thread_interrupts, error: thread_error },
      latestRunId: latest_run_id,
    }));
    return { views, total: counted[0]!.total };
  }
}
