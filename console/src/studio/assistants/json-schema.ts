/**
 * A form's working values for a JSON Schema object, and back: what the inputs hold (text as typed,
 * so that a wrong number can be shown and refused rather than lost), and the value they make or the
 * messages that say which field is wrong. Only the shapes a form can show have inputs (string,
 * number, integer, boolean, enum, nested objects); any other is edited as JSON text.
 */

/** The part of JSON Schema the form reads. */
export interface JsonSchema {
  type?: string | string[];
  title?: string;
  description?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  enum?: unknown[];
  default?: unknown;
  minimum?: number;
  maximum?: number;
}

export type FieldKind = 'string' | 'number' | 'integer' | 'boolean' | 'enum' | 'object' | 'json';

/** How a property is edited: an input for the simple shapes, a fieldset for objects with properties, else JSON text. */
export function fieldKind(schema: JsonSchema): FieldKind {
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return 'enum';
  switch (schema.type) {
    case 'string':
    case 'number':
    case 'integer':
    case 'boolean':
      return schema.type;
    case 'object':
      return schema.properties && Object.keys(schema.properties).length > 0 ? 'object' : 'json';
    default:
      return 'json';
  }
}

/**
 * What the inputs hold: text for strings, numbers and JSON (as typed); the chosen option's index
 * for an enum ('' for none); true/false or unset for a boolean; a draft per property for an object,
 * with the value's keys the schema does not name kept as they were.
 */
export type Draft = string | boolean | undefined | ObjectDraft;
export interface ObjectDraft {
  fields: Record<string, Draft>;
  extra: Record<string, unknown>;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The inputs' contents for `value` (an object, when the schema is one). */
export function toDraft(schema: JsonSchema, value: unknown): Draft {
  const kind = fieldKind(schema);
  if (kind === 'object') {
    const record = isRecord(value) ? value : {};
    const fields: Record<string, Draft> = {};
    for (const [key, property] of Object.entries(schema.properties!)) fields[key] = toDraft(property, record[key]);
    const extra = Object.fromEntries(Object.entries(record).filter(([key]) => !(key in schema.properties!)));
    return { fields, extra };
  }
  if (value === undefined) return kind === 'boolean' ? undefined : '';
  switch (kind) {
    case 'boolean':
      return typeof value === 'boolean' ? value : undefined;
    case 'enum': {
      const at = schema.enum!.findIndex((option) => JSON.stringify(option) === JSON.stringify(value));
      return at < 0 ? '' : String(at);
    }
    case 'json':
      return JSON.stringify(value, null, 2);
    default:
      return typeof value === 'string' ? value : JSON.stringify(value);
  }
}

/** A field's problem: where (property names from the top) and what to do. */
export interface FieldError {
  path: string[];
  message: string;
}

export type Parsed = { ok: true; value: unknown } | { ok: false; errors: FieldError[] };

/** The value the inputs make (`undefined`: the field is left out), or what is wrong with them. */
export function fromDraft(schema: JsonSchema, draft: Draft, required = true, path: string[] = []): Parsed {
  const kind = fieldKind(schema);
  const fail = (message: string): Parsed => ({ ok: false, errors: [{ path, message }] });
  if (kind === 'object') {
    const { fields, extra } = draft as ObjectDraft;
    const value: Record<string, unknown> = { ...extra };
    const errors: FieldError[] = [];
    for (const [key, property] of Object.entries(schema.properties!)) {
      const parsed = fromDraft(property, fields[key], schema.required?.includes(key) ?? false, [...path, key]);
      if (!parsed.ok) errors.push(...parsed.errors);
      else if (parsed.value !== undefined) value[key] = parsed.value;
    }
    if (errors.length > 0) return { ok: false, errors };
    // A nested object none of whose fields is set is left out, unless it must be there.
    return { ok: true, value: !required && path.length > 0 && Object.keys(value).length === 0 ? undefined : value };
  }
  if (draft === undefined || draft === '') {
    // An empty text and an unticked box are values of their own; other empty fields are unset.
    if (kind === 'string' && required) return { ok: true, value: '' };
    if (kind === 'boolean' && required) return { ok: true, value: false };
    return required ? fail('Required.') : { ok: true, value: undefined };
  }
  switch (kind) {
    case 'boolean':
      return { ok: true, value: draft };
    case 'enum':
      return { ok: true, value: schema.enum![Number(draft)] };
    case 'string':
      return { ok: true, value: draft };
    case 'number':
    case 'integer': {
      const text = (draft as string).trim();
      const number = Number(text);
      if (text === '' || !Number.isFinite(number)) return fail(kind === 'integer' ? 'Enter a whole number.' : 'Enter a number.');
      if (kind === 'integer' && !Number.isInteger(number)) return fail('Enter a whole number.');
      if (schema.minimum !== undefined && number < schema.minimum) return fail(`Enter at least ${schema.minimum}.`);
      if (schema.maximum !== undefined && number > schema.maximum) return fail(`Enter at most ${schema.maximum}.`);
      return { ok: true, value: number };
    }
    default:
      return parseJson(draft as string, path);
  }
}

/** JSON text as a value, or a message naming the problem. */
export function parseJson(text: string, path: string[] = []): Parsed {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (error) {
    return { ok: false, errors: [{ path, message: `Not valid JSON: ${error instanceof Error ? error.message : String(error)}` }] };
  }
}

/** The draft with the field at `path` (inside nested objects) replaced by `value`. */
export function setField(draft: Draft, path: string[], value: Draft): Draft {
  if (path.length === 0) return value;
  const object = draft as ObjectDraft;
  const [key, ...rest] = path as [string, ...string[]];
  return { ...object, fields: { ...object.fields, [key]: setField(object.fields[key], rest, value) } };
}
