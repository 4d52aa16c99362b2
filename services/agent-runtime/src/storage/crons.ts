/**
 * Crons: schedules that start runs. The tick that fires next is `next_run_date`; moving it with a
 * compare-and-set (advance) is what makes a tick fire once across workers and replicas.
 */
import type pg from 'pg';
import { NotFoundError } from '@berth/errors';
import { containsClause, filterClauses, jsonParam, orderBy, type JsonObject, type MetadataFilter } from './sql.js';

export interface Cron {
  cron_id: string;
  assistant_id: string;
  thread_id: string | null;
  schedule: string;
  timezone: string | null;
  end_time: Date | null;
  enabled: boolean;
  on_run_completed: 'delete' | 'keep' | null;
  /** The run fields of each tick. */
  payload: JsonObject;
  metadata: JsonObject;
  user_id: string | null;
  next_run_date: Date | null;
  created_at: Date;
  updated_at: Date;
}

export type NewCron = Omit<Cron, 'created_at' | 'updated_at'>;
/** What a PATCH may change; `metadata` is merged, the rest replaced. */
export type CronChanges = Partial<Pick<Cron, 'schedule' | 'timezone' | 'end_time' | 'enabled' | 'on_run_completed' | 'payload' | 'metadata' | 'next_run_date'>>;

export interface CronQuery {
  assistant_id?: string;
  thread_id?: string;
  enabled?: boolean;
  metadata?: JsonObject;
  /** Authorization filter on the cron's metadata. */
  filter?: MetadataFilter;
}

const SORTABLE = ['cron_id', 'assistant_id', 'thread_id', 'next_run_date', 'end_time', 'created_at', 'updated_at'] as const;
const PATCHABLE = [
  'schedule',
  'timezone',
  'end_time',
  'enabled',
  'on_run_completed',
  'payload',
  'metadata',
  'next_run_date',
] as const satisfies readonly (keyof CronChanges)[];
const COLUMNS =
  'cron_id, assistant_id, thread_id, schedule, timezone, end_time, enabled, on_run_completed, payload, metadata, user_id, next_run_date, created_at, updated_at';

export class CronStore {
  constructor(private readonly pool: pg.Pool) {}

  /** Inserts a cron; NotFoundError when its thread does not exist (or not for `threadFilter`). */
  async create(cron: NewCron, threadFilter?: MetadataFilter): Promise<Cron> {
    const params: unknown[] = [
      cron.cron_id,
      cron.assistant_id,
      cron.thread_id,
      cron.schedule,
      cron.timezone,
      cron.end_time,
      cron.enabled,
      cron.on_run_completed,
      jsonParam(cron.payload),
      jsonParam(cron.metadata),
      cron.user_id,
      cron.next_run_date,
    ];
    // The thread check and the insert are one statement: a thread deleted meanwhile takes its cron along (FK).
    const thread = cron.thread_id
      ? `WHERE EXISTS (SELECT 1 FROM threads t WHERE t.thread_id = $3::uuid ${filterClauses('t.metadata', threadFilter, params)
          .map((c) => `AND ${c}`)
          .join(' ')})`
      : '';
    const { rows } = await this.pool.query<Cron>(
      `INSERT INTO crons (cron_id, assistant_id, thread_id, schedule, timezone, end_time, enabled, on_run_completed, payload, metadata, user_id, next_run_date)
       SELECT $1::uuid, $2::uuid, $3::uuid, $4::text, $5::text, $6::timestamptz, $7::boolean, $8::text, $9::jsonb, $10::jsonb, $11::text, $12::timestamptz ${thread}
       RETURNING ${COLUMNS}`,
      params,
    );
    if (!rows[0]) throw new NotFoundError(`Thread with ID ${cron.thread_id} not found`);
    return rows[0];
  }

  /** The cron; NotFoundError when missing or outside `filter`. */
  async get(cronId: string, filter?: MetadataFilter): Promise<Cron> {
    const cron = await this.find(cronId, filter);
    if (!cron) throw new NotFoundError(`Cron ${cronId} not found`);
    return cron;
  }

