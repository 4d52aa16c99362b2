/**
 * The sandbox-manager's messages as the REST API spells them (snake_case, numbers as JSON
 * numbers, lower-case statuses, times as RFC 3339), and REST proxy configs as messages. Opaque
 * header values never come back from the manager; here they are shown as `{name, type, is_set}`.
 */
import { parseQuantity } from '@berth/quantity';
import {
  ImageStatus,
  SandboxStatus,
  TemplateKind,
  timestampDate,
  type Pool,
  type ProxyConfig,
  type ProxyConfigSchema,
  type Registry,
  type RunConfig,
  type RunConfigSchema,
  type Sandbox,
  type Template,
  type Timestamp,
  type Volume,
} from '@berth/proto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { z } from 'zod';
import type { BoxOut, PoolOut, ProxyConfigInput, RegistryOut, RunConfigIn, SnapshotOut, TemplateOut, VolumeOut } from './schemas.js';

const iso = (t: Timestamp | undefined): string | null => (t ? timestampDate(t).toISOString() : null);

const imageStatuses: Record<ImageStatus, 'building' | 'ready' | 'failed'> = {
  [ImageStatus.UNSPECIFIED]: 'building',
  [ImageStatus.BUILDING]: 'building',
  [ImageStatus.READY]: 'ready',
  [ImageStatus.FAILED]: 'failed',
};

/** The status of a sandbox as the client compares it ("ready", "failed"; anything else keeps it polling). */
export const boxStatuses: Record<SandboxStatus, 'provisioning' | 'ready' | 'failed' | 'stopped'> = {
  [SandboxStatus.UNSPECIFIED]: 'provisioning',
  [SandboxStatus.PROVISIONING]: 'provisioning',
  [SandboxStatus.READY]: 'ready',
  [SandboxStatus.FAILED]: 'failed',
  [SandboxStatus.STOPPED]: 'stopped',
};

export function proxyConfigMessage(config: ProxyConfigInput): MessageInitShape<typeof ProxyConfigSchema> {
  return {
    rules: config.rules.map((rule) => ({
      name: rule.name,
      enabled: rule.enabled,
      matchHosts: rule.match_hosts,
      headers: rule.headers.map((h) => ({ name: h.name, type: h.type, value: h.value, isSet: true })),
    })),
    ...(config.access_control ? { accessControl: { allowList: config.access_control.allow_list ?? [], denyList: config.access_control.deny_list ?? [] } } : {}),
  };
}

export function runConfigMessage(config: z.output<typeof RunConfigIn>): MessageInitShape<typeof RunConfigSchema> {
  return { ...(config.work_dir !== undefined ? { workDir: config.work_dir } : {}), envVars: config.env_vars ?? {} };
}

function proxyConfigJson(config: ProxyConfig | undefined): z.input<typeof BoxOut>['proxy_config'] {
  return {
    rules: (config?.rules ?? []).map((rule) => ({
      name: rule.name,
      enabled: rule.enabled,
      match_hosts: rule.matchHosts,
      headers: rule.headers.map((h) =>
        h.type === 'plaintext' ? { name: h.name, type: h.type, value: h.value ?? '', is_set: true } : { name: h.name, type: h.type, is_set: h.isSet },
      ),
    })),
    access_control: config?.accessControl ? { allow_list: config.accessControl.allowList, deny_list: config.accessControl.denyList } : null,
  };
}

function runConfigJson(config: RunConfig | undefined): z.input<typeof SnapshotOut>['run_config'] {
  if (!config) return null;
  return { ...(config.workDir !== undefined ? { work_dir: config.workDir } : {}), env_vars: config.envVars };
}

/** `registryNames`: id → name of the tenant's registries (a template stores the id). */
export function templateJson(t: Template, registryNames: ReadonlyMap<string, string>): z.input<typeof TemplateOut> {
  return {
    id: t.id,
    name: t.name,
    image: t.image,
    resources: { cpu: t.resources?.cpu ?? null, memory: t.resources?.memory ?? null, storage: t.resources?.storage ?? null },
    volumes: t.volumes.map((v) => ({ volume_name: v.volumeName, mount_path: v.mountPath })),
    proxy_config: proxyConfigJson(t.proxyConfig),
    registry_name: t.registryId ? (registryNames.get(t.registryId) ?? null) : null,
    status: imageStatuses[t.status] ?? 'building',
    status_message: t.statusMessage || null,
    image_digest: t.imageDigest ?? null,
    created_at: iso(t.createdAt) ?? '',
    updated_at: iso(t.updatedAt) ?? '',
  };
}

/** A size the manager stored as a quantity, in bytes (0 when it has none). */
function bytesOf(text: string | undefined): number {
  if (!text) return 0;
  try {
    return Math.round(parseQuantity(text));
  } catch {
    return 0; // only ever written by this gateway as a number of bytes
  }
}

export function snapshotJson(t: Template): z.input<typeof SnapshotOut> {
  return {
    id: t.id,
    name: t.name,
    status: imageStatuses[t.status] ?? 'building',
    status_message: t.statusMessage || null,
    docker_image: t.image,
    image_digest: t.imageDigest ?? null,
    fs_capacity_bytes: bytesOf(t.resources?.storage),
    registry_id: t.registryId ?? null,
    run_config: runConfigJson(t.runConfig),
    created_at: iso(t.createdAt) ?? '',
    updated_at: iso(t.updatedAt) ?? '',
  };
}

export function registryJson(r: Registry): z.input<typeof RegistryOut> {
  return { id: r.id, name: r.name, server: r.server, username: r.username, insecure: r.insecure, created_at: iso(r.createdAt) ?? '' };
}

export function volumeJson(v: Volume): z.input<typeof VolumeOut> {
  return { id: v.id, name: v.name, size: v.size, created_at: iso(v.createdAt) ?? '' };
}

export function poolJson(p: Pool): z.input<typeof PoolOut> {
  return {
    id: p.id,
    name: p.name,
    template_name: p.templateName,
    replicas: p.replicas,
    ready_replicas: p.readyReplicas,
    created_at: iso(p.createdAt) ?? '',
    updated_at: iso(p.updatedAt) ?? '',
  };
}

/** `dataplaneBase`: `<public URL>/api/v2/sandboxes/dataplane`; the sandbox's id follows (stable for its life). */
export function boxJson(s: Sandbox, dataplaneBase: string): z.input<typeof BoxOut> {
  return {
    id: s.id,
    name: s.name,
    status: boxStatuses[s.status] ?? 'provisioning',
    status_message: s.statusMessage || null,
    dataplane_url: `${dataplaneBase}/${s.id}`,
    snapshot_id: s.templateKind === TemplateKind.SNAPSHOT && s.templateId ? s.templateId : null,
    template_name: s.templateKind === TemplateKind.TEMPLATE ? s.templateName || null : null,
    pool_name: s.poolName || null,
    vcpus: s.vcpus,
    mem_bytes: Number(s.memBytes),
    fs_capacity_bytes: Number(s.fsCapacityBytes),
    idle_ttl_seconds: Number(s.idleTtlSeconds),
    delete_after_stop_seconds: Number(s.deleteAfterStopSeconds),
    ttl_seconds: Number(s.ttlSeconds),
    expires_at: iso(s.expiresAt),
    stopped_at: iso(s.stoppedAt),
    last_activity_at: iso(s.lastActivityAt),
    labels: s.labels,
    proxy_config: proxyConfigJson(s.proxyConfig),
    created_at: iso(s.createdAt) ?? '',
    updated_at: iso(s.updatedAt) ?? '',
  };
}
