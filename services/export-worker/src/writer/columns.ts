/**
 * The exported columns: their Parquet (Arrow) types and how a page of stored runs becomes an Arrow
 * record batch. Column buffers are built directly (one allocation per column and page) rather than
 * with Arrow's per-value builders, which were the slowest part of an export.
 *
 * Type choices:
 * - Times are TIMESTAMP(MICROS) adjusted to UTC: LangSmith's v1 NANOS timestamps are refused by
 *   Spark and Glue; micros is what every reader takes (and the store keeps milliseconds).
 * - Ids are strings (the canonical UUID text), as in LangSmith's files.
 * - inputs, outputs, extra, events, feedback_stats and also the lists parent_run_ids and tags are
 *   JSON text, as LangSmith writes them: queries written against LangSmith's exports keep working,
 *   and every file of an export has one schema whatever shape the runs' payloads take.
 * - Tokens are INT64. Costs are DECIMAL(38, 12): the store keeps exact decimals, and DuckDB, Spark,
 *   BigQuery and Athena read Parquet decimals exactly, where a double would turn 0.1 into
 *   0.1000000000000000055…; 12 decimals hold a price per token of a millionth of a cent, 26 integer
 *   digits any total. Values with more decimals are rounded half away from zero.
 */
import { Bool, Decimal, Field, Int64, RecordBatch, Schema, Struct, TimestampMicrosecond, Utf8, makeData, type DataType } from 'apache-arrow';
import { InvalidArgumentError } from '@berth/errors';
import type { RunRow } from '../traces/trace-store.js';

/** The run fields an export may write, in LangSmith's order (also the default column order). */
export const EXPORT_FIELDS = [
  'id',
  'tenant_id',
  'session_id',
  'trace_id',
  'parent_run_id',
  'parent_run_ids',
  'reference_example_id',
  'name',
  'run_type',
  'start_time',
  'end_time',
  'status',
  'is_root',
  'dotted_order',
  'trace_tier',
  'inputs',
  'outputs',
  'error',
  'extra',
  'events',
  'tags',
  'feedback_stats',
  'total_tokens',
  'prompt_tokens',
  'completion_tokens',
  'total_cost',
  'prompt_cost',
  'completion_cost',
  'first_token_time',
] as const;

export type ExportField = (typeof EXPORT_FIELDS)[number];

type ColumnKind = 'text' | 'json' | 'time' | 'bool' | 'int64' | 'decimal';

const TIMES = new Set<ExportField>(['start_time', 'end_time', 'first_token_time']);
const JSONS = new Set<ExportField>(['parent_run_ids', 'inputs', 'outputs', 'extra', 'events', 'tags', 'feedback_stats']);
const INTS = new Set<ExportField>(['total_tokens', 'prompt_tokens', 'completion_tokens']);
const DECIMALS = new Set<ExportField>(['total_cost', 'prompt_cost', 'completion_cost']);
/** Columns the store never leaves empty. */
const REQUIRED = new Set<ExportField>([
  'id',
  'tenant_id',
  'session_id',
  'trace_id',
  'name',
  'run_type',
  'start_time',
  'status',
  'is_root',
  'parent_run_ids',
  'tags',
]);

export const COST_SCALE = 12;
const COST_PRECISION = 38;

function kindOf(field: ExportField): ColumnKind {
  if (TIMES.has(field)) return 'time';
  if (JSONS.has(field)) return 'json';
  if (INTS.has(field)) return 'int64';
  if (DECIMALS.has(field)) return 'decimal';
  if (field === 'is_root') return 'bool';
  return 'text';
}

function arrowType(kind: ColumnKind): DataType {
  switch (kind) {
    case 'time':
      return new TimestampMicrosecond('UTC');
    case 'bool':
      return new Bool();
    case 'int64':
      return new Int64();
    case 'decimal':
      return new Decimal(COST_SCALE, COST_PRECISION, 128);
    default:
      return new Utf8();
  }
}

