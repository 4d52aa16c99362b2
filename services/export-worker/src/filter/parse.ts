/**
 * LangSmith's run filter language, parsed into a typed tree: `eq, neq, gt, gte, lt, lte, has,
 * search, in` over run fields, combined with `and(...)` and `or(...)`, e.g.
 * `and(eq(run_type, "llm"), gt(latency, "5s"), has(tags, 'prod'))`. One parser for exports and
 * POST /runs/query. Values are checked against their field here, so a bad filter is refused with
 * the position of the offending text before any query runs.
 */
import { RequestValidationError } from '@berth/errors';
import { isUuid } from '@berth/ids';

/** A filter that does not parse or does not fit its fields; the gateway answers it with a 422. */
export class FilterSyntaxError extends RequestValidationError {
  /** 0-based offset in the filter text. */
  readonly position: number;
  /** What the parser expected at `position`. */
  readonly expected: string;

  constructor(position: number, expected: string, found: string) {
    super([
      {
        loc: ['filter'],
        msg: `at position ${position}: expected ${expected}, found ${found}`,
        type: 'value_error.filter',
        // For a client to point at the text (underline it as the user types).
        ctx: { position, expected, found },
      },
    ]);
    this.position = position;
    this.expected = expected;
  }
}

export type Comparator = 'eq' | 'neq' | 'gt' | 'gte' | 'lt' | 'lte';
export type Literal = string | number | boolean | null | Date;

export type FilterNode =
  | { kind: 'and' | 'or'; args: FilterNode[] }
  | { kind: 'compare'; op: Comparator; field: FilterField; value: Literal }
  | { kind: 'in'; field: FilterField; values: Literal[] }
  | { kind: 'has'; field: 'tags'; value: string }
  | { kind: 'search'; field: FilterField | null; value: string };

type FieldType = 'uuid' | 'text' | 'nullable_text' | 'time' | 'nullable_time' | 'duration' | 'number' | 'tags' | 'bool';

/** The fields a filter may name, and the kind of value each holds. */
export const FILTER_FIELDS = {
  id: 'uuid',
  trace_id: 'uuid',
  name: 'text',
  run_type: 'text',
  status: 'text',
  error: 'nullable_text',
  start_time: 'time',
  end_time: 'nullable_time',
  latency: 'duration',
  total_tokens: 'number',
  prompt_tokens: 'number',
  completion_tokens: 'number',
  total_cost: 'number',
  prompt_cost: 'number',
  completion_cost: 'number',
  tags: 'tags',
  is_root: 'bool',
  metadata_key: 'text',
  metadata_value: 'text',
  /** The thread a run belongs to: its metadata's `thread_id`, else `session_id`, else `conversation_id` (as LangSmith groups threads). */
  thread_id: 'nullable_text',
  feedback_key: 'text',
  feedback_score: 'number',
} as const satisfies Record<string, FieldType>;

export type FilterField = keyof typeof FILTER_FIELDS;

const COMPARATORS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte'] as const;
const FUNCTIONS = ['and', 'or', ...COMPARATORS, 'has', 'search', 'in'] as const;
/** Deeper nesting is refused rather than risking the stack on hostile input. */
const MAX_DEPTH = 32;
const MAX_LENGTH = 20_000;

const ORDERED: Record<FieldType, boolean> = {
  uuid: false,
  text: false,
  nullable_text: false,
  time: true,
  nullable_time: true,
  duration: true,
  number: true,
  tags: false,
  bool: false,
};
const ISO_TIME = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;
const DURATION = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$/;
const SECONDS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400 };

type Token =
  | { type: 'ident'; value: string; pos: number }
  | { type: 'string'; value: string; pos: number }
  | { type: 'number'; value: number; pos: number }
  | { type: 'punct'; value: '(' | ')' | ',' | '[' | ']'; pos: number }
  | { type: 'end'; pos: number };

