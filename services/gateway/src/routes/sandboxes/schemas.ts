/**
 * Request and response schemas of the sandboxes API (`/api/v2/sandboxes…`): templates (interface
 * text C1), the snapshots and boxes the `langsmith/sandbox` client speaks, registries, volumes and
 * pools. Requests are strict (an unknown field is a 422). LangSmith features Berth does not have
 * (bucket mounts, access delegation, memory snapshots, AWS/GCP signing rules, workspace secrets)
 * are refused with a 422 naming the field, never ignored: a caller relying on one must know.
 * Rules between objects (names in use, a template's registry) are the sandbox-manager's.
 */
import { EnvVarName, SandboxName, Uuid } from '@berth/ids';
import { isResourceQuantity, QuantityError } from '@berth/quantity';
import { z } from 'zod';
import { intQuery } from '../../deployment-schemas.js';

const timestamp = z.string();

/** Names of templates, snapshots, sandboxes, registries, volumes and pools (as in URLs). */
const name = SandboxName;

/** A Kubernetes quantity (`500m`, `512Mi`, `2Gi`): its form is checked here, its amount by the manager. */
const quantity = z
  .string()
  .max(64)
  .refine(isResourceQuantity, { error: (issue) => new QuantityError(String(issue.input)).message });

const unsupported = (what: string) => z.never({ error: `${what} is not supported by Berth` }).optional();
/** A LangSmith flag Berth does not implement: `false` asks for nothing, `true` is refused. */
const unsupportedFlag = (what: string) => z.literal(false, { error: `${what} is not supported by Berth` }).optional();

/** TTLs in seconds: 0 (never) or a whole number of minutes, as the client checks too. */
const ttlSeconds = (what: string) =>
  z
    .int()
    .min(0)
    .max(10 * 365 * 24 * 3600)
    .refine((s) => s % 60 === 0, { error: `${what} must be 0 or a multiple of 60` });

const headerValueLimit = 8192;

const ProxyHeaderIn = z.strictObject({
  name: z
    .string()
    .min(1)
    .max(256)
    .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, { error: 'Not a valid HTTP header name' }),
  type: z
    .enum(['plaintext', 'opaque', 'workspace_secret'])
    .default('plaintext')
    .refine((t) => t !== 'workspace_secret', {
      error: 'workspace_secret headers are not supported by Berth: send the value as type opaque (stored encrypted, never returned)',
    })
    .describe('plaintext (returned as is) or opaque (write-only, stored encrypted)'),
  value: z
    .string()
    .max(headerValueLimit)
    .regex(/^[^\r\n]*$/, { error: 'A header value cannot contain line breaks' }),
});

const ProxyRuleIn = z.strictObject({
  name: z.string().min(1).max(128),
  type: z
    .string()
    .refine((t) => t === 'headers' || t === 'generic', {
      error: (i) => `proxy rules of type ${JSON.stringify(i.input)} are not supported by Berth: use match_hosts and headers`,
    })
    .optional(),
  enabled: z.boolean().default(true),
  match_hosts: z.array(z.string().min(1).max(253)).min(1).max(100).describe('Host globs (`api.example.com`, `*.example.com`)'),
  headers: z.array(ProxyHeaderIn).max(50).default([]),
  aws: unsupported('AWS request signing (aws)'),
  gcp: unsupported('GCP service-account tokens (gcp)'),
  azure: unsupported('Azure credentials (azure)'),
  match_paths: unsupported('Matching on paths (match_paths)'),
  match_headers: unsupported('Matching on headers (match_headers)'),
  env_vars: unsupported('Rule environment variables (env_vars)'),
  rewrite: unsupported('Request rewriting (rewrite)'),
  relay_id: unsupported('Relays (relay_id)'),
});

const hostPatterns = z.array(z.string().min(1).max(512)).max(500);

