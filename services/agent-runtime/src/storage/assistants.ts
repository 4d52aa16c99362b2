/**
 * Assistants and their versions. Every update makes version N+1 and activates it; activating an
 * older version copies its configuration back into the assistant, so later runs use it.
 */
import { isDeepStrictEqual } from 'node:util';
import type pg from 'pg';
import { ConflictError, NotFoundError } from '@berth/errors';
import { containsClause, filterClauses, inTransaction, jsonParam, orderBy, type JsonObject, type MetadataFilter } from './sql.js';

export interface Assistant {
  assistant_id: string;
  graph_id: string;
  name: string;
  description: string | null;
  config: JsonObject;
  context: JsonObject;
  metadata: JsonObject;
  version: number;
  created_at: Date;
  updated_at: Date;
}

export type AssistantVersion = Omit<Assistant, 'updated_at'>;

export interface CreateAssistant {
  assistant_id: string;
  graph_id: string;
  name: string;
  description?: string | null;
  config: JsonObject;
  context: JsonObject;
  metadata: JsonObject;
  if_exists: 'raise' | 'do_nothing';
}

export interface PatchAssistant {
  graph_id?: string;
  name?: string;
  description?: string | null;
  config?: JsonObject;
  /** The complete new context: nothing is merged from the previous version. */
  context?: JsonObject;
  /** Merged over the current metadata. */
  metadata?: JsonObject;
}

export interface AssistantQuery {
  graph_id?: string;
  name?: string;
  metadata?: JsonObject;
  limit: number;
  offset: number;
  sort_by?: string;
  sort_order?: string;
  /** Authorization filter on the assistant's metadata: only matching assistants are found. */
  filter?: MetadataFilter;
}

const SORTABLE = ['assistant_id', 'graph_id', 'name', 'created_at', 'updated_at'] as const;
export const ASSISTANT_COLUMNS = 'assistant_id, graph_id, name, description, config, context, metadata, version, created_at, updated_at';
const COLUMNS = ASSISTANT_COLUMNS;

export class AssistantStore {
  constructor(private readonly pool: pg.Pool) {}