function describe(token: Token): string {
  switch (token.type) {
    case 'end':
      return 'the end of the filter';
    case 'string':
      return `the string ${JSON.stringify(token.value)}`;
    case 'punct':
      return `'${token.value}'`;
    default:
      return `'${token.value}'`;
  }
}

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if ('(),[]'.includes(c)) {
      tokens.push({ type: 'punct', value: c as '(', pos: i++ });
    } else if (c === '"' || c === "'") {
      const start = i++;
      let value = '';
      for (;;) {
        if (i >= text.length) throw new FilterSyntaxError(start, `a closing ${c} for the string`, 'the end of the filter');
        const ch = text[i]!;
        if (ch === '\\' && i + 1 < text.length) {
          value += text[i + 1];
          i += 2;
        } else if (ch === c) {
          i++;
          break;
        } else {
          value += ch;
          i++;
        }
      }
      tokens.push({ type: 'string', value, pos: start });
    } else if (/[-+\d.]/.test(c)) {
      const match = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?/.exec(text.slice(i));
      if (!match) throw new FilterSyntaxError(i, 'a number', `'${c}'`);
      tokens.push({ type: 'number', value: Number(match[0]), pos: i });
      i += match[0].length;
    } else if (/[A-Za-z_]/.test(c)) {
      const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i))![0];
      tokens.push({ type: 'ident', value: word, pos: i });
      i += word.length;
    } else {
      throw new FilterSyntaxError(i, 'a function, field, string or number', `'${c}'`);
    }
  }
  tokens.push({ type: 'end', pos: text.length });
  return tokens;
}

class Parser {
  private index = 0;

  constructor(private readonly tokens: Token[]) {}

  parse(): FilterNode {
    const node = this.expression(0);
    const rest = this.peek();
    if (rest.type !== 'end') throw new FilterSyntaxError(rest.pos, 'the end of the filter', describe(rest));
    return node;
  }

  private peek(): Token {
    return this.tokens[this.index]!;
  }

  private next(): Token {
    return this.tokens[this.index++]!;
  }

  private punct(value: string): void {
    const token = this.next();
    if (token.type !== 'punct' || token.value !== value) throw new FilterSyntaxError(token.pos, `'${value}'`, describe(token));
  }

  private expression(depth: number): FilterNode {
    const token = this.next();
    if (depth > MAX_DEPTH) throw new FilterSyntaxError(token.pos, `at most ${MAX_DEPTH} nested functions`, 'deeper nesting');
    const fn = token.type === 'ident' ? FUNCTIONS.find((f) => f === token.value.toLowerCase()) : undefined;
    if (!fn) throw new FilterSyntaxError(token.pos, `a function (${FUNCTIONS.join(', ')})`, describe(token));
    this.punct('(');
    let node: FilterNode;
    if (fn === 'and' || fn === 'or') {
      const args = [this.expression(depth + 1)];
      while (this.peek().type === 'punct' && (this.peek() as { value: string }).value === ',') {
        this.next();
        args.push(this.expression(depth + 1));
      }
      node = { kind: fn, args };
    } else if (fn === 'search') {
      const first = this.peek();
      let field: FilterField | null = null;
      if (first.type !== 'string') {
        field = this.field();
        if (!FILTER_FIELDS[field].endsWith('text'))
          throw new FilterSyntaxError(first.pos, 'a text field for search (name, run_type, status, error)', `'${field}'`);
        this.punct(',');
      }
      const value = this.next();
      if (value.type !== 'string') throw new FilterSyntaxError(value.pos, 'a string to search for', describe(value));
      node = { kind: 'search', field, value: value.value };
    } else if (fn === 'has') {
      const at = this.peek().pos;
      const field = this.field();
      if (field !== 'tags') throw new FilterSyntaxError(at, "the field 'tags' (has works on tags)", `'${field}'`);
      this.punct(',');
      const value = this.next();
      if (value.type !== 'string') throw new FilterSyntaxError(value.pos, 'a string (a tag)', describe(value));
      node = { kind: 'has', field, value: value.value };
    } else if (fn === 'in') {
      const at = this.peek().pos;
      const field = this.field();
      if (ORDERED[FILTER_FIELDS[field]] || FILTER_FIELDS[field] === 'tags' || FILTER_FIELDS[field] === 'bool') {
        throw new FilterSyntaxError(
          at,
          'a field with a list of values (id, trace_id, name, run_type, status, error, metadata_key, metadata_value, thread_id, feedback_key)',
          `'${field}'`,
        );
      }
      this.punct(',');
      this.punct('[');
      const values = [this.literal(field, 'eq')];
      while (this.peek().type === 'punct' && (this.peek() as { value: string }).value === ',') {
        this.next();
        values.push(this.literal(field, 'eq'));
      }
      this.punct(']');
      node = { kind: 'in', field, values };
    } else {
      const at = this.peek().pos;
      const field = this.field();
      const type = FILTER_FIELDS[field];
      if (fn !== 'eq' && fn !== 'neq' && !ORDERED[type])
        throw new FilterSyntaxError(
          at,
          `a field that has an order for ${fn} (start_time, end_time, latency, a token count, a cost, feedback_score)`,
          `'${field}'`,
        );
      if (type === 'tags') throw new FilterSyntaxError(at, 'has(tags, ...) for tags', `${fn}(tags, ...)`);
      this.punct(',');
      node = { kind: 'compare', op: fn, field, value: this.literal(field, fn) };
    }
    this.punct(')');
    return node;
  }

