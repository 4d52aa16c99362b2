/** Rows of the sandbox-manager as `berth.sandboxmanager.v1` messages (init shapes). */
import { TemplateKind, timestampFromDate } from '@berth/proto';
import { wireProxyConfig } from '../catalog/proxy-config.js';
import type { RegistryRow } from '../catalog/registries.js';
import { storedResourcesOf, type TemplateRow } from '../catalog/templates.js';
import type { VolumeRow } from '../catalog/volumes.js';
import { imageStatuses, sandboxStatuses } from '../lifecycle.js';
import type { PoolView } from '../pools/pools.js';
import { overrideResources, rowOverrides } from '../sandboxes/instance-spec.js';
import type { SandboxRow } from '../sandboxes/store.js';

const ts = (date: Date | string) => timestampFromDate(new Date(date));

export const kindOf = (kind: TemplateKind): TemplateRow['kind'] => (kind === TemplateKind.SNAPSHOT ? 'snapshot' : 'template');
export const wireKind = (kind: TemplateRow['kind']) => (kind === 'snapshot' ? TemplateKind.SNAPSHOT : TemplateKind.TEMPLATE);

export function templateMessage(row: TemplateRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    kind: wireKind(row.kind),
    name: row.name,
    image: row.image,
    resources: row.resources,
    volumes: row.volumes.map((v) => ({ volumeName: v.volume_name, mountPath: v.mount_path })),
    proxyConfig: wireProxyConfig(row.proxy_config),
    ...(row.registry_id ? { registryId: row.registry_id } : {}),
    status: imageStatuses.encode(row.status.toUpperCase()),
    statusMessage: row.status_message,
    ...(row.image_digest ? { imageDigest: row.image_digest } : {}),
    version: BigInt(row.version),
    ...(row.run_config
      ? { runConfig: { ...(row.run_config.work_dir ? { workDir: row.run_config.work_dir } : {}), envVars: row.run_config.env_vars ?? {} } }
      : {}),
    createdAt: ts(row.created_at),
    updatedAt: ts(row.updated_at),
  };
}

export function registryMessage(row: RegistryRow) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    server: row.server,
    username: row.username,
    insecure: row.insecure,
    createdAt: ts(row.created_at),
  };
}

export function volumeMessage(row: VolumeRow) {
  return { id: row.id, tenantId: row.tenant_id, name: row.name, size: row.size, createdAt: ts(row.created_at) };
}

export function poolMessage(row: PoolView) {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    templateName: row.template_name,
    replicas: row.replicas,
    readyReplicas: row.ready_replicas,
    createdAt: ts(row.created_at),
    updatedAt: ts(row.updated_at),
  };
}

/** An amount as an int64 field; one no sandbox can have (a row stored before amounts were bounded) is 0, unknown. */
const int64 = (amount: number | undefined) => (amount !== undefined && Number.isSafeInteger(amount) && amount >= 0 ? BigInt(amount) : 0n);

export function sandboxMessage(row: SandboxRow, template: TemplateRow | undefined) {
  // What the sandbox runs with: the limits recorded at its creation (defaults included). Rows of
  // before they were recorded show their template's, and never break a listing.
  const resources = { ...(template ? storedResourcesOf(template.resources) : {}), ...overrideResources(rowOverrides(row)) };
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    templateId: row.template_id ?? '',
    templateKind: template ? wireKind(template.kind) : TemplateKind.UNSPECIFIED,
    templateName: template?.name ?? '',
    status: sandboxStatuses.encode(row.status.toUpperCase()),
    statusMessage: row.status_message,
    vcpus: Number.isFinite(resources.cpuMillis) ? resources.cpuMillis! / 1000 : 0,
    memBytes: int64(resources.memoryBytes),
    fsCapacityBytes: int64(resources.storageBytes),
    idleTtlSeconds: BigInt(row.idle_ttl_seconds),
    deleteAfterStopSeconds: BigInt(row.delete_after_stop_seconds),
    ttlSeconds: BigInt(row.ttl_seconds),
    ...(row.expires_at ? { expiresAt: ts(row.expires_at) } : {}),
    ...(row.stopped_at ? { stoppedAt: ts(row.stopped_at) } : {}),
    lastActivityAt: ts(row.last_activity_at),
    labels: row.labels,
    proxyConfig: wireProxyConfig(row.proxy_config ?? { rules: [] }),
    poolName: row.pool_name ?? '',
    createdAt: ts(row.created_at),
    updatedAt: ts(row.updated_at),
  };
}