/** The columns to write: `fields` checked (known, no repeats) or every field. */
export function selectFields(fields: readonly string[] | undefined): readonly ExportField[] {
  if (fields === undefined) return EXPORT_FIELDS;
  const known = new Set<string>(EXPORT_FIELDS);
  const unknown = fields.filter((f) => !known.has(f));
  if (unknown.length > 0) throw new InvalidArgumentError(`unknown export fields: ${unknown.join(', ')} (known: ${EXPORT_FIELDS.join(', ')})`);
  if (new Set(fields).size !== fields.length) throw new InvalidArgumentError('export fields are listed more than once');
  if (fields.length === 0) throw new InvalidArgumentError('at least one export field is needed');
  return fields as readonly ExportField[];
}

export function exportSchema(fields: readonly ExportField[]): Schema {
  return new Schema(fields.map((f) => new Field(f, arrowType(kindOf(f)), !REQUIRED.has(f))));
}

/**
 * A page of runs as plain column buffers, in the order of the fields they were made for: what an
 * Arrow column holds, without Arrow's objects, so that a page can move to the encoder's thread (its
 * buffers are transferred, not copied; each owns its memory) and become a record batch there.
 */
export interface ColumnPage {
  length: number;
  columns: ColumnBuffers[];
}

export interface ColumnBuffers {
  nullCount: number;
  /** Arrow's validity bitmap; absent when nothing is null. */
  nullBitmap?: Uint8Array;
  /** Utf8 columns: where each value starts in `data` (length + 1 entries). */
  valueOffsets?: Int32Array;
  data: Uint8Array | Int32Array | Uint32Array | BigInt64Array;
}

/**
 * One page of runs as column buffers for `fields`. The rows are read with `jsonText`, so JSON
 * columns and lists already are the JSON text to write.
 */
export function runsToColumns(fields: readonly ExportField[], rows: readonly RunRow[]): ColumnPage {
  return { length: rows.length, columns: fields.map((field) => columnBuffers(field, rows)) };
}

/** A page of {@link runsToColumns} as a record batch of `schema` (from {@link exportSchema} of the same fields). */
export function columnsToBatch(schema: Schema, page: ColumnPage): RecordBatch {
  const children = schema.fields.map((field, i) => {
    const { nullCount, nullBitmap, valueOffsets, data } = page.columns[i]!;
    return makeData({ type: field.type as DataType, length: page.length, nullCount, nullBitmap, valueOffsets, data } as Parameters<typeof makeData>[0]);
  });
  const data = makeData({ type: new Struct(schema.fields), length: page.length, nullCount: 0, children });
  return new RecordBatch(schema, data);
}

function columnBuffers(field: ExportField, rows: readonly RunRow[]): ColumnBuffers {
  const kind = kindOf(field);
  const values = rows.map((row) => (kind === 'decimal' ? finiteDecimal(row[field]) : (row[field] ?? null)));
  const nullBitmap = validity(values);
  const nullCount = nullBitmap ? values.reduce<number>((n, v) => (v === null ? n + 1 : n), 0) : 0;
  const common = { nullCount, ...(nullBitmap ? { nullBitmap } : {}) };
  switch (kind) {
    case 'text':
    case 'json': {
      const strings = values.map((v) => (v === null ? '' : String(v)));
      const [valueOffsets, data] = utf8Buffers(strings);
      return { ...common, valueOffsets, data };
    }
    case 'time': {
      // Int64 micros written as (low, high) 32-bit words: a time in ms times 1000 stays below 2^53.
      const micros64 = new BigInt64Array(values.length);
      const words = new Int32Array(micros64.buffer);
      values.forEach((v, i) => {
        if (v === null) return;
        const micros = (v as Date).getTime() * 1000;
        words[2 * i] = micros % 0x1_0000_0000;
        words[2 * i + 1] = Math.floor(micros / 0x1_0000_0000);
      });
      return { ...common, data: micros64 };
    }
    case 'int64': {
      const ints = new BigInt64Array(values.length);
      values.forEach((v, i) => {
        if (v !== null) ints[i] = BigInt(v as string | number);
      });
      return { ...common, data: ints };
    }
    case 'decimal': {
      const words = new BigUint64Array(values.length * 2);
      values.forEach((v, i) => {
        if (v === null) return;
        const scaled = BigInt.asUintN(128, scaleDecimal(String(v), field));
        words[2 * i] = BigInt.asUintN(64, scaled);
        words[2 * i + 1] = scaled >> 64n;
      });
      return { ...common, data: new Uint32Array(words.buffer) };
    }
    case 'bool': {
      const bits = new Uint8Array(Math.ceil(values.length / 8));
      values.forEach((v, i) => {
        if (v === true) bits[i >> 3]! |= 1 << (i & 7);
      });
      return { ...common, data: bits };
    }
  }
}