  private field(): FilterField {
    const token = this.next();
    const name = token.type === 'ident' ? token.value.toLowerCase() : undefined;
    if (name === undefined || !Object.hasOwn(FILTER_FIELDS, name)) {
      throw new FilterSyntaxError(token.pos, `a field (${Object.keys(FILTER_FIELDS).join(', ')})`, describe(token));
    }
    return name as FilterField;
  }

  /** A literal for `field`, converted to what the field holds (a time, seconds, a UUID). */
  private literal(field: FilterField, op: Comparator): Literal {
    const token = this.next();
    const type = FILTER_FIELDS[field];
    const fail = (expected: string): never => {
      throw new FilterSyntaxError(token.pos, expected, describe(token));
    };
    if (token.type === 'ident' && token.value === 'null') {
      const nullable = type === 'nullable_text' || type === 'nullable_time' || type === 'number' || type === 'duration';
      if (!nullable || (op !== 'eq' && op !== 'neq')) fail(`a value for ${field} (null only with eq or neq on a field that may be empty)`);
      return null;
    }
    switch (type) {
      case 'uuid':
        return token.type === 'string' && isUuid(token.value) ? token.value.toLowerCase() : fail(`a UUID string for ${field}`);
      case 'text':
      case 'nullable_text':
        if (token.type === 'string') return token.value;
        // metadata values may be numbers or booleans in JSON; they compare as their text
        if (field === 'metadata_value' && token.type === 'number') return String(token.value);
        return fail(`a string for ${field}`);
      case 'time':
      case 'nullable_time': {
        if (token.type !== 'string' || !ISO_TIME.test(token.value)) return fail(`an ISO 8601 time string for ${field}, e.g. "2026-01-31T12:00:00Z"`);
        const date = new Date(/[Zz]|[+-]\d{2}:?\d{2}$/.test(token.value) || token.value.length === 10 ? token.value : `${token.value}Z`);
        return Number.isNaN(date.getTime()) ? fail(`a valid time for ${field}`) : date;
      }
      case 'duration': {
        if (token.type === 'number' && token.value >= 0) return token.value;
        const match = token.type === 'string' ? DURATION.exec(token.value.trim()) : null;
        return match ? Number(match[1]) * SECONDS[match[2] ?? 's']! : fail('a duration for latency: seconds, or a string like "5s", "200ms", "2m"');
      }
      case 'number':
        return token.type === 'number' ? token.value : fail(`a number for ${field}`);
      case 'bool':
        return token.type === 'ident' && (token.value === 'true' || token.value === 'false') ? token.value === 'true' : fail(`true or false for ${field}`);
      default:
        return fail(`a value for ${field}`);
    }
  }
}

/** Parses a filter; throws {@link FilterSyntaxError} with the position of the first problem. */
export function parseFilter(text: string): FilterNode {
  if (text.length > MAX_LENGTH) throw new FilterSyntaxError(MAX_LENGTH, `a filter of at most ${MAX_LENGTH} characters`, 'more');
  return new Parser(tokenize(text)).parse();
}
