/**
 * The fake's object store: every object keyed by group/version/resource/namespace/name, with the
 * metadata an API server maintains (uid, resourceVersion, generation, creationTimestamp), its
 * validation, status subresource semantics, namespaces that must exist, and owner-reference
 * garbage collection. The HTTP server and the simulated controllers both write through it.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { KubeApiError } from './errors.js';
import { applyPatch, jsonPatch, mergePatch } from './patch.js';
import { strategicMerge } from './strategic-merge.js';
import { builtinResources, metadataErrors, nameError, nameRuleOf } from './resources.js';
import { matches, matchesFields, parseSelector } from './selectors.js';
import { apiVersionOf, type KubeObject, type ResourceType, timestamp } from './types.js';

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** One committed change, delivered synchronously to subscribers after it is stored. */
export interface StoreEvent {
  type: ChangeType;
  resource: ResourceType;
  object: KubeObject;
}

export interface WriteOptions {
  /** Validate and answer as if stored, but store nothing (`?dryRun=All`). */
  dryRun?: boolean;
  /** Write the `/status` subresource: only `status` changes. */
  subresource?: 'status';
  /** Keep the `status` given on create (controllers creating pods); the API resets it. */
  keepStatus?: boolean;
}

export interface DeleteOptions extends WriteOptions {
  /**
   * How long a pod bound to a node (`spec.nodeName`) gets to stop (`?gracePeriodSeconds=`); 0
   * removes it at once (what its kubelet does once its containers ended).
   * @default the pod's `spec.terminationGracePeriodSeconds`, else 30
   */
  gracePeriodSeconds?: number;
}

export interface ListOptions {
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
}

/** A resource given by its type, its plural (`pods`), or `group/resource` (`apps/deployments`). */
export type ResourceRef = ResourceType | string;

export const PATCH_CONTENT_TYPES = [
  'application/merge-patch+json',
  'application/strategic-merge-patch+json',
  'application/json-patch+json',
  'application/apply-patch+yaml',
] as const;

export interface ApplyOptions extends WriteOptions {
  /** Who applies (`?fieldManager=`): each manager's last applied configuration is kept apart. */
  fieldManager: string;
}

/** Stable JSON (sorted keys) for comparing and hashing objects. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/** The part of an object whose change bumps `metadata.generation`. */
function specPart(object: KubeObject): string {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = object;
  return canonical(rest);
}

export class ObjectStore {
  readonly #types = new Map<string, ResourceType>();
  readonly #objects = new Map<string, KubeObject>();
  readonly #listeners = new Set<(event: StoreEvent) => void>();
  /** What each field manager applied last, by object uid and manager (server-side apply). */
  readonly #applied = new Map<string, Map<string, KubeObject>>();
  #resourceVersion = 0;

  constructor(resources: ResourceType[] = builtinResources()) {
    for (const type of resources) this.register(type);
  }

  /** Serves one more resource (e.g. a custom resource). */
  register(type: ResourceType): void {
    this.#types.set(`${type.group}/${type.version}/${type.resource}`, type);
  }

