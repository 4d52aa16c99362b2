/**
 * Label and field selectors as the API server parses them: equality (`a=b`, `a==b`, `a!=b`),
 * existence (`a`, `!a`) and set-based (`a in (x,y)`, `a notin (x)`) requirements, all ANDed.
 */
import { KubeApiError } from './errors.js';

export type Requirement =
  { key: string; op: 'eq' | 'neq'; value: string } | { key: string; op: 'exists' | 'notexists' } | { key: string; op: 'in' | 'notin'; values: string[] };

/** Splits on commas that are not inside parentheses. */
function splitTerms(selector: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of selector) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      terms.push(current);
      current = '';
    } else {
      current += ch;
    }
  }
  terms.push(current);
  return terms.map((t) => t.trim()).filter((t) => t.length > 0);
}

function invalid(selector: string, why: string): KubeApiError {
  return KubeApiError.badRequest(`unable to parse requirement: ${why} in selector "${selector}"`);
}

/** Parses a selector string; an empty or missing selector matches everything. */
export function parseSelector(selector: string | undefined | null): Requirement[] {
  if (!selector) return [];
  return splitTerms(selector).map((term) => {
    const set = /^([^\s!=()]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
    if (set) {
      const values = set[3]!
        .split(',')
        .map((v) => v.trim())
        .filter((v) => v.length > 0);
      return { key: set[1]!, op: set[2] as 'in' | 'notin', values };
    }
    const neq = /^([^\s!=]+)\s*!=\s*([^\s!=]*)$/.exec(term);
    if (neq) return { key: neq[1]!, op: 'neq', value: neq[2]! };
    const eq = /^([^\s!=]+)\s*==?\s*([^\s!=]*)$/.exec(term);
    if (eq) return { key: eq[1]!, op: 'eq', value: eq[2]! };
    const not = /^!\s*([^\s!=()]+)$/.exec(term);
    if (not) return { key: not[1]!, op: 'notexists' };
    if (/^[^\s!=()]+$/.test(term)) return { key: term, op: 'exists' };
    throw invalid(selector, `"${term}" is not a valid requirement`);
  });
}

/** Whether `values` (labels, or flattened fields) satisfy every requirement. */
export function matches(requirements: Requirement[], values: Record<string, string | undefined>): boolean {
  return requirements.every((r) => {
    const has = Object.prototype.hasOwnProperty.call(values, r.key) && values[r.key] !== undefined;
    const value = values[r.key];
    switch (r.op) {
      case 'eq':
        return has && value === r.value;
      case 'neq':
        return !has || value !== r.value;
      case 'exists':
        return has;
      case 'notexists':
        return !has;
      case 'in':
        return has && r.values.includes(value!);
      case 'notin':
        return !has || !r.values.includes(value!);
    }
  });
}

/**
 * The value of a field selector key (`metadata.name`, `status.phase`, `spec.nodeName`): read
 * generically by dotted path, stringified the way the API server compares them.
 */
export function fieldValue(object: unknown, path: string): string | undefined {
  let current: unknown = object;
  for (const part of path.split('.')) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  if (current === undefined || current === null) return undefined;
  return typeof current === 'object' ? JSON.stringify(current) : String(current);
}

/** Whether an object satisfies a field selector (only equality and inequality, as upstream). */
export function matchesFields(requirements: Requirement[], object: unknown): boolean {
  return requirements.every((r) => {
    if (r.op !== 'eq' && r.op !== 'neq') {
      throw KubeApiError.badRequest(`field selectors support only =, == and != (got ${r.op} on "${r.key}")`);
    }
    // An absent field compares as the empty string, as the API server does for its field sets.
    const value = fieldValue(object, r.key) ?? '';
    return r.op === 'eq' ? value === r.value : value !== r.value;
  });
}
