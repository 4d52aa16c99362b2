/** Kysely types of the sandbox-manager's tables (migrations/). */
import type { ColumnType } from '@berth/db';
import type { ImageStatus, PoolMemberStatus, SandboxStatus } from './lifecycle.js';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Json<T> = ColumnType<T, string | undefined, string>;
type NullableJson<T> = ColumnType<T | null, string | null | undefined, string | null>;
/** pg returns int8 as a string. */
type BigInt = ColumnType<string, number | string, number | string>;
/** A column with a database default: optional on insert. */
type Default<T> = ColumnType<T, T | undefined, T>;
type DefaultBigInt = ColumnType<string, number | string | undefined, number | string>;

/** A header as stored: opaque values sealed (base64 of the SecretBox bytes). */
export interface StoredHeader {
  name: string;
  type: 'plaintext' | 'opaque';
  value?: string;
  sealed?: string;
}
export interface StoredRule {
  name: string;
  match_hosts: string[];
  headers: StoredHeader[];
  enabled: boolean;
}
export interface StoredProxyConfig {
  rules: StoredRule[];
  access_control?: { allow_list?: string[]; deny_list?: string[] };
}
export interface ResourcesJson {
  cpu?: string;
  memory?: string;
  storage?: string;
}
export interface VolumeMountJson {
  volume_name: string;
  mount_path: string;
}
export interface RunConfigJson {
  work_dir?: string;
  env_vars?: Record<string, string>;
}

export interface RegistriesTable {
  id: string;
  tenant_id: string;
  name: string;
  server: string;
  username: string;
  password_sealed: Buffer;
  insecure: Default<boolean>;
  created_at: Timestamp;
}

export interface VolumesTable {
  id: string;
  tenant_id: string;
  name: string;
  size: string;
  size_bytes: BigInt;
  created_at: Timestamp;
}

export interface TemplatesTable {
  id: string;
  tenant_id: string;
  kind: 'template' | 'snapshot';
  name: string;
  image: string;
  registry_id: Default<string | null>;
  resources: Json<ResourcesJson>;
  volumes: Json<VolumeMountJson[]>;
  proxy_config: Json<StoredProxyConfig>;
  run_config: Json<RunConfigJson | null>;
  /** Changed only by Templates.moveImage (checked against the image lifecycle). */
  status: ImageStatus;
  status_message: Default<string>;
  image_digest: Default<string | null>;
  image_user: Default<string | null>;
  version: DefaultBigInt;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface PoolsTable {
  id: string;
  tenant_id: string;
  name: string;
  template_id: string;
  replicas: number;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface PoolMembersTable {
  instance: string;
  pool_id: string;
  template_version: BigInt;
  /** Changed only by Pools.moveMember (checked against the pool-member lifecycle). */
  status: PoolMemberStatus;
  status_message: Default<string>;
  /** What it was made with (its template's resources and the operator's defaults), for quotas. */
  vcpus: Default<number>;
  mem_bytes: DefaultBigInt;
  created_at: Timestamp;
  ready_at: Default<Date | null>;
}

export interface SandboxesTable {
  id: string;
  tenant_id: string;
  name: string;
  template_id: string | null;
  template_version: BigInt;
  instance: string;
  /** Changed only by SandboxStore.move (checked against the sandbox lifecycle). */
  status: SandboxStatus;
  status_message: Default<string>;
  vcpus: number | null;
  mem_bytes: BigInt | null;
  fs_capacity_bytes: BigInt | null;
  idle_ttl_seconds: BigInt;
  delete_after_stop_seconds: BigInt;
  ttl_seconds: DefaultBigInt;
  expires_at: Date | null;
  labels: Json<Record<string, string>>;
  proxy_config: NullableJson<StoredProxyConfig>;
  run_config: NullableJson<RunConfigJson>;
  pool_name: Default<string | null>;
  last_activity_at: Timestamp;
  stopped_at: Default<Date | null>;
  created_at: Timestamp;
  updated_at: Timestamp;
  deleted_at: Default<Date | null>;
  deleted_reason: Default<string | null>;
}

export interface SettingsTable {
  key: string;
  value: string;
}

export interface SandboxTables {
  registries: RegistriesTable;
  volumes: VolumesTable;
  templates: TemplatesTable;
  pools: PoolsTable;
  pool_members: PoolMembersTable;
  sandboxes: SandboxesTable;
  settings: SettingsTable;
}