  async find(cronId: string, filter?: MetadataFilter): Promise<Cron | undefined> {
    const params: unknown[] = [cronId];
    const where = ['cron_id = $1', ...filterClauses('metadata', filter, params)].join(' AND ');
    const { rows } = await this.pool.query<Cron>(`SELECT ${COLUMNS} FROM crons WHERE ${where}`, params);
    return rows[0];
  }

  async patch(cronId: string, changes: CronChanges, filter?: MetadataFilter): Promise<Cron> {
    const params: unknown[] = [cronId];
    const sets = ['updated_at = now()'];
    for (const column of PATCHABLE) {
      const value = changes[column];
      if (value === undefined) continue;
      const json = column === 'payload' || column === 'metadata';
      params.push(json ? jsonParam(value) : value);
      sets.push(column === 'metadata' ? `metadata = metadata || $${params.length}::jsonb` : `${column} = $${params.length}${json ? '::jsonb' : ''}`);
    }
    const where = ['cron_id = $1', ...filterClauses('metadata', filter, params)].join(' AND ');
    const { rows } = await this.pool.query<Cron>(`UPDATE crons SET ${sets.join(', ')} WHERE ${where} RETURNING ${COLUMNS}`, params);
    if (!rows[0]) throw new NotFoundError(`Cron ${cronId} not found`);
    return rows[0];
  }

  async delete(cronId: string, filter?: MetadataFilter): Promise<void> {
    const params: unknown[] = [cronId];
    const where = ['cron_id = $1', ...filterClauses('metadata', filter, params)].join(' AND ');
    const { rowCount } = await this.pool.query(`DELETE FROM crons WHERE ${where}`, params);
    if (!rowCount) throw new NotFoundError(`Cron ${cronId} not found`);
  }

  async search(query: CronQuery & { limit: number; offset: number; sort_by?: string; sort_order?: string }): Promise<Cron[]> {
    const params: unknown[] = [];
    const where = this.filters(query, params);
    params.push(query.limit, query.offset);
    const { rows } = await this.pool.query<Cron>(
      `SELECT ${COLUMNS} FROM crons ${where} ORDER BY ${orderBy(query.sort_by, SORTABLE, 'created_at', query.sort_order)}, cron_id
       LIMIT $${params.length - 1} OFFSET $${params.length}`,
      params,
    );
    return rows;
  }

  async count(query: CronQuery): Promise<number> {
    const params: unknown[] = [];
    const { rows } = await this.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM crons ${this.filters(query, params)}`, params);
    return rows[0]!.n;
  }

  /**
   * Moves an enabled cron's next tick from `due` to `next` (null: no more ticks). False when the
   * cron's next tick is no longer `due`: fired already, rescheduled, paused or deleted.
   */
  async advance(cronId: string, due: Date, next: Date | null): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      'UPDATE crons SET next_run_date = $3, updated_at = now() WHERE cron_id = $1 AND enabled AND next_run_date = $2',
      [cronId, due, next],
    );
    return rowCount === 1;
  }

  /** Enabled crons whose next tick was due more than `graceMs` ago: their tick job was lost or has not run. */
  async overdue(graceMs: number, limit = 1000): Promise<Pick<Cron, 'cron_id' | 'next_run_date'>[]> {
    const { rows } = await this.pool.query<Pick<Cron, 'cron_id' | 'next_run_date'>>(
      `SELECT cron_id, next_run_date FROM crons
       WHERE enabled AND next_run_date < now() - make_interval(secs => $1::double precision / 1000)
       ORDER BY next_run_date LIMIT $2`,
      [graceMs, limit],
    );
    return rows;
  }

  private filters(query: CronQuery, params: unknown[]): string {
    const where = [...containsClause('metadata', query.metadata, params), ...filterClauses('metadata', query.filter, params)];
    for (const column of ['assistant_id', 'thread_id', 'enabled'] as const) {
      if (query[column] === undefined) continue;
      params.push(query[column]);
      where.push(`${column} = $${params.length}`);
    }
    return where.length ? `WHERE ${where.join(' AND ')}` : '';
  }
}