export const ProxyConfigIn = z.strictObject({
  rules: z.array(ProxyRuleIn).max(50).default([]),
  access_control: z
    .strictObject({ allow_list: hostPatterns.optional(), deny_list: hostPatterns.optional() })
    .optional()
    .describe('Domains, globs, IPs, CIDRs or ~regex the sandbox may (allow_list) or may not (deny_list) reach; one of the two (checked by the manager)'),
  no_proxy: z.array(z.string()).max(0, { error: 'no_proxy is not supported by Berth: use access_control' }).optional(),
  callbacks: unsupported('Header callbacks (callbacks)'),
});
export type ProxyConfigInput = z.output<typeof ProxyConfigIn>;

const envVars = z.record(EnvVarName, z.string().max(32_768));

export const RunConfigIn = z.strictObject({
  work_dir: z.string().min(1).max(4096).optional(),
  env_vars: envVars.optional(),
  user: unsupported('Choosing the user (run_config.user)'),
});

const ResourcesIn = z.strictObject({ cpu: quantity.optional(), memory: quantity.optional(), storage: quantity.optional() });

const VolumeMountIn = z.strictObject({
  volume_name: name,
  mount_path: z.string().min(1).max(4096).startsWith('/', { error: 'mount_path must be an absolute path' }),
});

// ---- templates ----

export const CreateTemplateBody = z.strictObject({
  name,
  image: z.string().min(1).max(512).describe('Any image reference; a private registry needs registry_name'),
  resources: ResourcesIn.optional().describe('Kubernetes quantities: cpu `500m`, memory `512Mi`, storage `2Gi`'),
  volumes: z.array(VolumeMountIn).max(20).optional(),
  proxy_config: ProxyConfigIn.optional(),
  registry_name: name.optional().describe('A registry from POST /registries whose credentials pull the image'),
});

export const UpdateTemplateBody = z.strictObject({
  image: CreateTemplateBody.shape.image.optional(),
  resources: ResourcesIn.optional(),
  volumes: z.array(VolumeMountIn).max(20).optional(),
  proxy_config: ProxyConfigIn.optional(),
  registry_name: name.nullable().optional().describe('null: pull without credentials'),
});

const ProxyConfigOut = z.object({
  rules: z.array(
    z.object({
      name: z.string(),
      enabled: z.boolean(),
      match_hosts: z.array(z.string()),
      headers: z.array(z.object({ name: z.string(), type: z.string(), value: z.string().optional(), is_set: z.boolean() })),
    }),
  ),
  access_control: z.object({ allow_list: z.array(z.string()), deny_list: z.array(z.string()) }).nullable(),
});

const statusOut = z.enum(['building', 'ready', 'failed']);

export const TemplateOut = z.object({
  id: z.string(),
  name: z.string(),
  image: z.string(),
  resources: z.object({ cpu: z.string().nullable(), memory: z.string().nullable(), storage: z.string().nullable() }),
  volumes: z.array(z.object({ volume_name: z.string(), mount_path: z.string() })),
  proxy_config: ProxyConfigOut.describe('Opaque header values are never returned: `{name, type, is_set}`'),
  registry_name: z.string().nullable(),
  status: statusOut.describe('building while the image is pulled, then ready or failed (status_message says why)'),
  status_message: z.string().nullable(),
  image_digest: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});

export const TemplatePath = z.strictObject({ name: z.string() });

// ---- snapshots ----

const RunConfigOut = z.object({ work_dir: z.string().optional(), env_vars: z.record(z.string(), z.string()).optional() });

export const CreateSnapshotBody = z.strictObject({
  name,
  docker_image: z.string().min(1).max(512),
  fs_capacity_bytes: z.int().min(1).max(Number.MAX_SAFE_INTEGER).describe('Root filesystem size of its sandboxes, in bytes'),
  registry_id: Uuid.optional(),
  run_config: RunConfigIn.optional(),
});

export const SnapshotOut = z.object({
  id: z.string(),
  name: z.string(),
  status: statusOut,
  status_message: z.string().nullable(),
  docker_image: z.string(),
  image_digest: z.string().nullable(),
  fs_capacity_bytes: z.number(),
  registry_id: z.string().nullable(),
  run_config: RunConfigOut.nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});