  types(): ResourceType[] {
    return [...this.#types.values()];
  }

  lookup(group: string, version: string, resource: string): ResourceType | undefined {
    return this.#types.get(`${group}/${version}/${resource}`);
  }

  /** Resolves a {@link ResourceRef}; throws on an unknown resource. */
  type(ref: ResourceRef): ResourceType {
    if (typeof ref !== 'string') return ref;
    const [group, resource] = ref.includes('/') ? ref.split('/', 2) : ['', ref];
    const found = this.types().find((t) => t.resource === resource && (ref.includes('/') ? t.group === group : true));
    if (!found) throw new Error(`fake-kube serves no resource "${ref}"`);
    return found;
  }

  /** The current resourceVersion of the whole store (what lists report). */
  get resourceVersion(): string {
    return String(this.#resourceVersion);
  }

  /** Calls `listener` after every committed change; returns the unsubscribe function. */
  subscribe(listener: (event: StoreEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The object, or undefined (a copy: changing it changes nothing stored). */
  find(ref: ResourceRef, namespace: string | undefined, name: string): KubeObject | undefined {
    const type = this.type(ref);
    const stored = this.#objects.get(this.#key(type, namespace, name));
    return stored ? structuredClone(stored) : undefined;
  }

  get(ref: ResourceRef, namespace: string | undefined, name: string): KubeObject {
    const type = this.type(ref);
    const found = this.find(type, namespace, name);
    if (!found) throw KubeApiError.notFound(type, name);
    return found;
  }

  /** Objects of a resource in one namespace (or all, when `namespace` is undefined), by name. */
  list(ref: ResourceRef, namespace: string | undefined, options: ListOptions = {}): KubeObject[] {
    const type = this.type(ref);
    const labels = parseSelector(options.labelSelector);
    const fields = parseSelector(options.fieldSelector);
    const prefix = `${type.group}/${type.version}/${type.resource}/`;
    const items: KubeObject[] = [];
    for (const [key, object] of this.#objects) {
      if (!key.startsWith(prefix)) continue;
      if (type.namespaced && namespace !== undefined && object.metadata.namespace !== namespace) continue;
      if (!matches(labels, object.metadata.labels ?? {})) continue;
      if (!matchesFields(fields, object)) continue;
      items.push(structuredClone(object));
    }
    return items.sort((a, b) => `${a.metadata.namespace ?? ''}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace ?? ''}/${b.metadata.name}`));
  }

  create(ref: ResourceRef, namespace: string | undefined, body: KubeObject, options: WriteOptions = {}): KubeObject {
    const type = this.type(ref);
    const object = structuredClone(body) as KubeObject;
    if (!object || typeof object !== 'object' || typeof object.metadata !== 'object' || object.metadata === null) {
      throw KubeApiError.badRequest('the object has no metadata');
    }
    const ns = this.#namespaceOf(type, namespace, object);
    if (!object.metadata.name && object.metadata.generateName) {
      object.metadata.name = `${object.metadata.generateName}${randomBytes(4).toString('hex').slice(0, 5)}`;
    }
    const name = object.metadata.name;
    if (!name) throw new KubeApiError(422, 'Invalid', `${type.kind} "" is invalid: metadata.name: Required value: name or generateName is required`);
    const key = this.#key(type, ns, name);
    if (this.#objects.has(key)) throw KubeApiError.alreadyExists(type, name);

    object.apiVersion = apiVersionOf(type);
    object.kind = type.kind;
    if (type.namespaced) object.metadata.namespace = ns;
    object.metadata.uid = randomUUID();
    object.metadata.creationTimestamp = timestamp();
    delete object.metadata.deletionTimestamp;
    if (type.generation) object.metadata.generation = 1;
    else delete object.metadata.generation;
    if (type.statusSubresource && !options.keepStatus) {
      delete object['status'];
      if (type.group === '' && type.resource === 'pods') object['status'] = { phase: 'Pending' };
      if (type.group === '' && type.resource === 'namespaces') object['status'] = { phase: 'Active' };
    }
    this.#validate(type, object, undefined);
    if (options.dryRun) return object;
    object.metadata.resourceVersion = String(++this.#resourceVersion);
    this.#objects.set(key, object);
    this.#emit('ADDED', type, object);
    return structuredClone(object);
  }

  /**
   * PUT: replaces the object. A `metadata.resourceVersion` in the body must be the stored one
   * (optimistic concurrency); without one the write is unconditional, as upstream.
   */
  replace(ref: ResourceRef, namespace: string | undefined, name: string, body: KubeObject, options: WriteOptions = {}): KubeObject {
    const type = this.type(ref);
    const ns = type.namespaced ? namespace : undefined;
    const key = this.#key(type, ns, name);
    const existing = this.#objects.get(key);
    if (!existing) throw KubeApiError.notFound(type, name);
    const incoming = structuredClone(body) as KubeObject;
    if (!incoming || typeof incoming.metadata !== 'object' || incoming.metadata === null) throw KubeApiError.badRequest('the object has no metadata');
    if (incoming.metadata.name !== undefined && incoming.metadata.name !== name) {
      throw KubeApiError.badRequest(`the name of the object (${incoming.metadata.name}) does not match the name on the URL (${name})`);
    }
    if (type.namespaced && incoming.metadata.namespace !== undefined && incoming.metadata.namespace !== ns) {
      throw KubeApiError.badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    if (incoming.metadata.resourceVersion !== undefined && incoming.metadata.resourceVersion !== existing.metadata.resourceVersion) {
      throw KubeApiError.conflict(type, name);
    }

    let next: KubeObject;
    if (options.subresource === 'status') {
      next = structuredClone(existing);
      if (incoming['status'] === undefined) delete next['status'];
      else next['status'] = incoming['status'];
    } else {
      next = incoming;
      if (type.statusSubresource) {
        if (existing['status'] === undefined) delete next['status'];
        else next['status'] = structuredClone(existing['status']);
      }
      next.metadata = {
        ...incoming.metadata,
        name,
        uid: existing.metadata.uid!,
        creationTimestamp: existing.metadata.creationTimestamp!,
      };
      if (type.namespaced) next.metadata.namespace = ns!;
      delete next.metadata.generation;
      delete next.metadata.generateName;
      next.apiVersion = apiVersionOf(type);
      next.kind = type.kind;
      this.#validate(type, next, existing);
      if (type.generation) {
        const bumped = specPart(next) !== specPart(existing);
        next.metadata.generation = (existing.metadata.generation ?? 1) + (bumped ? 1 : 0);
      }
    }
    next.metadata.resourceVersion = existing.metadata.resourceVersion!;
    // A write that changes nothing is not a change: no new resourceVersion, no event.
    if (canonical(next) === canonical(existing) || options.dryRun) return structuredClone(next);
    next.metadata.resourceVersion = String(++this.#resourceVersion);
    this.#objects.set(key, next);
    this.#emit('MODIFIED', type, next);
    return structuredClone(next);
  }

  /** PATCH with one of {@link PATCH_CONTENT_TYPES} (apply has its own method, {@link ObjectStore.apply}). */
  patch(ref: ResourceRef, namespace: string | undefined, name: string, contentType: string, patch: unknown, options: WriteOptions = {}): KubeObject {
    const type = this.type(ref);
    const existing = this.get(type, type.namespaced ? namespace : undefined, name);
    let patched: KubeObject;
    if (contentType === 'application/json-patch+json') patched = jsonPatch(existing, patch) as KubeObject;
    else if (contentType === 'application/merge-patch+json') patched = mergePatch(existing, patch) as KubeObject;
    else if (contentType === 'application/strategic-merge-patch+json') patched = strategicMerge(existing, patch) as KubeObject;
    else {
      throw new KubeApiError(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: ${PATCH_CONTENT_TYPES.join(', ')}`,
      );
    }
    if (!patched || typeof patched !== 'object' || typeof patched.metadata !== 'object' || patched.metadata === null) {
      throw new KubeApiError(422, 'Invalid', 'the patch removed the object metadata');
    }
    // A resourceVersion in the patch is a precondition, checked by replace against the stored one.
    if (patched.metadata.resourceVersion === undefined) patched.metadata.resourceVersion = existing.metadata.resourceVersion!;
    return this.replace(type, namespace, name, patched, options);
  }

  /**
   * Server-side apply (`application/apply-patch+yaml`): creates the object if it is missing, else
   * sets what `body` sets and removes what the same manager applied before and no longer does.
   * Fields are not owned across managers: a conflicting manager's value is overwritten.
   */
  apply(ref: ResourceRef, namespace: string | undefined, name: string, body: unknown, options: ApplyOptions): KubeObject {
    const type = this.type(ref);
    const applied = structuredClone(body) as KubeObject;
    if (applied === null || typeof applied !== 'object' || Array.isArray(applied) || typeof applied.metadata !== 'object' || applied.metadata === null) {
      throw KubeApiError.badRequest('an applied configuration must be an object with metadata');
    }
    if (applied.apiVersion !== apiVersionOf(type) || applied.kind !== type.kind) {
      throw KubeApiError.badRequest(`an applied configuration must have apiVersion "${apiVersionOf(type)}" and kind "${type.kind}"`);
    }
    if (applied.metadata.name !== undefined && applied.metadata.name !== name) {
      throw KubeApiError.badRequest(`the name of the object (${applied.metadata.name}) does not match the name on the URL (${name})`);
    }
    const existing = this.find(type, type.namespaced ? namespace : undefined, name);
    let result: KubeObject;
    if (!existing) {
      result = this.create(type, namespace, { ...applied, metadata: { ...applied.metadata, name } }, options);
    } else {
      const previous = this.#applied.get(existing.metadata.uid!)?.get(options.fieldManager) ?? {};
      const patched = mergePatch(existing, applyPatch(previous, applied)) as KubeObject;
      if (applied.metadata.resourceVersion === undefined) patched.metadata.resourceVersion = existing.metadata.resourceVersion!;
      result = this.replace(type, namespace, name, patched, options);
    }
    if (!options.dryRun) {
      const byManager = this.#applied.get(result.metadata.uid!) ?? new Map<string, KubeObject>();
      byManager.set(options.fieldManager, applied);
      this.#applied.set(result.metadata.uid!, byManager);
    }
    return result;
  }

  /**
   * Deletes the object and, in the background as upstream, everything it owns. A pod bound to a
   * node is deleted gracefully, as upstream: it gets `deletionTimestamp` and
   * `deletionGracePeriodSeconds` and stays (terminating) until its kubelet, its containers stopped,
   * deletes it with a grace period of 0.
   */
  delete(ref: ResourceRef, namespace: string | undefined, name: string, options: DeleteOptions = {}): KubeObject {
    const type = this.type(ref);
    const ns = type.namespaced ? namespace : undefined;
    const key = this.#key(type, ns, name);
    const existing = this.#objects.get(key);
    if (!existing) throw KubeApiError.notFound(type, name);
    const grace = this.#gracePeriod(type, existing, options);
    if (grace > 0) {
      // Already terminating: a second delete changes nothing (upstream may only shorten the period).
      if (existing.metadata.deletionTimestamp !== undefined || options.dryRun) return structuredClone(existing);
      const terminating = structuredClone(existing);
      terminating.metadata.deletionTimestamp = timestamp();
      terminating.metadata.deletionGracePeriodSeconds = grace;
      terminating.metadata.resourceVersion = String(++this.#resourceVersion);
      this.#objects.set(key, terminating);
      this.#emit('MODIFIED', type, terminating);
      return structuredClone(terminating);
    }
    const deleted = structuredClone(existing);
    deleted.metadata.deletionTimestamp ??= timestamp();
    if (options.dryRun) return deleted;
    this.#objects.delete(key);
    this.#applied.delete(existing.metadata.uid!);
    this.#resourceVersion++;
    this.#emit('DELETED', type, deleted);
    this.#collectGarbage(type, existing);
    return deleted;
  }

  deleteCollection(ref: ResourceRef, namespace: string | undefined, options: ListOptions & DeleteOptions = {}): KubeObject[] {
    const type = this.type(ref);
    return this.list(type, namespace, options).map((o) => this.delete(type, o.metadata.namespace, o.metadata.name!, options));
  }

  /** How long the object gets to terminate: only pods bound to a node get any. */
  #gracePeriod(type: ResourceType, object: KubeObject, options: DeleteOptions): number {
    if (type.group !== '' || type.resource !== 'pods') return 0;
    const spec = (object['spec'] ?? {}) as Record<string, unknown>;
    if (typeof spec['nodeName'] !== 'string') return 0;
    const fromSpec = typeof spec['terminationGracePeriodSeconds'] === 'number' ? spec['terminationGracePeriodSeconds'] : 30;
    return options.gracePeriodSeconds ?? fromSpec;
  }

  #collectGarbage(type: ResourceType, owner: KubeObject): void {
    for (const [key, object] of [...this.#objects]) {
      const owned = (object.metadata.ownerReferences ?? []).some((ref) => ref.uid === owner.metadata.uid);
      const inNamespace = type.group === '' && type.resource === 'namespaces' && object.metadata.namespace === owner.metadata.name;
      if (!owned && !inNamespace) continue;
      if (!this.#objects.has(key)) continue;
      const [group, version, resource] = key.split('/');
      const childType = this.lookup(group!, version!, resource!)!;
      this.delete(childType, object.metadata.namespace, object.metadata.name!);
    }
  }

  #namespaceOf(type: ResourceType, namespace: string | undefined, object: KubeObject): string | undefined {
    if (!type.namespaced) return undefined;
    const ns = namespace ?? object.metadata.namespace;
    if (!ns) throw KubeApiError.badRequest('the namespace of the object must be set');
    if (object.metadata.namespace !== undefined && object.metadata.namespace !== ns) {
      throw KubeApiError.badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    const namespaces = this.lookup('', 'v1', 'namespaces');
    if (namespaces && !this.#objects.has(this.#key(namespaces, undefined, ns))) throw KubeApiError.notFound(namespaces, ns);
    return ns;
  }

  #validate(type: ResourceType, object: KubeObject, previous: KubeObject | undefined): void {
    type.normalize?.(object);
    const name = object.metadata.name!;
    const errors = metadataErrors(object);
    const bad = nameError(name, nameRuleOf(type));
    if (bad) errors.unshift({ field: 'metadata.name', message: `Invalid value: "${name}": ${bad}` });
    errors.push(...(type.validate?.(object, previous) ?? []));
    if (errors.length > 0) throw KubeApiError.invalid(type, name, errors);
  }

  #key(type: ResourceType, namespace: string | undefined, name: string): string {
    return `${type.group}/${type.version}/${type.resource}/${type.namespaced ? (namespace ?? '') : ''}/${name}`;
  }

  #emit(type: ChangeType, resource: ResourceType, object: KubeObject): void {
    for (const listener of this.#listeners) listener({ type, resource, object: structuredClone(object) });
  }
}
