/**
 * Small helpers for the raw SQL of the agent server's stores: JSON parameters, metadata filters
 * and sort orders that only ever come from an allow-list.
 */
import { escapeString, toJsonb } from './json-codec.js';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/**
 * A jsonb parameter: pg sends JS objects as JSON, but arrays as Postgres arrays, so it is always
 * stringified — with the strings jsonb cannot hold escaped (see json-codec.ts).
 */
export function jsonParam(value: unknown): string {
  return toJsonb(value);
}

/** Builds `col @> $n` for a metadata containment filter; returns the clause and its parameter. */
export function containsClause(column: string, filter: object | undefined, params: unknown[]): string[] {
  if (!filter || Object.keys(filter).length === 0) return [];
  params.push(jsonParam(filter));
  return [`${column} @> $${params.length}::jsonb`];
}

/**
 * One condition of an authorization filter on a resource's `metadata` (see `src/auth/`): `eq` is
 * exact JSON equality of `metadata[key]`; `contains` means `metadata[key]` is an array holding
 * every element of `value` (an array).
 */
export interface MetadataCondition {
  key: string;
  op: 'eq' | 'contains';
  value: Json;
}

/** Conditions that must all hold; an empty or missing filter lets everything through. */
export type MetadataFilter = readonly MetadataCondition[];

/**
 * SQL conditions (to AND into a WHERE clause) restricting `column` (a jsonb metadata column) to
 * rows that match an authorization filter; pushes their parameters onto `params`.
 */
export function filterClauses(column: string, filter: MetadataFilter | undefined, params: unknown[]): string[] {
  return (filter ?? []).map((condition) => {
    params.push(escapeString(condition.key), jsonParam(condition.value));
    const value = `$${params.length}::jsonb`;
    const field = `(${column} -> $${params.length - 1}::text)`;
    // `@>` on two arrays is "contains every element of"; a scalar or object never contains an array.
    return condition.op === 'eq' ? `${field} = ${value}` : `${field} @> ${value}`;
  });
}

export function orderBy(sortBy: string | undefined, allowed: readonly string[], fallback: string, order?: string): string {
  const column = sortBy && allowed.includes(sortBy) ? sortBy : fallback;
  return `${column} ${order?.toLowerCase() === 'asc' ? 'ASC' : 'DESC'}`;
}

/** A run that is pending or running: what keeps its thread busy. */
export const UNFINISHED = "status IN ('pending', 'running')";

/** Runs `fn` in one transaction on its own pooled connection. */
export async function inTransaction<T>(pool: import('pg').Pool, fn: (client: import('pg').PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    // ROLLBACK fails only with the connection gone, which the pool then discards: the error that
    // failed the transaction is the one to report.
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
