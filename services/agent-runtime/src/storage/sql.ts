/**
 * Small helpers for the raw SQL of the agent server's stores: JSON parameters, metadata filters
 * and sort orders that only ever come from an allow-list.
 */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** pg sends JS objects as JSON, but arrays as Postgres arrays: always stringify jsonb parameters. */
export function jsonParam(value: unknown): string {
  return JSON.stringify(value ?? null);
}

/** Builds `col @> $n` for a metadata containment filter; returns the clause and its parameter. */
export function containsClause(column: string, filter: object | undefined, params: unknown[]): string[] {
  if (!filter || Object.keys(filter).length === 0) return [];
  params.push(jsonParam(filter));
  return [`${column} @> $${params.length}::jsonb`];
}

export function orderBy(sortBy: string | undefined, allowed: readonly string[], fallback: string, order?: string): string {
  const column = sortBy && allowed.includes(sortBy) ? sortBy : fallback;
  return `${column} ${order?.toLowerCase() === 'asc' ? 'ASC' : 'DESC'}`;
}

/** Runs `fn` in one transaction on its own pooled connection. */
export async function inTransaction<T>(pool: import('pg').Pool, fn: (client: import('pg').PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
