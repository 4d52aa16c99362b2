/**
 * What both adapters share about the wire: argument validation, event encoding, the wake-up
 * messages a publish broadcasts (small events ride inside them) and control messages.
 */
import { InvalidArgumentError } from '@berth/errors';
import { z } from 'zod';
import type { BrokerEvent, ControlMessage, EventInput, SubscribeFrom } from './broker.js';
import { EventTooLargeError, InvalidEventDataError } from './errors.js';

/** An event as stored: its sequence number as a number. */
export interface StoredEvent {
  seq: number;
  event: string;
  data: unknown;
}

/** An event ready to append: its data as JSON text. */
export interface EncodedEvent {
  event: string;
  json: string;
  bytes: number;
}

/**
 * A wake-up of a run's subscribers. `events`: `count` events from `first` were appended (with
 * their content when small); `end`: the stream ended after `next` events; `deleted`: the run was
 * deleted; `resync`: wake-ups may have been lost (a reconnect), re-read.
 */
export type Wake =
  { kind: 'events'; first: number; count: number; inline?: StoredEvent[] } | { kind: 'end'; next: number } | { kind: 'deleted' } | { kind: 'resync' };

/**
 * Wake-ups carry their events inline while the whole message stays under this many bytes
 * (Postgres' NOTIFY payload limit is 8000); larger events are read from storage.
 */
export const INLINE_LIMIT_BYTES = 7800;
/** Bytes of a wake-up besides its run id and inline events (field names, sequence numbers). */
const WAKE_OVERHEAD_BYTES = 64;
/** Largest control message, in bytes of JSON (it travels in one NOTIFY / PUBLISH). */
export const CONTROL_MAX_BYTES = 7000;

const MAX_NAME_LENGTH = 256;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function assertName(kind: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_NAME_LENGTH) {
    throw new InvalidArgumentError(`${kind} must be a string of 1 to ${MAX_NAME_LENGTH} characters`);
  }
  if (value.includes('\u0000') || LONE_SURROGATE.test(value)) {
    throw new InvalidArgumentError(`${kind} must not contain U+0000 or unpaired surrogates`);
  }
}

/** Throws an `InvalidArgumentError` unless `runId` is a usable run id. */
export function assertRunId(runId: unknown): asserts runId is string {
  assertName('run id', runId);
}

/** Serializes one event for appending, enforcing JSON-ness and the size limit. */
export function encodeEvent(runId: string, input: EventInput, maxBytes: number): EncodedEvent {
  assertName('event name', input.event);
  let json: string | undefined;
  try {
    json = JSON.stringify(input.data);
  } catch (error) {
    throw new InvalidEventDataError(runId, input.event, (error as Error).message, { cause: error });
  }
  if (typeof json !== 'string') throw new InvalidEventDataError(runId, input.event, `${typeof input.data} is not JSON`);
  const bytes = Buffer.byteLength(json);
  if (bytes > maxBytes) throw new EventTooLargeError(runId, input.event, bytes, maxBytes);
  return { event: input.event, json, bytes };
}

/**
 * The JSON array `[[event, data], …]` of a batch, to ride inside its wake-up, or `null` when the
 * wake-up (`reserveBytes` of it being other fields) would exceed {@link INLINE_LIMIT_BYTES}.
 */
export function inlineEvents(events: readonly EncodedEvent[], reserveBytes: number): string | null {
  const budget = INLINE_LIMIT_BYTES - WAKE_OVERHEAD_BYTES - reserveBytes;
  let estimate = 2;
  for (const e of events) {
    estimate += e.bytes + e.event.length + 6;
    if (estimate > budget) return null;
  }
  const inline = `[${events.map((e) => `[${JSON.stringify(e.event)},${e.json}]`).join(',')}]`;
  return Buffer.byteLength(inline) <= budget ? inline : null;
}

/** Decodes a stored event. */
export function decodeEvent(seq: number, event: string, json: string): StoredEvent {
  return { seq, event, data: JSON.parse(json) as unknown };
}

/** The public form of a stored event. */
export function toBrokerEvent(e: StoredEvent): BrokerEvent {
  return { id: String(e.seq), event: e.event, data: e.data };
}

/** The sequence number a subscription has already seen (`-1`: none) for `'start'` and `{after}`. */
export function cursorOf(from: SubscribeFrom): number | 'now' {
  if (from === 'start') return -1;
  if (from === 'now') return 'now';
  if (typeof from === 'object' && from !== null && typeof from.after === 'string' && /^(0|[1-9]\d{0,14})$/.test(from.after)) {
    return Number(from.after);
  }
  throw new InvalidArgumentError(`invalid subscription start ${JSON.stringify(from)}: use 'start', 'now' or { after: '<event id>' }`);
}

const wakeSchema = z.union([
  z.object({
    r: z.string().optional(),
    s: z.number().int().nonnegative(),
    n: z.number().int().positive(),
    i: z
      .array(z.tuple([z.string(), z.unknown()]))
      .nullable()
      .optional(),
  }),
  z.object({ r: z.string().optional(), e: z.number().int().nonnegative() }),
  z.object({ r: z.string().optional(), d: z.literal(1) }),
]);

/** Parses a wake-up message (see the SQL in `postgres-sql.ts` and the Lua in `redis-scripts.ts`). */
export function parseWake(payload: string): { runId?: string; wake: Wake } | undefined {
  let parsed: z.infer<typeof wakeSchema>;
  try {
    parsed = wakeSchema.parse(JSON.parse(payload));
  } catch {
    return undefined;
  }
  if ('s' in parsed) {
    const first = parsed.s;
    const inline = parsed.i?.length === parsed.n ? parsed.i.map(([event, data], k) => ({ seq: first + k, event, data })) : undefined;
    return { runId: parsed.r, wake: { kind: 'events', first, count: parsed.n, ...(inline ? { inline } : {}) } };
  }
  if ('e' in parsed) return { runId: parsed.r, wake: { kind: 'end', next: parsed.e } };
  return { runId: parsed.r, wake: { kind: 'deleted' } };
}

const controlSchema = z.looseObject({ action: z.enum(['interrupt', 'rollback']) });

/** Validates and serializes a control message. */
export function encodeControl(message: ControlMessage): string {
  const result = controlSchema.safeParse(message);
  if (!result.success) {
    throw new InvalidArgumentError(`invalid control message: ${result.error.issues.map((i) => i.message).join('; ')}`, { cause: result.error });
  }
  let json: string;
  try {
    json = JSON.stringify(message);
  } catch (error) {
    throw new InvalidArgumentError('control message has no JSON form', { cause: error });
  }
  if (Buffer.byteLength(json) > CONTROL_MAX_BYTES) throw new InvalidArgumentError(`control message exceeds ${CONTROL_MAX_BYTES} bytes`);
  return json;
}

/** Parses a received control message; `undefined` for one this version does not understand. */
export function parseControl(value: unknown): ControlMessage | undefined {
  const result = controlSchema.safeParse(value);
  return result.success ? (result.data as ControlMessage) : undefined;
}
