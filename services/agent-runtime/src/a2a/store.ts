/**
 * The A2A module's own queries: the tasks (runs) of an assistant, across threads, for ListTasks.
 */
import type pg from 'pg';
import type { Run, RunStatus } from '../storage/runs.js';
import { filterClauses, type MetadataFilter } from '../storage/sql.js';

const COLUMNS = 'r.run_id, r.thread_id, r.assistant_id, r.status, r.metadata, r.kwargs, r.multitask_strategy, r.attempt, r.available_at, r.created_at, r.updated_at';

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

  /** Runs of the assistant, newest first, and how many match in all. */
  async listRuns(query: TaskQuery): Promise<{ runs: Run[]; total: number }> {
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
    const { rows } = await this.pool.query<Run>(`SELECT ${COLUMNS} ${from} ORDER BY r.created_at DESC, r.run_id DESC LIMIT $${params.length - 1} OFFSET $${params.length}`, params);
    return { runs: rows, total: counted[0]!.total };
  }
}
