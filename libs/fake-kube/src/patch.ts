/**
 * Patch application: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and the patch that
 * server-side apply makes of a manager's applied configurations. Strategic merge patches are in
 * strategic-merge.ts.
 */
import { KubeApiError } from './errors.js';

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** RFC 7386: objects merge recursively, `null` deletes, everything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return structuredClone(patch);
  const result: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

interface Operation {
  op: 'add' | 'remove' | 'replace' | 'move' | 'copy' | 'test';
  path: string;
  from?: string;
  value?: unknown;
}

function pointer(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw KubeApiError.badRequest(`invalid JSON pointer "${path}"`);
  return path
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function parentOf(doc: unknown, parts: string[], path: string): { parent: Record<string, unknown> | unknown[]; key: string } {
  let current: unknown = doc;
  for (const part of parts.slice(0, -1)) {
    if (Array.isArray(current)) current = current[Number(part)];
    else if (isObject(current)) current = current[part];
    else current = undefined;
    if (current === undefined)
      throw new KubeApiError(422, 'Invalid', `the server rejected our request due to an error in our request: doc is missing path: "${path}"`);
  }
  if (!Array.isArray(current) && !isObject(current)) {
    throw new KubeApiError(422, 'Invalid', `doc is missing path: "${path}"`);
  }
  return { parent: current, key: parts[parts.length - 1]! };
}

function get(doc: unknown, path: string): unknown {
  const parts = pointer(path);
  if (parts.length === 0) return doc;
  const { parent, key } = parentOf(doc, parts, path);
  const value = Array.isArray(parent) ? parent[Number(key)] : parent[key];
  if (value === undefined) throw new KubeApiError(422, 'Invalid', `doc is missing path: "${path}"`);
  return value;
}

function remove(doc: unknown, path: string): unknown {
  const parts = pointer(path);
  const { parent, key } = parentOf(doc, parts, path);
  const value = get(doc, path);
  if (Array.isArray(parent)) parent.splice(Number(key), 1);
  else delete parent[key];
  return value;
}

function add(doc: unknown, path: string, value: unknown, replace: boolean): unknown {
  const parts = pointer(path);
  if (parts.length === 0) return value;
  if (replace) get(doc, path);
  const { parent, key } = parentOf(doc, parts, path);
  if (Array.isArray(parent)) {
    const index = key === '-' ? parent.length : Number(key);
    if (!Number.isInteger(index) || index < 0 || index > parent.length) throw new KubeApiError(422, 'Invalid', `index out of range: "${path}"`);
    if (replace) parent[index] = value;
    else parent.splice(index, 0, value);
  } else {
    parent[key] = value;
  }
  return doc;
}

/** RFC 6902 on a copy of `target`. */
export function jsonPatch(target: unknown, operations: unknown): unknown {
  if (!Array.isArray(operations)) throw KubeApiError.badRequest('a JSON patch must be an array of operations');
  let doc = structuredClone(target);
  for (const raw of operations as Operation[]) {
    switch (raw.op) {
      case 'add':
        doc = add(doc, raw.path, structuredClone(raw.value), false);
        break;
      case 'replace':
        doc = add(doc, raw.path, structuredClone(raw.value), true);
        break;
      case 'remove':
        remove(doc, raw.path);
        break;
      case 'move': {
        const value = remove(doc, raw.from ?? '');
        doc = add(doc, raw.path, value, false);
        break;
      }
      case 'copy':
        doc = add(doc, raw.path, structuredClone(get(doc, raw.from ?? '')), false);
        break;
      case 'test':
        if (JSON.stringify(get(doc, raw.path)) !== JSON.stringify(raw.value)) {
          throw new KubeApiError(422, 'Invalid', `testing value ${raw.path} failed`);
        }
        break;
      default:
        throw KubeApiError.badRequest(`unknown JSON patch operation "${String((raw as { op?: unknown }).op)}"`);
    }
  }
  return doc;
}

/**
 * The merge patch that takes an object from what a field manager applied last (`previous`) to what
 * it applies now (`next`): fields it set before and leaves out now are removed, everything it sets
 * is set. Fields it never set (server defaults, other writers' fields) are kept — the core of
 * server-side apply, without per-field ownership across managers.
 */
export function applyPatch(previous: unknown, next: unknown): unknown {
  if (!isObject(next) || !isObject(previous)) return structuredClone(next);
  const patch: Record<string, unknown> = {};
  for (const key of Object.keys(previous)) if (!(key in next)) patch[key] = null;
  for (const [key, value] of Object.entries(next)) patch[key] = key in previous ? applyPatch(previous[key], value) : structuredClone(value);
  return patch;
}
