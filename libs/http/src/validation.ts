/**
 * Turns zod issues into the HTTPValidationError entries clients of the LangGraph/LangSmith APIs
 * expect: `{loc, msg, type}` with loc starting at `body`, `query` or `path`.
 */
import { RequestValidationError, type ValidationIssue } from '@berth/errors';
import type { z } from 'zod';

declare global {
  interface String {
    /** ES2024 (Node 20 has them; the ES2023 lib does not declare them). */
    isWellFormed(): boolean;
    toWellFormed(): string;
  }
}

export type RequestPart = 'body' | 'query' | 'path' | 'header';

export function issuesFromZod(part: RequestPart, issues: readonly z.core.$ZodIssue[]): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  for (const issue of issues) {
    const loc: (string | number)[] = [part, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))];
    switch (issue.code) {
      case 'unrecognized_keys':
        for (const key of issue.keys) out.push({ loc: [...loc, key], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' });
        break;
      case 'invalid_type':
        // With reportInput, a missing key is the only way to get an undefined input.
        if (issue.input === undefined) out.push({ loc, msg: 'Field required', type: 'missing' });
        else out.push({ loc, msg: issue.message, type: `${issue.expected}_type` });
        break;
      case 'invalid_value':
        out.push({ loc, msg: issue.message, type: 'enum' });
        break;
      case 'invalid_format':
        out.push({ loc, msg: issue.message, type: `${issue.format}_format` });
        break;
      case 'too_small':
        out.push({ loc, msg: issue.message, type: issue.origin === 'string' || issue.origin === 'array' ? 'too_short' : 'greater_than_equal' });
        break;
      case 'too_big':
        out.push({ loc, msg: issue.message, type: issue.origin === 'string' || issue.origin === 'array' ? 'too_long' : 'less_than_equal' });
        break;
      default:
        out.push({ loc, msg: issue.message, type: 'value_error' });
    }
  }
  return out;
}

/**
 * Deepest nesting of arrays and objects a request may carry. Far beyond what real payloads use
 * (LangChain messages nest < 10 levels), far below where recursive code (JSON.stringify, pg,
 * Postgres's jsonb input) runs out of stack.
 */
export const MAX_JSON_DEPTH = 128;
/** A request full of bad strings gets this many issues back, not one per string. */
const MAX_ISSUES = 20;

function stringProblem(value: string): { msg: string; type: string } | undefined {
  // Postgres cannot store U+0000 in text or jsonb, nor encode a lone surrogate as UTF-8.
  if (value.includes('\0')) return { msg: 'String must not contain NUL characters (\\u0000)', type: 'string_nul' };
  if (!value.isWellFormed()) return { msg: 'String must be valid Unicode (it has an unpaired surrogate)', type: 'string_unicode' };
  return undefined;
}

/**
 * A string Postgres can store: U+0000 removed, unpaired surrogates replaced (U+FFFD). For stores
 * that keep what they are sent rather than refuse it (traces: one odd character must not cost a run).
 */
export function storableString(value: string): string {
  const clean = value.includes('\0') ? value.replaceAll('\0', '') : value;
  return clean.isWellFormed() ? clean : clean.toWellFormed();
}

/**
 * The same value with every string in it, keys included, made storable ({@link storableString}), in
 * place (a key that becomes another key of its object replaces it). Walks iteratively: no nesting
 * overflows the stack here.
 */
export function storableStrings(value: unknown): unknown {
  if (typeof value === 'string') return storableString(value);
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node !== 'object' || node === null) continue;
    const entries = node as Record<string, unknown>;
    for (const key of Object.keys(entries)) {
      let child = entries[key];
      if (typeof child === 'string') child = entries[key] = storableString(child);
      else if (typeof child === 'object' && child !== null) stack.push(child);
      const storableKey = Array.isArray(node) ? key : storableString(key);
      if (storableKey !== key) {
        delete entries[key];
        entries[storableKey] = child;
      }
    }
  }
  return value;
}

interface Node {
  value: unknown;
  key: string | number;
  parent: Node | undefined;
  depth: number;
}

function locOf(node: Node): (string | number)[] {
  const loc: (string | number)[] = [];
  for (let n: Node | undefined = node; n; n = n.parent) loc.push(n.key);
  return loc.reverse();
}

/**
 * What no request may carry, whatever its schema: nesting deeper than MAX_JSON_DEPTH, and strings
 * (keys included) with NUL characters or lone surrogates. Walks iteratively, so no value can
 * overflow the stack here; runs before the schema, so none reaches zod or the handler either.
 */
export function unsafeValueIssues(part: RequestPart, value: unknown): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const stack: Node[] = [{ value, key: part, parent: undefined, depth: 0 }];
  while (stack.length > 0 && issues.length < MAX_ISSUES) {
    const node = stack.pop()!;
    const v = node.value;
    if (typeof v === 'string') {
      const problem = stringProblem(v);
      if (problem) issues.push({ loc: locOf(node), ...problem });
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    if (node.depth >= MAX_JSON_DEPTH) {
      // The location of the 129th level is a useless wall of keys: the part names it well enough.
      return [{ loc: [part], msg: `Value is nested deeper than ${MAX_JSON_DEPTH} levels`, type: 'too_deep' }];
    }
    const depth = node.depth + 1;
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], key: i, parent: node, depth });
      continue;
    }
    const children: Node[] = [];
    for (const [key, child] of Object.entries(v)) {
      const childNode: Node = { value: child, key, parent: node, depth };
      const problem = stringProblem(key);
      if (problem) issues.push({ loc: locOf(childNode), msg: `Key: ${problem.msg}`, type: problem.type });
      else children.push(childNode);
    }
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
  return issues;
}

/**
 * Parses one part of a request; throws RequestValidationError (HTTP 422) listing every issue,
 * including those of {@link unsafeValueIssues}.
 */
export function parseRequestPart<S extends z.ZodType>(part: RequestPart, schema: S, value: unknown): z.output<S> {
  const unsafe = unsafeValueIssues(part, value);
  if (unsafe.length > 0) throw new RequestValidationError(unsafe);
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) return result.data;
  throw new RequestValidationError(issuesFromZod(part, result.error.issues));
}