export const SnapshotPath = z.strictObject({ snapshot_id: z.string() });

export const ListSnapshotsQuery = z.strictObject({
  name_contains: z.string().max(256).optional().describe('Case-insensitive substring of the name'),
  limit: intQuery(1, 500, 50, 'Page size, 1 to 500'),
  offset: intQuery(0, 1_000_000, 0, 'Snapshots to skip'),
});

export const ListTemplatesQuery = ListSnapshotsQuery;

// ---- registries, volumes, pools ----

export const CreateRegistryBody = z.strictObject({
  name,
  server: z
    .string()
    .min(1)
    .max(255)
    .regex(/^[A-Za-z0-9.-]+(:\d{1,5})?$/, { error: 'A registry host, optionally with :port (registry.example.com, 127.0.0.1:5000)' }),
  username: z.string().min(1).max(255),
  password: z.string().min(1).max(8192).describe('Stored encrypted; never returned'),
  insecure: z.boolean().default(false).describe('Reach it over plain HTTP'),
});

export const RegistryOut = z.object({
  id: z.string(),
  name: z.string(),
  server: z.string(),
  username: z.string(),
  insecure: z.boolean(),
  created_at: timestamp,
});

export const CreateVolumeBody = z.strictObject({ name, size: quantity.describe('e.g. 1Gi') });

export const VolumeOut = z.object({ id: z.string(), name: z.string(), size: z.string(), created_at: timestamp });

export const CreatePoolBody = z.strictObject({ name, template_name: name, replicas: z.int().min(0).max(100) });
export const UpdatePoolBody = z.strictObject({ replicas: z.int().min(0).max(100) });

export const PoolOut = z.object({
  id: z.string(),
  name: z.string(),
  template_name: z.string(),
  replicas: z.number(),
  ready_replicas: z.number().describe('Members ready to be handed out'),
  created_at: timestamp,
  updated_at: timestamp,
});

export const NamePath = z.strictObject({ name: z.string() });

// ---- boxes ----

export const CreateBoxBody = z
  .strictObject({
    name: name.optional().describe('Generated when left out'),
    snapshot_id: Uuid.optional(),
    snapshot_name: z.string().min(1).max(128).optional().describe('`name` or `name:tag`'),
    template_name: name.optional().describe('A template from POST /templates (Berth)'),
    wait_for_ready: z.boolean().default(true),
    timeout: z.number().min(0).max(3600).default(30).describe('Seconds to wait for ready with wait_for_ready (408 after)'),
    vcpus: z.number().positive().max(1024).optional(),
    mem_bytes: z.int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
    fs_capacity_bytes: z.int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
    idle_ttl_seconds: ttlSeconds('idle_ttl_seconds').optional().describe('Stopped after this long without commands or file calls; 0 = never (default 600)'),
    delete_after_stop_seconds: ttlSeconds('delete_after_stop_seconds').optional().describe('Deleted this long after it stopped; 0 = never'),
    ttl_seconds: ttlSeconds('ttl_seconds').optional().describe('Deleted this long after creation, whatever it does; 0 = never (Berth)'),
    labels: z.record(z.string().min(1).max(63), z.string().max(256)).optional(),
    proxy_config: ProxyConfigIn.optional(),
    run_config: RunConfigIn.optional(),
    mount_config: unsupported('Bucket and repository mounts (mount_config)'),
    access_delegation: unsupported('Access delegation (access_delegation)'),
    persistent: unsupportedFlag('persistent'),
    preserve_memory_on_stop: unsupportedFlag('preserve_memory_on_stop'),
    restore_memory: unsupportedFlag('restore_memory'),
  })
  .superRefine((body, ctx) => {
    const given = (['snapshot_id', 'snapshot_name', 'template_name'] as const).filter((k) => body[k] !== undefined);
    for (const key of given.slice(1))
      ctx.addIssue({ code: 'custom', path: [key], message: `Give one of snapshot_id, snapshot_name and template_name (also got ${given[0]})` });
  });

