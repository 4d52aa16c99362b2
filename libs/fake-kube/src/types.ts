/** Shapes shared by the fake's store, server and controllers. */

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  /** Set with `deletionTimestamp` on a pod that terminates gracefully: how long its containers get. */
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }>;
  [key: string]: unknown;
}

/** Any stored object: the fake keeps them as the JSON it was given, plus maintained metadata. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

/** A field error found by a resource's validation. */
export interface FieldError {
  field: string;
  message: string;
}

/** One resource the fake serves, e.g. `apps/v1 deployments`. */
export interface ResourceType {
  /** API group; `''` for the core group (`/api/v1`). */
  group: string;
  version: string;
  /** Plural, lower case: the path segment. */
  resource: string;
  singular: string;
  kind: string;
  namespaced: boolean;
  shortNames?: string[];
  /**
   * The resource has a `/status` subresource: writes to the object keep its status, writes to
   * `/status` change only the status.
   */
  statusSubresource?: boolean;
  /** `metadata.generation` is kept and bumped whenever anything but metadata and status changes. */
  generation?: boolean;
  /** DELETE answers with the deleted object (as for pods) instead of a `Status`. */
  deleteReturnsObject?: boolean;
  /** Server-side defaulting and conversion before validation (e.g. Secret `stringData` into `data`). */
  normalize?(object: KubeObject): void;
  /** Validation beyond names and labels; `previous` is set on updates. */
  validate?(object: KubeObject, previous: KubeObject | undefined): FieldError[];
}

/** `group/version`, or `version` for the core group: the `apiVersion` of a resource's objects. */
export function apiVersionOf(type: Pick<ResourceType, 'group' | 'version'>): string {
  return type.group ? `${type.group}/${type.version}` : type.version;
}

/** `value` if it is a plain object, else an empty one: for reading optional parts of stored objects. */
export function record(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** The current time as the API writes it (RFC 3339, whole seconds). */
export function timestamp(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
}
