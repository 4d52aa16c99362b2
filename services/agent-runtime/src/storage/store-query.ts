/**
 * SQL conditions of the long-term store's searches: filters on item values and namespace match
 * conditions (prefix/suffix with `*` wildcards), each pushing its parameters onto `params`.
 */
import { InvalidArgumentError } from '@berth/errors';
import { jsonParam } from './sql.js';

/** Comparison operators a filter may use on a value field, e.g. `{score: {$gte: 3}}`. */
export const FILTER_OPERATORS = ['$eq', '$ne', '$gt', '$gte', '$lt', '$lte'] as const;
type Operator = (typeof FILTER_OPERATORS)[number];
const ORDERING: Record<Exclude<Operator, '$eq' | '$ne'>, string> = { $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' };

/** A filter problem: where in the filter (keys) and what is wrong. */
export interface FilterProblem {
  path: string[];
  msg: string;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * What is wrong with a filter on item values: an object whose keys start with `$` must hold only
 * known operators, and `$gt`/`$gte`/`$lt`/`$lte` compare with a number or a string.
 */
export function filterProblems(filter: Record<string, unknown>): FilterProblem[] {
  const problems: FilterProblem[] = [];
  for (const [field, condition] of Object.entries(filter)) {
    if (!isPlainObject(condition) || !Object.keys(condition).some((k) => k.startsWith('$'))) continue;
    for (const [operator, operand] of Object.entries(condition)) {
      if (!(FILTER_OPERATORS as readonly string[]).includes(operator)) {
        problems.push({ path: [field, operator], msg: `Unknown filter operator "${operator}" (supported: ${FILTER_OPERATORS.join(', ')})` });
      } else if (operator in ORDERING && typeof operand !== 'number' && typeof operand !== 'string') {
        problems.push({ path: [field, operator], msg: `${operator} compares with a number or a string` });
      } else if (operand === undefined) {
        problems.push({ path: [field, operator], msg: 'Operand required' });
      }
    }
  }
  return problems;
}

/**
 * SQL conditions for a filter on the jsonb column `value` (top-level fields): `{f: v}` is JSON
 * equality (an object value: containment), `{f: {$op: v}}` a comparison; numbers compare
 * numerically and strings by code point, and a field of another type never matches an ordering.
 * @throws InvalidArgumentError for the problems `filterProblems` reports.
 */
export function valueFilterClauses(filter: Record<string, unknown> | undefined, params: unknown[]): string[] {
  if (!filter) return [];
  const problems = filterProblems(filter);
  if (problems.length) throw new InvalidArgumentError(`Invalid store filter: ${problems.map((p) => `${p.path.join('.')}: ${p.msg}`).join('; ')}`);
  const clauses: string[] = [];
  const field = (name: string) => {
    params.push(name);
    return `(value -> $${params.length}::text)`;
  };
  const json = (v: unknown) => {
    params.push(jsonParam(v));
    return `$${params.length}::jsonb`;
  };
  for (const [name, condition] of Object.entries(filter)) {
    if (condition === undefined) continue;
    if (!isPlainObject(condition)) {
      clauses.push(`${field(name)} = ${json(condition)}`);
      continue;
    }
    if (!Object.keys(condition).some((k) => k.startsWith('$'))) {
      clauses.push(`${field(name)} @> ${json(condition)}`);
      continue;
    }
    for (const [operator, operand] of Object.entries(condition) as [Operator, unknown][]) {
      const f = field(name);
      if (operator === '$eq') clauses.push(`${f} = ${json(operand)}`);
      else if (operator === '$ne') clauses.push(`${f} IS DISTINCT FROM ${json(operand)}`);
      else {
        params.push(operand);
        const p = `$${params.length}`;
        // CASE: a field of another type is never cast (no cast error), it just does not match.
        clauses.push(
          typeof operand === 'number'
            ? `(CASE WHEN jsonb_typeof(${f}) = 'number' THEN (${f})::numeric ${ORDERING[operator]} ${p}::numeric ELSE false END)`
            : `(CASE WHEN jsonb_typeof(${f}) = 'string' THEN (${f} #>> '{}') COLLATE "C" ${ORDERING[operator]} ${p}::text ELSE false END)`,
        );
      }
    }
  }
  return clauses;
}

/** `namespace` starts with `prefix` (no wildcards: a search's namespace prefix). */
export function namespacePrefixClauses(prefix: readonly string[], params: unknown[]): string[] {
  if (prefix.length === 0) return [];
  params.push(prefix);
  return [`namespace[1:${prefix.length}] = $${params.length}::text[]`];
}

/** A namespace condition of ListNamespaces: `path` labels, `*` matching any one label. */
export interface NamespaceMatch {
  matchType: 'prefix' | 'suffix';
  path: readonly string[];
}

/** SQL conditions for namespace match conditions (all must hold). */
export function namespaceMatchClauses(conditions: readonly NamespaceMatch[], params: unknown[]): string[] {
  const clauses: string[] = [];
  for (const { matchType, path } of conditions) {
    if (path.length === 0) continue;
    clauses.push(`cardinality(namespace) >= ${path.length}`);
    path.forEach((label, i) => {
      if (label === '*') return;
      params.push(label);
      const position = matchType === 'prefix' ? `${i + 1}` : `cardinality(namespace) - ${path.length - 1 - i}`;
      clauses.push(`namespace[${position}] = $${params.length}`);
    });
  }
  return clauses;
}
