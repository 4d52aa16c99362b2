/**
 * Turns graph values into the JSON the LangGraph API sends: LangChain messages as plain dicts
 * (`{content, additional_kwargs, response_metadata, id, type, ...}`), everything else as JSON.
 */
import { isBaseMessage } from '@langchain/core/messages';
import { MAX_VALUE_DEPTH, UnstorableValueError } from '../storage/json-codec.js';

/**
 * The wire form of a graph value. Throws UnstorableValueError for a value nested deeper than
 * MAX_VALUE_DEPTH (which no stream, response or jsonb column could carry).
 */
export function toWire(value: unknown): unknown {
  return wire(value, new WeakSet<object>(), 0);
}

function wire(value: unknown, seen: WeakSet<object>, depth: number): unknown {
  if (value === null || value === undefined) return value ?? null;
  if (typeof value !== 'object') return typeof value === 'bigint' ? value.toString() : value;
  if (value instanceof Date) return value.toISOString();
  if (seen.has(value)) return null;
  if (depth >= MAX_VALUE_DEPTH) throw new UnstorableValueError("the graph's output", `it is nested deeper than ${MAX_VALUE_DEPTH} levels`);
  seen.add(value);
  try {
    if (isBaseMessage(value)) {
      const { data } = value.toDict();
      return wire({ ...data, type: value.getType() }, seen, depth);
    }
    if (Array.isArray(value)) return value.map((v) => wire(v, seen, depth + 1));
    const maybe = value as { toJSON?: () => unknown };
    if (typeof maybe.toJSON === 'function' && !(value.constructor === Object)) {
      const json = maybe.toJSON();
      if (json !== value) return wire(json, seen, depth);
    }
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) {
      if (v !== undefined && typeof v !== 'function') out[key] = wire(v, seen, depth + 1);
    }
    return out;
  } finally {
    seen.delete(value);
  }
}
