/**
 * Turns zod issues into the HTTPValidationError entries clients of the LangGraph/LangSmith APIs
 * expect: `{loc, msg, type}` with loc starting at `body`, `query` or `path`.
 */
import { RequestValidationError, type ValidationIssue } from '@berth/errors';
import type { z } from 'zod';

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

/** Parses one part of a request; throws RequestValidationError (HTTP 422) listing every issue. */
export function parseRequestPart<S extends z.ZodType>(part: RequestPart, schema: S, value: unknown): z.output<S> {
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) return result.data;
  throw new RequestValidationError(issuesFromZod(part, result.error.issues));
}
