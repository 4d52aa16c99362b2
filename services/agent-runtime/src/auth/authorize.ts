/**
 * Authorization with the project's `auth.on(...)` handlers. For each resource event a route
 * performs, the most specific handler runs (`resource:action`, else `resource`, else
 * `*:action`, else `*`; none means allowed) with a mutable copy of the request's data. It allows
 * (nothing or true), refuses (false → 403), throws an `HTTPException`, or returns a metadata
 * filter that the stores apply in SQL.
 */
import { PermissionDeniedError } from '@berth/errors';
import type { Json, JsonObject, MetadataCondition, MetadataFilter } from '../storage/sql.js';
import { fromHandlerError } from './authenticate.js';
import { AuthHandlerError } from './errors.js';
import type { CustomAuth } from './load.js';
import type { AuthEvent, RequestAuth } from './types.js';

/** What a route may do after authorization: the filter to apply and the (possibly edited) value. */
export interface Authorization<T> {
  /** Conditions on the resource's metadata; undefined when everything is allowed. */
  filter: MetadataFilter | undefined;
  /** The handler's copy of the request data, with its edits (e.g. `metadata.owner` stamped). */
  value: T;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The filter an authorization handler returned, as store conditions: `{k: v}` and
 * `{k: {$eq: v}}` are equality, `{k: {$contains: v}}` list membership, `{k: {$contains: [a, b]}}`
 * all of them; keys are ANDed.
 * @throws AuthHandlerError for undefined values and unknown operators (refusing beats allowing).
 */
export function toMetadataFilter(handler: string, result: Record<string, unknown>): MetadataFilter {
  const conditions: MetadataCondition[] = [];
  for (const [key, condition] of Object.entries(result)) {
    if (condition === undefined) throw new AuthHandlerError(handler, `returned a filter whose "${key}" is undefined`);
    if (!isPlainObject(condition)) {
      conditions.push({ key, op: 'eq', value: condition as Json });
      continue;
    }
    const operators = Object.keys(condition);
    if (operators.length === 0) throw new AuthHandlerError(handler, `returned a filter whose "${key}" is an empty object (use {$eq: v} or {$contains: v})`);
    for (const operator of operators) {
      const operand = condition[operator];
      if (operand === undefined) throw new AuthHandlerError(handler, `returned a filter whose "${key}.${operator}" is undefined`);
      if (operator === '$eq') conditions.push({ key, op: 'eq', value: operand as Json });
      else if (operator === '$contains') conditions.push({ key, op: 'contains', value: (Array.isArray(operand) ? operand : [operand]) as Json });
      else throw new AuthHandlerError(handler, `returned a filter with unknown operator "${operator}" for "${key}" (supported: $eq, $contains)`);
    }
  }
  return conditions;
}

/**
 * The `metadata` of a value an authorization handler may have edited.
 * @throws AuthHandlerError when the handler left something other than an object there.
 */
export function metadataOf(value: { metadata?: unknown }, event: string): JsonObject {
  const metadata = value.metadata;
  if (metadata === undefined || metadata === null) return {};
  if (!isPlainObject(metadata))
    throw new AuthHandlerError(event, `set value.metadata to ${Array.isArray(metadata) ? 'an array' : typeof metadata}; it must be an object`);
  return metadata as JsonObject;
}

/** Runs authorization handlers; without custom auth (or an unauthenticated route) everything is allowed. */
export class Authorizer {
  constructor(private readonly auth: CustomAuth | undefined) {}

  /** True when the project has custom auth. */
  get enabled(): boolean {
    return this.auth !== undefined;
  }

  /**
   * Authorizes `event` for the request's user, giving the handler `value` to read and edit.
   * @throws PermissionDeniedError (403 "Forbidden") when the handler returns false.
   * @throws AuthHttpError when it throws an `HTTPException`; AuthHandlerError (500) when it throws
   *   anything else or returns something that is neither a boolean nor a filter object.
   */
  async authorize<T extends object>(auth: RequestAuth, event: AuthEvent, value: T): Promise<Authorization<T>> {
    const callbacks = this.auth?.handlers.callbacks;
    if (!auth || !callbacks) return { filter: undefined, value };
    const [resource, action] = event.split(':') as [string, string];
    const key = [event, resource, `*:${action}`, '*'].find((k) => typeof callbacks[k] === 'function');
    if (!key) return { filter: undefined, value };
    const mutable = structuredClone(value);
    let result: unknown;
    try {
      result = await callbacks[key]!({ event, resource, action, value: mutable, permissions: [...auth.permissions], user: { ...auth.user } });
    } catch (error) {
      throw fromHandlerError(key, error);
    }
    if (result === undefined || result === null || result === true) return { filter: undefined, value: mutable };
    if (result === false) throw new PermissionDeniedError('Forbidden');
    if (!isPlainObject(result)) {
      throw new AuthHandlerError(key, `returned ${Array.isArray(result) ? 'an array' : typeof result}; expected nothing, a boolean or a filter object`);
    }
    const filter = toMetadataFilter(key, result);
    return { filter: filter.length ? filter : undefined, value: mutable };
  }
}
