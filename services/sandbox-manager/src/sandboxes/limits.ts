/**
 * What one sandbox may use. The operator's defaults fill in whatever neither the request nor the
 * sandbox's template or snapshot sets, so that no sandbox runs without a memory, CPU and storage
 * limit; the operator's maxima (and the engine's floors) bound what a request, template or snapshot
 * may ask: beyond them is a 422 naming the field and the bound.
 */
import { RequestValidationError, type ValidationIssue } from '@berth/errors';
import { bytesQuantity, cpuQuantity } from '@berth/quantity';
import type { Resources } from '../drivers/driver.js';

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

export interface SandboxLimits {
  /** Memory of a sandbox that asks for none (nor does its template or snapshot). @default 1 GiB */
  defaultMemoryBytes: number;
  /** CPU of a sandbox that asks for none, in millicores. @default 1000 (one core) */
  defaultCpuMillis: number;
  /** Writable storage of a sandbox that asks for none (enforced where the engine can). @default 10 GiB */
  defaultStorageBytes: number;
  /**
   * Most processes (threads included) one sandbox may run: the container driver's limit (on
   * Kubernetes the kubelet's podPidsLimit applies).
   * @default 1024
   */
  pidsLimit: number;
  /** @default 16 GiB */
  maxMemoryBytes: number;
  /** @default 8000 (eight cores) */
  maxCpuMillis: number;
  /** Also the largest volume. @default 100 GiB */
  maxStorageBytes: number;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  defaultMemoryBytes: GiB,
  defaultCpuMillis: 1000,
  defaultStorageBytes: 10 * GiB,
  pidsLimit: 1024,
  maxMemoryBytes: 16 * GiB,
  maxCpuMillis: 8000,
  maxStorageBytes: 100 * GiB,
};

/** The least an engine takes: Docker and Podman refuse CPU limits under 0.01 and memory under 6 MiB. */
const FLOOR = { cpuMillis: 10, memoryBytes: 6 * MiB, storageBytes: MiB } as const;

export type ResourceKey = keyof Resources;

/** A resource's amount as people write it: `512Mi`, `2` (cores), `500m`. */
export function formatResource(key: ResourceKey, amount: number): string {
  return key === 'cpuMillis' ? cpuQuantity(amount / 1000) : bytesQuantity(amount);
}

/** The REST field of each resource, in the words of the request being checked. */
export type ResourceFields = Record<ResourceKey, { loc: (string | number)[]; name: string }>;

/** The fields of `POST /boxes`. */
export const BOX_FIELDS: ResourceFields = {
  cpuMillis: { loc: ['body', 'vcpus'], name: 'vcpus' },
  memoryBytes: { loc: ['body', 'mem_bytes'], name: 'mem_bytes' },
  storageBytes: { loc: ['body', 'fs_capacity_bytes'], name: 'fs_capacity_bytes' },
};

/** The fields of a template's `resources` (a snapshot's storage is its `fs_capacity_bytes`). */
export function templateFields(kind: 'template' | 'snapshot'): ResourceFields {
  return {
    cpuMillis: { loc: ['body', 'resources', 'cpu'], name: 'cpu' },
    memoryBytes: { loc: ['body', 'resources', 'memory'], name: 'memory' },
    storageBytes: kind === 'snapshot' ? BOX_FIELDS.storageBytes : { loc: ['body', 'resources', 'storage'], name: 'storage' },
  };
}

const MAX_OF: Record<ResourceKey, keyof SandboxLimits> = { cpuMillis: 'maxCpuMillis', memoryBytes: 'maxMemoryBytes', storageBytes: 'maxStorageBytes' };
const DEFAULT_OF: Record<ResourceKey, keyof SandboxLimits> = {
  cpuMillis: 'defaultCpuMillis',
  memoryBytes: 'defaultMemoryBytes',
  storageBytes: 'defaultStorageBytes',
};
const KEYS = Object.keys(MAX_OF) as ResourceKey[];

/** What is wrong with `resources` under `limits` (nothing: []), at `fields`. */
export function resourceIssues(resources: Resources, limits: SandboxLimits, fields: ResourceFields): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  for (const key of KEYS) {
    const amount = resources[key];
    if (amount === undefined) continue;
    const { loc, name } = fields[key];
    const max = limits[MAX_OF[key]];
    // Amounts in the request's own unit (bytes, cores) with the quantity beside, for people.
    const shown = (value: number) => (key === 'cpuMillis' ? formatResource(key, value) : `${value} (${formatResource(key, value)})`);
    if (amount > max) issues.push({ loc, msg: `${name} must be at most ${shown(max)}: this platform's maximum`, type: 'value_error' });
    else if (amount < FLOOR[key]) issues.push({ loc, msg: `${name} must be at least ${shown(FLOOR[key])}`, type: 'value_error' });
  }
  return issues;
}

export function checkResources(resources: Resources, limits: SandboxLimits, fields: ResourceFields): void {
  const issues = resourceIssues(resources, limits, fields);
  if (issues.length) throw new RequestValidationError(issues);
}

/** Refuses settings under which some sandboxes could never be created (a default above its maximum). */
export function checkLimits(limits: SandboxLimits): void {
  for (const key of KEYS) {
    const [fallback, max] = [limits[DEFAULT_OF[key]], limits[MAX_OF[key]]];
    if (!(fallback > 0 && max >= fallback)) {
      throw new Error(
        `sandbox limits: ${DEFAULT_OF[key]} (${formatResource(key, fallback)}) must be more than 0 and at most ${MAX_OF[key]} (${formatResource(key, max)})`,
      );
    }
  }
  if (!(Number.isInteger(limits.pidsLimit) && limits.pidsLimit > 0))
    throw new Error(`sandbox limits: pidsLimit (${limits.pidsLimit}) must be a positive integer`);
}

/** Every limit of a sandbox: what it or its template sets, else the operator's default. */
export function withDefaults(resources: Resources, limits: SandboxLimits): Required<Resources> {
  return Object.fromEntries(KEYS.map((key) => [key, resources[key] ?? limits[DEFAULT_OF[key]]])) as Required<Resources>;
}
