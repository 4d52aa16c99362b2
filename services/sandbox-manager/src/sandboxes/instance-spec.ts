/**
 * The driver's view of a sandbox (or a warm-pool member): the template's image, resources and
 * volumes with the sandbox's own limits (and the operator's defaults for the rest), and the egress
 * policy with its secrets opened.
 */
import { randomBytes } from 'node:crypto';
import type { Kysely } from '@berth/db';
import type { SecretBox } from '@berth/secret-box';
import { egressPolicy } from '../catalog/proxy-config.js';
import { storedResourcesOf, type TemplateRow, type Templates } from '../catalog/templates.js';
import { driverVolumeName } from '../catalog/volumes.js';
import type { InstanceSpec, Resources } from '../drivers/driver.js';
import type { SandboxTables, StoredProxyConfig } from '../tables.js';
import { withDefaults, type SandboxLimits } from './limits.js';

/** A fresh instance name: `berth-sbx-` and 16 lowercase letters/digits (a DNS-1123 label). */
export function newInstanceName(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  const bytes = randomBytes(16);
  let suffix = '';
  for (const byte of bytes) suffix += alphabet[byte % alphabet.length];
  return `berth-sbx-${suffix}`;
}

/** Limits a sandbox (its row) or a request sets itself, over its template's. */
export interface ResourceOverrides {
  vcpus?: number | null;
  memBytes?: number | null;
  fsCapacityBytes?: number | null;
}

export function overrideResources(overrides: ResourceOverrides): Resources {
  return {
    ...(overrides.vcpus ? { cpuMillis: Math.round(overrides.vcpus * 1000) } : {}),
    ...(overrides.memBytes ? { memoryBytes: overrides.memBytes } : {}),
    ...(overrides.fsCapacityBytes ? { storageBytes: overrides.fsCapacityBytes } : {}),
  };
}

/** The limits of a sandbox's row (null columns: of one made before they were recorded). */
export function rowOverrides(row: { vcpus: number | null; mem_bytes: string | null; fs_capacity_bytes: string | null }): ResourceOverrides {
  return {
    vcpus: row.vcpus,
    memBytes: row.mem_bytes === null ? null : Number(row.mem_bytes),
    fsCapacityBytes: row.fs_capacity_bytes === null ? null : Number(row.fs_capacity_bytes),
  };
}

/** What an instance runs with: its own limits, else its template's, else the operator's defaults. */
export function effectiveResources(template: TemplateRow | undefined, overrides: ResourceOverrides, limits: SandboxLimits): Required<Resources> {
  return withDefaults({ ...(template ? storedResourcesOf(template.resources) : {}), ...overrideResources(overrides) }, limits);
}

export interface InstanceSpecDeps {
  db: Kysely<SandboxTables>;
  box: SecretBox;
  templates: Templates;
  privateEgress: readonly string[];
  limits: SandboxLimits;
  /** This platform's id (INSTANCE_LABELS.platform): the reconciler touches only its own instances. */
  platformId: string;
}

/** Labels every instance of the platform carries (the driver adds its own). */
export const INSTANCE_LABELS = {
  /** The platform (its database) that made it: one engine may serve several. */
  platform: 'berth.dev/platform',
  sandbox: 'berth.dev/sandbox-id',
  pool: 'berth.dev/pool-id',
  template: 'berth.dev/template-id',
  templateVersion: 'berth.dev/template-version',
} as const;

export async function instanceSpec(
  deps: InstanceSpecDeps,
  instance: string,
  template: TemplateRow,
  options: { overrides?: ResourceOverrides; proxyConfig?: StoredProxyConfig | null; labels: Record<string, string> },
): Promise<InstanceSpec> {
  const mounts = template.volumes;
  const volumes = mounts.length
    ? await deps.db
        .selectFrom('volumes')
        .selectAll()
        .where('tenant_id', '=', template.tenant_id)
        .where(
          'name',
          'in',
          mounts.map((m) => m.volume_name),
        )
        .execute()
    : [];
  return {
    instance,
    tenantId: template.tenant_id,
    image: await deps.templates.imageSource(template),
    resources: effectiveResources(template, options.overrides ?? {}, deps.limits),
    volumes: mounts.map((mount) => {
      const volume = volumes.find((v) => v.name === mount.volume_name);
      // A volume cannot be deleted while a template mounts it, so it is there.
      return {
        volume: volume ? driverVolumeName(volume) : mount.volume_name,
        mountPath: mount.mount_path,
        ...(volume ? { sizeBytes: Number(volume.size_bytes) } : {}),
      };
    }),
    egress: egressPolicy(options.proxyConfig ?? template.proxy_config, deps.box, deps.privateEgress),
    env: template.run_config?.env_vars ?? {},
    labels: {
      [INSTANCE_LABELS.platform]: deps.platformId,
      [INSTANCE_LABELS.template]: template.id,
      [INSTANCE_LABELS.templateVersion]: template.version,
      ...options.labels,
    },
  };
}