export const UpdateBoxBody = z.strictObject({
  name: name.optional(),
  idle_ttl_seconds: ttlSeconds('idle_ttl_seconds').optional(),
  delete_after_stop_seconds: ttlSeconds('delete_after_stop_seconds').optional(),
  labels: z.record(z.string().min(1).max(63), z.string().max(256)).optional(),
  proxy_config: unsupported('Changing proxy_config of a sandbox'),
  run_config: unsupported('Changing run_config of a sandbox'),
});

/** stop and start take no fields (the client sends `{}` or nothing). */
export const EmptyBody = z.strictObject({});

const boxStatus = z.enum(['provisioning', 'ready', 'failed', 'stopped']);

export const BoxOut = z.object({
  id: z.string(),
  name: z.string(),
  status: boxStatus,
  status_message: z.string().nullable(),
  dataplane_url: z.string().describe('Base URL of its commands and files (append /execute, /execute/ws, /upload, /download)'),
  snapshot_id: z.string().nullable(),
  template_name: z.string().nullable(),
  pool_name: z.string().nullable().describe('The warm pool it came from; null when started cold'),
  vcpus: z.number(),
  mem_bytes: z.number(),
  fs_capacity_bytes: z.number(),
  idle_ttl_seconds: z.number(),
  delete_after_stop_seconds: z.number(),
  ttl_seconds: z.number(),
  expires_at: timestamp.nullable(),
  stopped_at: timestamp.nullable(),
  last_activity_at: timestamp.nullable(),
  labels: z.record(z.string(), z.string()),
  proxy_config: ProxyConfigOut,
  created_at: timestamp,
  updated_at: timestamp,
});

export const BoxStatusOut = z.object({ status: boxStatus, status_message: z.string().nullable() });

export const ListBoxesQuery = z.strictObject({
  limit: intQuery(1, 500, 100, 'Page size, 1 to 500'),
  offset: intQuery(0, 1_000_000, 0, 'Sandboxes to skip'),
  cursor: z
    .string()
    .regex(/^\d{1,7}$/, { error: 'Pass back a next_cursor' })
    .optional()
    .describe('next_cursor of the previous page'),
});

export const ListBoxesOut = z.object({
  sandboxes: z.array(BoxOut),
  items: z.array(BoxOut).describe('The same as sandboxes'),
  next_cursor: z.string().nullable(),
  offset: z.number(),
});

// ---- data plane ----

export const DataPlanePath = z.strictObject({ sandbox_id: z.string() });

/**
 * A command to run, as `POST …/execute` takes it, and the exec WebSocket's `execute` frame too
 * (which names the timeout `timeout_seconds` and adds its session's fields): both extend this one
 * schema, its refinement included, so one refuses what the other refuses.
 */
export const ExecuteCommand = z
  .strictObject({
    command: z
      .string()
      .min(1)
      .max(1024 * 1024),
    shell: z.string().min(1).max(4096).default('/bin/bash').describe('Falls back to /bin/sh when missing'),
    env: envVars.optional(),
    cwd: z.string().min(1).max(4096).optional(),
    run_config: RunConfigIn.optional(),
  })
  .refine((b) => !(b.run_config && (b.env || b.cwd)), { error: 'Give env and cwd, or run_config, not both', path: ['run_config'] });

/** Seconds; the command is killed after. */
export const CommandTimeout = z
  .number()
  .positive()
  .max(24 * 3600)
  .default(60)
  .describe('Seconds; the command is killed after');

export const ExecuteBody = ExecuteCommand.extend({ timeout: CommandTimeout });

export const ExecuteOut = z.object({ stdout: z.string(), stderr: z.string(), exit_code: z.number() });

export const FilePathQuery = z.strictObject({ path: z.string().min(1).max(4096).describe("Absolute, or relative to the sandbox's working directory") });
