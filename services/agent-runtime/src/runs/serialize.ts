/**
 * Turns graph values into the JSON the LangGraph API sends: LangChain messages as plain dicts
 * (`{content, additional_kwargs, response_metadata, id, type, ...}`), everything else as JSON.
 */
import { isBaseMessage } from '@langchain/core/messages';

export function toWire(value: unknown, seen = new WeakSet<object>()): unknown {
  if (value === null || value === undefined) return value ?? null;
  if (typeof value !== 'object') return typeof value === 'bigint' ? value.toString() : value;
  if (value instanceof Date) return value.toISOString();
  if (seen.has(value)) return null;
  seen.add(value);
  try {
    if (isBaseMessage(value)) {
      const { data } = value.toDict();
      return toWire({ ...data, type: value.getType() }, seen);
    }
    if (Array.isArray(value)) return value.map((v) => toWire(v, seen));
    const maybe = value as { toJSON?: () => unknown };
    if (typeof maybe.toJSON === 'function' && !(value.constructor === Object)) {
      const json = maybe.toJSON();
      if (json !== value) return toWire(json, seen);
    }
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) {
      if (v !== undefined && typeof v !== 'function') out[key] = toWire(v, seen);
    }
    return out;
  } finally {
    seen.delete(value);
  }
}
