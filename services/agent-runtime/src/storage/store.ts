/**
 * The long-term store: JSON items by namespace path and key, in Postgres. One class serves both
 * the /store HTTP routes (snake_case methods with TTLs) and graph code, as LangGraph's `BaseStore`
 * (`config.store` in a node, `getStore()`): what a graph writes the API reads and the reverse.
 *
 * TTLs are in minutes. An expired item is never returned; `sweepExpired` deletes expired rows
 * (the server calls it periodically in its worker role). Reads and searches push an item's
 * expiry forward when `refresh_ttl` (or, when the request does not say, `refreshOnRead`) holds.
 *
 * Semantic search (`query`) needs a `StoreIndex` (langgraph.json `store.index`): puts embed the
 * indexed fields into store_vectors, and a search with a query scores the items its namespace
 * prefix and filter leave by cosine similarity in SQL (a scan, no vector index).
 */
import type pg from 'pg';
import { systemClock, type Clock, type Timer } from '@berth/clock';
import type { Logger } from '@berth/log';
import {
  BaseStore,
  getTextAtPath,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from '@langchain/langgraph-checkpoint';
import { InvalidArgumentError } from '@berth/errors';
import type { StoreIndex } from '../project/embeddings.js';
import { inTransaction, jsonParam, type JsonObject } from './sql.js';
import { namespaceMatchClauses, namespacePrefixClauses, valueFilterClauses, type NamespaceMatch } from './store-query.js';

/** A stored item as the API shows it. `score` only on search results (null without a query). */
export interface StoreItem {
  namespace: string[];
  key: string;
  value: JsonObject;
  created_at: Date;
  updated_at: Date;
  score?: number | null;
}

export interface StorePut {
  namespace: string[];
  key: string;
  value: JsonObject;
  /** false: not embedded; a list: these fields instead of the configured ones; null/undefined: the configured ones. */
  index?: false | string[] | null;
  /** Minutes until the item expires; null: never; undefined: the store's default TTL. */
  ttl?: number | null;
}

export interface StoreSearch {
  namespacePrefix: string[];
  filter?: Record<string, unknown> | undefined;
  limit: number;
  offset: number;
  /** Natural-language query (semantic search); needs a configured index. */
  query?: string | undefined;
  refreshTtl?: boolean | undefined;
}

export interface StoreOptions {
  /** Semantic search; without it a query is refused. */
  index?: StoreIndex;
  /** Minutes applied to puts that name no TTL (and to every put from graph code). */
  defaultTtlMinutes?: number;
  /** Whether reads refresh TTLs when the caller does not say. @default true */
  refreshOnRead?: boolean;
  /** The time expiries are set and checked against (not the database's `now()`). @default systemClock */
  clock?: Clock;
}

/** A search with `query` on a store without an index (langgraph.json store.index). */
export class SemanticSearchUnavailableError extends InvalidArgumentError {
  constructor() {
    super('Semantic search is not configured: add store.index {embed, dims} to langgraph.json to search the store with a query');
  }
}

const COLUMNS = 'namespace, key, value, created_at, updated_at';
/** Not expired at the time in parameter `now`. */
const live = (now: string) => `(expires_at IS NULL OR expires_at > ${now}::timestamptz)`;
/** Cosine similarity of a stored embedding `v.embedding` and the query vector parameter. */
const cosine = (param: string) =>
  `(SELECT sum(a * b) / NULLIF(sqrt(sum(a * a)) * sqrt(sum(b * b)), 0) FROM unnest(v.embedding, ${param}::float8[]) AS t(a, b))`;

function toItem(row: StoreItem): Item {
  return { namespace: row.namespace, key: row.key, value: row.value, createdAt: row.created_at, updatedAt: row.updated_at };
}

export class PostgresStore extends BaseStore {
  private readonly refreshOnRead: boolean;
  private readonly clock: Clock;

  constructor(
    private readonly pool: pg.Pool,
    private readonly options: StoreOptions = {},
  ) {
    super();
    this.refreshOnRead = options.refreshOnRead ?? true;
    this.clock = options.clock ?? systemClock;
  }

  /** The clock's time, as a query parameter. */
  private now(): Date {
    return new Date(this.clock.now());
  }

  /** True when searches may carry a query. */
  get semanticSearch(): boolean {
    return this.options.index !== undefined;
  }

  /**
   * Writes an item (replacing one at the same namespace and key), embedding its indexed fields
   * first when semantic search is configured.
   * @throws SemanticSearchUnavailableError for an `index` list without a configured index.
   * @throws EmbeddingError when the embedder fails (nothing is written).
   */
  async putItem(put: StorePut): Promise<void> {
    const vectors = await this.embed(put);
    const ttl = put.ttl === undefined ? (this.options.defaultTtlMinutes ?? null) : put.ttl;
    await inTransaction(this.pool, async (client) => {
      await client.query(
        `INSERT INTO store_items (namespace, key, value, ttl_minutes, expires_at)
         VALUES ($1::text[], $2, $3::jsonb, $4::float8, $5::timestamptz + $4::float8 * interval '1 minute')
         ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, ttl_minutes = excluded.ttl_minutes,
           expires_at = excluded.expires_at, updated_at = now(),
           -- An expired row the sweep has not deleted yet is a new item.
           created_at = CASE WHEN store_items.expires_at <= $5::timestamptz THEN now() ELSE store_items.created_at END`,
        [put.namespace, put.key, jsonParam(put.value), ttl, this.now()],
      );
      if (!this.options.index) return;
      await client.query('DELETE FROM store_vectors WHERE namespace = $1::text[] AND key = $2', [put.namespace, put.key]);
      if (!vectors.length) return;
      await client.query(
        `INSERT INTO store_vectors (namespace, key, field_name, embedding)
         SELECT $1::text[], $2, f.field_name, ARRAY(SELECT jsonb_array_elements_text(f.embedding)::float8)
         FROM jsonb_to_recordset($3::jsonb) AS f(field_name text, embedding jsonb)`,
        [put.namespace, put.key, jsonParam(vectors)],
      );
    });
  }

  /** The live item, or undefined; `refreshTtl` (default: the store's refreshOnRead) restarts its TTL. */
  async getItem(namespace: string[], key: string, options: { refreshTtl?: boolean | undefined } = {}): Promise<StoreItem | undefined> {
    const { rows } = await this.pool.query<StoreItem>(
      `WITH found AS (SELECT ${COLUMNS} FROM store_items WHERE namespace = $1::text[] AND key = $2 AND ${live('$4')}),
       refreshed AS (${this.refreshSql('$3', '$4')})
       SELECT ${COLUMNS} FROM found`,
      [namespace, key, options.refreshTtl ?? this.refreshOnRead, this.now()],
    );
    return rows[0];
  }

  /** Deletes an item; deleting a missing one is not an error. */
  async deleteItem(namespace: string[], key: string): Promise<void> {
    await this.pool.query('DELETE FROM store_items WHERE namespace = $1::text[] AND key = $2', [namespace, key]);
  }

  /**
   * Live items under a namespace prefix that match `filter`: by similarity to `query` (best
   * first; items without embeddings last, score null), else most recently updated first.
   * @throws SemanticSearchUnavailableError for a query without a configured index.
   * @throws InvalidArgumentError for an invalid filter.
   */
  async searchItems(search: StoreSearch): Promise<StoreItem[]> {
    if (search.query !== undefined && !this.options.index) throw new SemanticSearchUnavailableError();
    const params: unknown[] = [this.now()];
    const where = [live('$1'), ...namespacePrefixClauses(search.namespacePrefix, params), ...valueFilterClauses(search.filter, params)];
    let score = 'NULL::float8';
    let join = '';
    let order = 'updated_at DESC, namespace, key';
    if (search.query !== undefined) {
      params.push(await this.options.index!.embedder.embedQuery(search.query));
      join = `LEFT JOIN LATERAL (SELECT max(${cosine(`$${params.length}`)}) AS score FROM store_vectors v
              WHERE v.namespace = store_items.namespace AND v.key = store_items.key) s ON true`;
      score = 's.score';
      order = 's.score DESC NULLS LAST, updated_at DESC, namespace, key';
    }
    params.push(search.limit, search.offset, search.refreshTtl ?? this.refreshOnRead);
    const n = params.length;
    const { rows } = await this.pool.query<StoreItem>(
      `WITH found AS (
         SELECT store_items.namespace, store_items.key, value, created_at, updated_at, ${score} AS score
         FROM store_items ${join} WHERE ${where.join(' AND ')} ORDER BY ${order} LIMIT $${n - 2} OFFSET $${n - 1}),
       refreshed AS (${this.refreshSql(`$${n}`, '$1')})
       SELECT ${COLUMNS}, score FROM found ORDER BY ${search.query !== undefined ? 'score DESC NULLS LAST, ' : ''}updated_at DESC, namespace, key`,
      params,
    );
    return rows;
  }

  /** Distinct namespaces of live items matching all conditions, cut to `maxDepth` labels, sorted. */
  async namespaces(options: { conditions: readonly NamespaceMatch[]; maxDepth?: number | undefined; limit: number; offset: number }): Promise<string[][]> {
    const params: unknown[] = [this.now()];
    const where = [live('$1'), ...namespaceMatchClauses(options.conditions, params)];
    params.push(options.maxDepth ?? null, options.limit, options.offset);
    const n = params.length;
    const { rows } = await this.pool.query<{ ns: string[] }>(
      `SELECT DISTINCT CASE WHEN $${n - 2}::int IS NULL THEN namespace ELSE namespace[1:$${n - 2}::int] END AS ns
       FROM store_items WHERE ${where.join(' AND ')} ORDER BY ns LIMIT $${n - 1} OFFSET $${n}`,
      params,
    );
    return rows.map((r) => r.ns);
  }

  /** Deletes expired items (and their embeddings); returns how many. */
  async sweepExpired(): Promise<number> {
    const { rowCount } = await this.pool.query('DELETE FROM store_items WHERE expires_at <= $1::timestamptz', [this.now()]);
    return rowCount ?? 0;
  }

  /** LangGraph's BaseStore entry point: the operations in order, each with its result. */
  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    for (const op of operations) results.push(await this.run(op));
    return results as OperationResults<Op>;
  }

  private async run(op: Operation): Promise<Item | SearchItem[] | string[][] | null | void> {
    if ('namespacePrefix' in op) {
      const search = op as SearchOperation;
      const rows = await this.searchItems({
        namespacePrefix: search.namespacePrefix,
        filter: search.filter,
        limit: search.limit ?? 10,
        offset: search.offset ?? 0,
        query: search.query,
      });
      return rows.map((row) => ({ ...toItem(row), ...(row.score !== null && row.score !== undefined ? { score: row.score } : {}) }));
    }
    if ('value' in op) {
      const put = op as PutOperation;
      if (put.value === null) return this.deleteItem(put.namespace, put.key);
      return this.putItem({ namespace: put.namespace, key: put.key, value: put.value as JsonObject, index: put.index ?? null });
    }
    if ('key' in op) {
      const row = await this.getItem((op as GetOperation).namespace, (op as GetOperation).key);
      return row ? toItem(row) : null;
    }
    const list = op as ListNamespacesOperation;
    return this.namespaces({ conditions: list.matchConditions ?? [], maxDepth: list.maxDepth, limit: list.limit, offset: list.offset });
  }

  /** An UPDATE (for a CTE over `found`) restarting the TTL of the found items from `now` when `flag` holds. */
  private refreshSql(flag: string, now: string): string {
    return `UPDATE store_items s SET expires_at = ${now}::timestamptz + s.ttl_minutes * interval '1 minute' FROM found f
            WHERE ${flag}::boolean AND s.ttl_minutes IS NOT NULL AND s.namespace = f.namespace AND s.key = f.key`;
  }

  /** The embeddings of a put's indexed fields: `[]` without an index or with `index: false`. */
  private async embed(put: StorePut): Promise<{ field_name: string; embedding: number[] }[]> {
    const index = this.options.index;
    if (!index) {
      if (Array.isArray(put.index)) throw new SemanticSearchUnavailableError();
      return [];
    }
    if (put.index === false) return [];
    const texts: { field_name: string; text: string }[] = [];
    for (const path of put.index ?? index.fields) {
      const found = path === '$' ? [JSON.stringify(put.value)] : getTextAtPath(put.value, path);
      found.forEach((text, i) => texts.push({ field_name: found.length > 1 ? `${path}#${i}` : path, text }));
    }
    if (!texts.length) return [];
    const vectors = await index.embedder.embedDocuments(texts.map((t) => t.text));
    return texts.map((t, i) => ({ field_name: t.field_name, embedding: vectors[i]! }));
  }
}

/** Deletes expired store items every `intervalMs` (the server's worker role runs one). */
export class StoreSweeper {
  private timer: Timer | undefined;
  private running: Promise<void> | undefined;

  /** @param clock The sweeps' timer. @default systemClock */
  constructor(
    private readonly store: Pick<PostgresStore, 'sweepExpired'>,
    private readonly intervalMs: number,
    private readonly log: Logger,
    private readonly clock: Clock = systemClock,
  ) {}

  start(): void {
    this.timer ??= this.clock.setInterval(() => {
      this.running ??= this.sweep().finally(() => (this.running = undefined));
    }, this.intervalMs);
  }

  /** Stops sweeping, after a pass in progress. */
  async close(): Promise<void> {
    this.timer?.cancel();
    this.timer = undefined;
    await this.running;
  }

  private async sweep(): Promise<void> {
    try {
      const deleted = await this.store.sweepExpired();
      if (deleted) this.log.debug({ deleted }, 'expired store items deleted');
    } catch (error) {
      // The next pass retries; expired items stay invisible meanwhile.
      this.log.warn({ err: error }, 'store TTL sweep failed');
    }
  }
}
