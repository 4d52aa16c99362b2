/**
 * Strategic merge patch (`application/strategic-merge-patch+json`), what helm's and kubectl's
 * client-side apply send: like a merge patch, except that lists of objects with a merge key
 * (containers by `name`, volume mounts by `mountPath`, …) merge item by item, and the `$patch`,
 * `$setElementOrder/…`, `$deleteFromPrimitiveList/…` and `$retainKeys` directives are honoured.
 * Merge keys come from the field's name (the fake has no schemas); other lists are replaced.
 */
type Obj = Record<string, unknown>;

const MERGE_KEYS: Record<string, string[]> = {
  containers: ['name'],
  initContainers: ['name'],
  ephemeralContainers: ['name'],
  volumes: ['name'],
  env: ['name'],
  imagePullSecrets: ['name'],
  volumeMounts: ['mountPath'],
  volumeDevices: ['devicePath'],
  ports: ['containerPort', 'port'],
  ownerReferences: ['uid'],
  conditions: ['type'],
};

function isObject(value: unknown): value is Obj {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function mergeKeyOf(field: string, items: unknown[]): string | undefined {
  return MERGE_KEYS[field]?.find((key) => items.some((item) => isObject(item) && key in item));
}

function mergeList(field: string, target: unknown, patch: unknown[], order: unknown[] | undefined): unknown[] {
  const current = Array.isArray(target) ? target : [];
  const key = mergeKeyOf(field, [...patch, ...current]);
  if (!key) return structuredClone(patch);
  if (patch.some((item) => isObject(item) && item['$patch'] === 'replace')) {
    return patch.filter((item) => !(isObject(item) && item['$patch'] === 'replace')).map((item) => strategicMerge(undefined, item));
  }
  const result = current.map((item) => structuredClone(item));
  for (const item of patch) {
    if (!isObject(item)) continue;
    const at = result.findIndex((existing) => isObject(existing) && existing[key] === item[key]);
    if (item['$patch'] === 'delete') {
      if (at >= 0) result.splice(at, 1);
    } else if (at >= 0) result[at] = strategicMerge(result[at], item);
    else result.push(strategicMerge(undefined, item));
  }
  if (!order) return result;
  const rank = (item: unknown): number => {
    const k = order.findIndex((o) => isObject(o) && isObject(item) && o[key] === item[key]);
    return k < 0 ? order.length : k;
  };
  return result.sort((a, b) => rank(a) - rank(b));
}

/** Applies a strategic merge patch to `target` (a copy is returned; `target` is not changed). */
export function strategicMerge(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return structuredClone(patch);
  if (patch['$patch'] === 'delete') return undefined;
  const replace = patch['$patch'] === 'replace';
  const result: Obj = isObject(target) && !replace ? { ...target } : {};
  const retainKeys = patch['$retainKeys'];
  for (const [field, value] of Object.entries(patch)) {
    if (field.startsWith('$setElementOrder/') || field === '$patch' || field === '$retainKeys') continue;
    if (field.startsWith('$deleteFromPrimitiveList/')) {
      const name = field.slice('$deleteFromPrimitiveList/'.length);
      const drop = Array.isArray(value) ? value : [];
      if (Array.isArray(result[name])) result[name] = (result[name] as unknown[]).filter((v) => !drop.includes(v));
      continue;
    }
    if (value === null) delete result[field];
    else if (Array.isArray(value)) result[field] = mergeList(field, result[field], value, patch[`$setElementOrder/${field}`] as unknown[] | undefined);
    else {
      const merged = strategicMerge(result[field], value);
      if (merged === undefined) delete result[field];
      else result[field] = merged;
    }
  }
  if (Array.isArray(retainKeys)) for (const field of Object.keys(result)) if (!retainKeys.includes(field)) delete result[field];
  return result;
}