/** Arrow's validity bitmap (bit set = value present), or undefined when nothing is null. */
function validity(values: readonly unknown[]): Uint8Array | undefined {
  if (!values.includes(null)) return undefined;
  const bits = new Uint8Array(Math.ceil(values.length / 8));
  values.forEach((v, i) => {
    if (v !== null) bits[i >> 3]! |= 1 << (i & 7);
  });
  return bits;
}

function utf8Buffers(strings: readonly string[]): [Int32Array, Uint8Array] {
  const offsets = new Int32Array(strings.length + 1);
  let total = 0;
  strings.forEach((s, i) => {
    total += Buffer.byteLength(s, 'utf8');
    offsets[i + 1] = total;
  });
  if (total > 0x7fff_ffff) throw new InvalidArgumentError(`a page of runs holds more than 2 GiB of text; export with a smaller page size`);
  // Memory of its own, not a slice of Node's shared pool: the page's buffers move to the encoder's thread.
  const data = Buffer.allocUnsafeSlow(total);
  strings.forEach((s, i) => data.write(s, offsets[i]!, 'utf8'));
  return [offsets, new Uint8Array(data.buffer, data.byteOffset, data.byteLength)];
}

/**
 * A stored cost, or null for NaN and infinities: Postgres numeric allows them, a Parquet decimal
 * cannot hold them, and failing the export for ever over one run's cost would be worse.
 */
function finiteDecimal(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  const text = String(value);
  return /^[+-]?(nan|infinity|inf)$/i.test(text.trim()) ? null : text;
}

/** A Postgres numeric's text as an integer of {@link COST_SCALE} decimals (rounded half away from zero). */
export function scaleDecimal(text: string, field: string): bigint {
  // Postgres prints numerics as plain decimals; exponents are accepted for any other source.
  const match = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!match || (match[2] === '' && (match[3] ?? '') === '')) throw new InvalidArgumentError(`${field} is not a finite decimal: ${text}`);
  const [, sign, whole = '', fraction = '', exponent = '0'] = match;
  const scale = COST_SCALE + Number(exponent) - fraction.length;
  let digits = BigInt(`${whole}${fraction}` || '0');
  if (scale >= 0) digits *= power(scale);
  else {
    const divisor = power(-scale);
    const remainder = digits % divisor;
    digits /= divisor;
    if (remainder * 2n >= divisor) digits += 1n;
  }
  if (digits >= power(COST_PRECISION)) throw new InvalidArgumentError(`${field} ${text} does not fit DECIMAL(${COST_PRECISION}, ${COST_SCALE})`);
  return sign === '-' ? -digits : digits;
}

// Powers of ten by exponent, computed once: this runs for three columns of every exported run.
const POWERS = Array.from({ length: 64 }, (_, i) => 10n ** BigInt(i));
const power = (exponent: number): bigint => POWERS[exponent] ?? 10n ** BigInt(exponent);
