/**
 * JSON values in jsonb, exactly. Postgres' jsonb cannot hold U+0000 (`unsupported Unicode escape
 * sequence`) nor a lone surrogate, yet graphs return both (a string cut from binary data, half an
 * emoji). Every jsonb value the agent server writes goes through {@link toJsonb}, which escapes
 * such strings, and every jsonb value it reads comes back through {@link fromJsonb} (the pools'
 * type parser, see {@link useJsonbCodec}), which restores them: what a graph produced is what the
 * API returns.
 *
 * The escape character is U+FDD0, a Unicode noncharacter ("for internal use", never in interchanged
 * text): U+0000 → U+FDD0 `0`, U+FDD0 itself → U+FDD0 `e`, a lone surrogate → U+FDD0 `u` + its 4 hex
 * digits. Only strings (keys included) that hold one of the three change, so every other string is
 * stored as it is and jsonb containment (`@>`) keeps working on them; escaping is reversible for
 * every string, including those that contain the escape sequences.
 */
import type pg from 'pg';

export const ESCAPE = '\ufdd0';

/**
 * Deepest nesting of arrays and objects a stored or streamed value may have: far beyond real
 * state (messages nest < 10 levels), below where JSON.stringify, the checkpoint serializer and
 * Postgres' jsonb parser run out of stack.
 */
export const MAX_VALUE_DEPTH = 1000;

/** A value of a run that cannot be stored or sent; `where` names it (`state channel "x"`, `the graph's output`). */
export class UnstorableValueError extends Error {
  constructor(
    readonly where: string,
    problem: string,
    options?: { cause?: unknown },
  ) {
    super(`${where} cannot be stored: ${problem}`, options);
    this.name = 'UnstorableValueError';
  }
}

/** Whether JSON text (or its UTF-8 bytes) nests arrays and objects deeper than `max`. One pass, no recursion. */
export function nestedDeeperThan(json: string | Uint8Array, max: number): boolean {
  // Any nesting deeper than max needs more than 2 × max characters.
  if (json.length <= 2 * max) return false;
  const at = typeof json === 'string' ? (i: number) => json.charCodeAt(i) : (i: number) => json[i]!;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const b = at(i);
    if (inString) {
      if (b === 0x5c)
        i += 1; // the escaped character
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if (b === 0x5b || b === 0x7b) {
      if (++depth > max) return true;
    } else if (b === 0x5d || b === 0x7d) depth -= 1;
  }
  return false;
}
const JSONB_OID = 3802;

/** JSON.stringify output that may hold U+0000 or a lone surrogate (it writes both as `\u` escapes). */
export const UNSTORABLE_TEXT = /\\u0000|\\ud[89a-f][0-9a-f]{2}/;
/** JSON.stringify output that may hold a string to escape: U+0000, a lone surrogate, or U+FDD0. */
const NEEDS_ESCAPE = /\\u0000|\\ud[89a-f][0-9a-f]{2}|\ufdd0/;

/** `s` with U+0000, U+FDD0 and lone surrogates escaped; `s` itself when it has none. */
export function escapeString(s: string): string {
  let out = '';
  let last = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let escaped: string;
    if (c === 0) escaped = `${ESCAPE}0`;
    else if (c === 0xfdd0) escaped = `${ESCAPE}e`;
    else if (c >= 0xd800 && c <= 0xdfff) {
      const next = s.charCodeAt(i + 1);
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        i += 1; // a pair: stored as it is
        continue;
      }
      escaped = `${ESCAPE}u${c.toString(16)}`;
    } else continue;
    out += s.slice(last, i) + escaped;
    last = i + 1;
  }
  return last === 0 ? s : out + s.slice(last);
}

/** The string {@link escapeString} was given. A U+FDD0 not followed by an escape is kept as it is. */
export function unescapeString(s: string): string {
  let at = s.indexOf(ESCAPE);
  if (at < 0) return s;
  let out = '';
  let last = 0;
  for (; at >= 0; at = s.indexOf(ESCAPE, last)) {
    const kind = s[at + 1];
    let char: string | undefined;
    let length = 2;
    if (kind === '0') char = '\u0000';
    else if (kind === 'e') char = ESCAPE;
    else if (kind === 'u' && /^d[89a-f][0-9a-f]{2}$/.test(s.slice(at + 2, at + 6))) {
      char = String.fromCharCode(parseInt(s.slice(at + 2, at + 6), 16));
      length = 6;
    }
    if (char === undefined) {
      out += s.slice(last, at + 1);
      last = at + 1;
      continue;
    }
    out += s.slice(last, at) + char;
    last = at + length;
  }
  return out + s.slice(last);
}

/**
 * Rewrites the string literals of JSON text that `select` picks with `rewrite`. Scans the text once
 * (no recursion: any depth of nesting is fine); outside string literals JSON has no `"`.
 */
export function mapStringLiterals(text: string, select: (literal: string) => boolean, rewrite: (s: string) => string): string {
  let out = '';
  let last = 0;
  for (let start = text.indexOf('"'); start >= 0; start = text.indexOf('"', last)) {
    let end = text.indexOf('"', start + 1);
    for (;;) {
      if (end < 0) throw new SyntaxError('unterminated string in JSON text');
      let backslashes = 0;
      while (text.charCodeAt(end - 1 - backslashes) === 0x5c) backslashes += 1;
      if (backslashes % 2 === 0) break;
      end = text.indexOf('"', end + 1);
    }
    const literal = text.slice(start, end + 1);
    if (select(literal)) out += text.slice(last, start) + JSON.stringify(rewrite(JSON.parse(literal) as string));
    else out += text.slice(last, end + 1);
    last = end + 1;
  }
  return out + text.slice(last);
}

/**
 * The jsonb text of `value` (JSON.stringify's, `null` for undefined), with strings escaped for
 * Postgres. Throws what JSON.stringify throws (BigInt, circular structures, too deep).
 */
export function toJsonb(value: unknown): string {
  const text = JSON.stringify(value ?? null);
  if (!NEEDS_ESCAPE.test(text)) return text;
  return mapStringLiterals(text, (literal) => NEEDS_ESCAPE.test(literal), escapeString);
}

/** The value of jsonb text written with {@link toJsonb} (as Postgres prints it back). */
export function fromJsonb(text: string): unknown {
  if (!text.includes(ESCAPE)) return JSON.parse(text);
  return JSON.parse(mapStringLiterals(text, (literal) => literal.includes(ESCAPE), unescapeString));
}

/** Makes every connection of `pool` read jsonb with {@link fromJsonb}; returns the pool. */
export function useJsonbCodec(pool: pg.Pool): pg.Pool {
  pool.on('connect', (client) => client.setTypeParser(JSONB_OID, 'text', fromJsonb));
  return pool;
}
