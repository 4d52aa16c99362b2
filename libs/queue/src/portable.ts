/**
 * What both backends can store. BullMQ's Redis backend keeps payloads, results and errors as
 * JSON text, byte for byte; its Postgres backend keeps them in `jsonb` and `text` columns, which
 * reject U+0000 and unpaired UTF-16 surrogates ("unsupported Unicode escape sequence"). To behave
 * the same on both, payloads and results with such text are refused on every backend, and error
 * messages are made storable before BullMQ records them.
 */
import type { ValidationIssue } from '@berth/errors';

// U+0000, a high surrogate not followed by a low one, or a low surrogate not preceded by a high one.
// eslint-disable-next-line no-control-regex -- U+0000 is what it looks for
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');

/** The value as a consumer will read it back (a JSON round trip), or undefined when it has no JSON form. */
export function jsonRoundTrip(value: unknown): { value: unknown } | undefined {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    return undefined; // BigInt, cycles, a throwing toJSON
  }
  return text === undefined ? undefined : { value: JSON.parse(text) as unknown };
}

/** Issues for every string (value or key) of a JSON value that a backend cannot store. */
export function unstorableIssues(value: unknown, loc: (string | number)[]): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const visit = (v: unknown, at: (string | number)[]) => {
    if (typeof v === 'string') {
      if (UNSTORABLE.test(v)) issues.push({ loc: at, msg: 'Text must not contain U+0000 or unpaired surrogates', type: 'string_unstorable' });
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => visit(item, [...at, i]));
    } else if (v !== null && typeof v === 'object') {
      for (const [key, item] of Object.entries(v)) {
        if (UNSTORABLE.test(key)) issues.push({ loc: [...at, key], msg: 'Keys must not contain U+0000 or unpaired surrogates', type: 'key_unstorable' });
        visit(item, [...at, key]);
      }
    }
  };
  visit(value, loc);
  return issues;
}

/** True when `text` holds characters a backend cannot store. */
export function isUnstorable(text: string): boolean {
  return UNSTORABLE.test(text);
}

/** `text` with every unstorable character replaced by U+FFFD. */
export function storableText(text: string): string {
  return text.replace(UNSTORABLE_ALL, '\ufffd');
}