  /**
   * Creates an assistant. An existing one is a conflict with `if_exists: 'raise'`, and also when
   * it does not match `filter` (the caller may not see it); otherwise it is returned as it is.
   */
  async create(input: CreateAssistant, filter?: MetadataFilter): Promise<Assistant> {
    const created = await inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<Assistant>(
        `INSERT INTO assistants (assistant_id, graph_id, name, description, config, context, metadata, version)
         VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7::jsonb, 1)
         ON CONFLICT (assistant_id) DO NOTHING RETURNING ${COLUMNS}`,
        [
          input.assistant_id,
          input.graph_id,
          input.name,
          input.description ?? null,
          jsonParam(input.config),
          jsonParam(input.context),
          jsonParam(input.metadata),
        ],
      );
      if (rows[0]) await this.insertVersion(client, rows[0]);
      return rows[0];
    });
    if (created) return created;
    const existing = await this.find(input.assistant_id, filter);
    if (input.if_exists === 'do_nothing' && existing) return existing;
    throw new ConflictError(`Assistant ${input.assistant_id} already exists`);
  }

  /**
   * Makes sure the system assistant of a graph exists (one per graph, created at startup). With
   * `defaults` (LANGGRAPH_CONFIG names the graph), a new one starts with that config and context,
   * and an existing one gets them as a new version only when they differ from those last applied:
   * an edited LANGGRAPH_CONFIG takes effect on restart, edits made through the API otherwise stay.
   */
  async ensureSystem(assistantId: string, graphId: string, defaults?: { config: JsonObject; context: JsonObject }): Promise<void> {
    const assistant = await this.create({
      assistant_id: assistantId,
      graph_id: graphId,
      name: graphId,
      config: defaults?.config ?? {},
      context: defaults?.context ?? {},
      metadata: { created_by: 'system' },
      if_exists: 'do_nothing',
    });
    if (!defaults) {
      // Forget what was applied, so that setting the same value again applies it again.
      await this.pool.query('DELETE FROM system_assistant_seeds WHERE assistant_id = $1', [assistantId]);
      return;
    }
    // Only the server (of several starting together) that records a changed value applies it.
    const { rowCount } = await this.pool.query(
      `INSERT INTO system_assistant_seeds (assistant_id, applied) VALUES ($1, $2::jsonb)
       ON CONFLICT (assistant_id) DO UPDATE SET applied = EXCLUDED.applied
         WHERE system_assistant_seeds.applied IS DISTINCT FROM EXCLUDED.applied`,
      [assistantId, jsonParam(defaults)],
    );
    if (rowCount && !(isDeepStrictEqual(assistant.config, defaults.config) && isDeepStrictEqual(assistant.context, defaults.context))) {
      await this.patch(assistantId, { config: defaults.config, context: defaults.context });
    }
  }

  /** The assistant; NotFoundError when it does not exist or does not match `filter`. */
  async get(assistantId: string, filter?: MetadataFilter): Promise<Assistant> {
    const assistant = await this.find(assistantId, filter);
    if (!assistant) throw new NotFoundError('Assistant not found');
    return assistant;
  }

  /** Makes version N+1 from `patch` and activates it; NotFoundError when missing or not matching `filter`. */
  async patch(assistantId: string, patch: PatchAssistant, filter?: MetadataFilter): Promise<Assistant> {
    return inTransaction(this.pool, async (client) => {
      const current = await this.lock(client, assistantId, filter);
      const { rows } = await client.query<{ next: number }>('SELECT max(version) + 1 AS next FROM assistant_versions WHERE assistant_id = $1', [assistantId]);
      const next = rows[0]?.next ?? current.version + 1;
      const updated = await client.query<Assistant>(
        `UPDATE assistants SET graph_id = $2, name = $3, description = $4, config = $5::jsonb, context = $6::jsonb,
           metadata = $7::jsonb, version = $8, updated_at = now()
         WHERE assistant_id = $1 RETURNING ${COLUMNS}`,
        [
          assistantId,
          patch.graph_id ?? current.graph_id,
          patch.name ?? current.name,
          patch.description !== undefined ? patch.description : current.description,
          jsonParam(patch.config ?? current.config),
          jsonParam(patch.context ?? current.context),
          jsonParam({ ...current.metadata, ...(patch.metadata ?? {}) }),
          next,
        ],
      );
      await this.insertVersion(client, updated.rows[0]!);
      return updated.rows[0]!;
    });
  }

  /** Activates an existing version: later runs use its configuration. */
  async setLatest(assistantId: string, version: number, filter?: MetadataFilter): Promise<Assistant> {
    return inTransaction(this.pool, async (client) => {
      await this.lock(client, assistantId, filter);
      const { rows } = await client.query<Assistant>(
        `UPDATE assistants a SET graph_id = v.graph_id, name = v.name, description = v.description, config = v.config,
           context = v.context, metadata = v.metadata, version = v.version, updated_at = now()
         FROM assistant_versions v
         WHERE a.assistant_id = $1 AND v.assistant_id = a.assistant_id AND v.version = $2
         RETURNING a.assistant_id, a.graph_id, a.name, a.description, a.config, a.context, a.metadata, a.version, a.created_at, a.updated_at`,
        [assistantId, version],
      );
      if (!rows[0]) throw new NotFoundError(`Assistant ${assistantId} has no version ${version}`);
      return rows[0];
    });
  }

  /** Versions, newest first; `filter` must match the assistant and restricts the versions listed. */
  async versions(assistantId: string, query: { metadata?: JsonObject; limit: number; offset: number }, filter?: MetadataFilter): Promise<AssistantVersion[]> {
    await this.get(assistantId, filter);
    const params: unknown[] = [assistantId];
    const where = ['assistant_id = $1', ...containsClause('metadata', query.metadata, params), ...filterClauses('metadata', filter, params)];
    params.push(query.limit, query.offset);
    const { rows } = await this.pool.query<AssistantVersion>(
      `SELECT assistant_id, graph_id, name, description, config, context, metadata, version, created_at
       FROM assistant_versions WHERE ${where.join(' AND ')} ORDER BY version DESC LIMIT $${params.length - 1} OFFSET $${params.length}`,
      params,
    );
    return rows;
  }

  async search(query: AssistantQuery): Promise<Assistant[]> {
    const params: unknown[] = [];
    const where = this.filters(query, params);
    params.push(query.limit, query.offset);
    const { rows } = await this.pool.query<Assistant>(
      `SELECT ${COLUMNS} FROM assistants ${where} ORDER BY ${orderBy(query.sort_by, SORTABLE, 'created_at', query.sort_order)}, assistant_id
       LIMIT $${params.length - 1} OFFSET $${params.length}`,
      params,
    );
    return rows;
  }

  async count(query: Omit<AssistantQuery, 'limit' | 'offset'>): Promise<number> {
    const params: unknown[] = [];
    const { rows } = await this.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM assistants ${this.filters(query, params)}`, params);
    return rows[0]!.n;
  }

  /** Deletes the assistant with all its versions. */
  async delete(assistantId: string, filter?: MetadataFilter): Promise<void> {
    const params: unknown[] = [assistantId];
    const where = ['assistant_id = $1', ...filterClauses('metadata', filter, params)].join(' AND ');
    const { rowCount } = await this.pool.query(`DELETE FROM assistants WHERE ${where}`, params);
    if (!rowCount) throw new NotFoundError('Assistant not found');
  }

  private filters(query: Omit<AssistantQuery, 'limit' | 'offset'>, params: unknown[]): string {
    const where = [...containsClause('metadata', query.metadata, params), ...filterClauses('metadata', query.filter, params)];
    if (query.graph_id) {
      params.push(query.graph_id);
      where.push(`graph_id = $${params.length}`);
    }
    if (query.name) {
      params.push(`%${query.name.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
      where.push(`name ILIKE $${params.length}`);
    }
    return where.length ? `WHERE ${where.join(' AND ')}` : '';
  }

  private async find(assistantId: string, filter: MetadataFilter | undefined): Promise<Assistant | undefined> {
    const params: unknown[] = [assistantId];
    const where = ['assistant_id = $1', ...filterClauses('metadata', filter, params)].join(' AND ');
    const { rows } = await this.pool.query<Assistant>(`SELECT ${COLUMNS} FROM assistants WHERE ${where}`, params);
    return rows[0];
  }

  private async lock(client: pg.PoolClient, assistantId: string, filter?: MetadataFilter): Promise<Assistant> {
    const params: unknown[] = [assistantId];
    const where = ['assistant_id = $1', ...filterClauses('metadata', filter, params)].join(' AND ');
    const { rows } = await client.query<Assistant>(`SELECT ${COLUMNS} FROM assistants WHERE ${where} FOR UPDATE`, params);
    if (!rows[0]) throw new NotFoundError('Assistant not found');
    return rows[0];
  }

  private async insertVersion(client: pg.PoolClient, a: Assistant): Promise<void> {
    await client.query(
      `INSERT INTO assistant_versions (assistant_id, version, graph_id, name, description, config, context, metadata)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8::jsonb)`,
      [a.assistant_id, a.version, a.graph_id, a.name, a.description, jsonParam(a.config), jsonParam(a.context), jsonParam(a.metadata)],
    );
  }
}
