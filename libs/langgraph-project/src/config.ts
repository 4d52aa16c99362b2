/**
 * `langgraph.json`: reading, validating (zod) and resolving the files it names.
 *
 * Graph specs follow langgraphjs (`libs/langgraph-api/src/graph/load.utils.mts`): the text after
 * the `:` names the export, and a spec without `:` means the module's `default` export.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { z } from 'zod';
import { ProjectConfigError } from './errors.js';

/** Longest thread TTL, in minutes (100 years): beyond it Postgres cannot add it to a date. */
export const MAX_THREAD_TTL_MINUTES = 52_560_000;
/** Longest time between sweeps, in minutes (a week; a timer cannot wait 25 days). */
export const MAX_SWEEP_INTERVAL_MINUTES = 10_080;

const stringList = z.array(z.string());

const graphEntrySchema = z.union([z.string().min(1), z.object({ path: z.string().min(1), description: z.string().optional() }).loose()]);

const corsSchema = z
  .object({
    allow_origins: stringList.optional(),
    allow_methods: stringList.optional(),
    allow_headers: stringList.optional(),
    allow_credentials: z.boolean().optional(),
    allow_origin_regex: z.string().optional(),
    expose_headers: stringList.optional(),
    max_age: z.number().int().nonnegative().optional(),
  })
  .loose();

const httpSchema = z
  .object({
    app: z.string().min(1).optional(),
    cors: corsSchema.optional(),
    disable_assistants: z.boolean().optional(),
    disable_threads: z.boolean().optional(),
    disable_runs: z.boolean().optional(),
    disable_store: z.boolean().optional(),
    disable_meta: z.boolean().optional(),
    disable_mcp: z.boolean().optional(),
    disable_a2a: z.boolean().optional(),
    disable_ui: z.boolean().optional(),
    disable_webhooks: z.boolean().optional(),
    configurable_headers: z.object({ includes: stringList.optional(), excludes: stringList.optional() }).optional(),
    logging_headers: z.object({ includes: stringList.optional(), excludes: stringList.optional() }).optional(),
    middleware_order: z.enum(['auth_first', 'middleware_first']).optional(),
    enable_custom_route_auth: z.boolean().optional(),
    mount_prefix: z.string().optional(),
  })
  .loose();

const authSchema = z
  .object({
    path: z.string().min(1),
    disable_studio_auth: z.boolean().optional(),
    openapi: z.record(z.string(), z.unknown()).optional(),
    cache: z.record(z.string(), z.unknown()).optional(),
  })
  .loose();

/** `store`: semantic search (`index`) and item TTL defaults (`ttl`), as the LangGraph server reads them. */
const storeSchema = z
  .object({
    index: z
      .object({
        /** `./src/embed.ts:embed` (a function or an Embeddings object in the project) or `provider:model`. */
        embed: z.string().min(1),
        dims: z.number().int().positive(),
        /** Paths of the value fields to embed; default the whole value (`$`). */
        fields: z.array(z.string().min(1)).min(1).optional(),
      })
      .loose()
      .optional(),
    ttl: z
      .object({
        /** Minutes; applies to puts that name no ttl. */
        default_ttl: z.number().positive().nullable().optional(),
        /** Whether reads refresh an item's TTL when the request does not say. @default true */
        refresh_on_read: z.boolean().optional(),
        /** How often expired items are deleted. @default 1 */
        sweep_interval_minutes: z.number().positive().nullable().optional(),
      })
      .loose()
      .optional(),
  })
  .loose();

/** Thread TTLs (the agent server's storage/thread-ttl.ts), as the LangGraph server reads `checkpointer.ttl`. */
const threadTtlSchema = z
  .object({
    /** What happens to an expired thread. @default 'delete' */
    strategy: z.enum(['delete', 'keep_latest']).optional(),
    /** Minutes of inactivity after which a thread created without a ttl expires; absent: never. */
    default_ttl: z.number().positive().max(MAX_THREAD_TTL_MINUTES).nullable().optional(),
    /** How often expired threads are swept. @default 5 */
    sweep_interval_minutes: z.number().positive().max(MAX_SWEEP_INTERVAL_MINUTES).nullable().optional(),
    /** Most threads handled by one sweep. @default 1000 */
    sweep_limit: z.number().int().positive().nullable().optional(),
  })
  .loose();

/** `checkpointer`: Berth checkpoints to Postgres itself; only `ttl` has an effect. */
const checkpointerSchema = z.object({ ttl: threadTtlSchema.optional() }).loose();

const nodeVersionSchema = z
  .union([z.string(), z.number()])
  .transform((v) => String(v))
  .refine((v) => /^\d+(\.\d+){0,2}$/.test(v) && Number(v.split('.')[0]) >= 20, {
    message: 'must be a Node.js version of at least 20, e.g. "20" or "22"',
  });

const envValueSchema = z.union([z.string(), z.number(), z.boolean()]).transform((v) => String(v));

/** The zod schema of `langgraph.json`. Known keys the agent server does not use are accepted as-is. */
export const langGraphJsonSchema = z
  .object({
    $schema: z.string().optional(),
    graphs: z.record(z.string().min(1), graphEntrySchema).refine((g) => Object.keys(g).length > 0, { message: 'must name at least one graph' }),
    env: z.union([z.string().min(1), z.record(z.string(), envValueSchema)]).optional(),
    auth: authSchema.optional(),
    http: httpSchema.optional(),
    node_version: nodeVersionSchema.optional(),
    dependencies: stringList.optional(),
    dockerfile_lines: stringList.optional(),
    ui: z.record(z.string(), z.string()).optional(),
    ui_config: z.object({ shared: stringList.optional() }).loose().optional(),
    store: storeSchema.optional(),
    checkpointer: checkpointerSchema.optional(),
    api_version: z.string().optional(),
    node_loader: z.string().optional(),
    docker_compose_file: z.string().optional(),
    python_version: z.string().optional(),
    base_image: z.string().optional(),
    image_distro: z.string().optional(),
    pip_config_file: z.string().optional(),
    pip_installer: z.string().optional(),
    keep_pkg_tools: z.unknown().optional(),
    source: z.record(z.string(), z.unknown()).optional(),
    webhooks: z.record(z.string(), z.unknown()).optional(),
    encryption: z.record(z.string(), z.unknown()).optional(),
  })
  .loose();

/** `langgraph.json` as written, after validation. */
export type LangGraphJson = z.output<typeof langGraphJsonSchema>;

/** One entry of `graphs`, resolved against the project directory. */
export interface GraphSpec {
  graphId: string;
  /** The spec as written, e.g. `./src/agent.ts:graph`. */
  spec: string;
  /** Its file part as written, e.g. `./src/agent.ts`. */
  file: string;
  /** Absolute path of the module file. */
  sourceFile: string;
  /** Export to use; `default` when the spec has no `:`. */
  exportName: string;
  description?: string;
}

/** A loaded, validated `langgraph.json`. */
export interface ProjectConfig {
  /** Absolute path of `langgraph.json`. */
  configPath: string;
  /** Directory of `langgraph.json`; every relative path in it is relative to this. */
  projectDir: string;
  /** The validated document (unknown keys included, untouched). */
  json: LangGraphJson;
  graphs: Record<string, GraphSpec>;
  /** Absolute path of `env` when it names a file. */
  envFile?: string;
  /** Absolute path of the module of `auth.path`, and its export. */
  auth?: { file: string; sourceFile: string; exportName: string; disableStudioAuth: boolean };
  /** The `http` block as written (CORS, `disable_*` switches, …). */
  http?: NonNullable<LangGraphJson['http']>;
  /** Absolute path of the module of `http.app`, and its export. */
  httpApp?: { file: string; sourceFile: string; exportName: string };
  /** Absolute paths of the component modules of `ui`, by name. */
  ui: Record<string, string>;
  /** Unknown keys, as `langgraph validate` reports them (not errors). */
  warnings: string[];
}

const knownKeys = (schema: { shape: Record<string, unknown> }) => new Set(Object.keys(schema.shape));
const NESTED_KEYS: [string, Set<string>][] = [
  ['', knownKeys(langGraphJsonSchema)],
  ['auth', knownKeys(authSchema)],
  ['http', knownKeys(httpSchema)],
  ['http.cors', knownKeys(corsSchema)],
  ['store', knownKeys(storeSchema)],
  ['checkpointer.ttl', knownKeys(threadTtlSchema)],
];

function unknownKeyWarnings(json: Record<string, unknown>): string[] {
  const warnings: string[] = [];
  for (const [path, known] of NESTED_KEYS) {
    let node: unknown = json;
    for (const part of path ? path.split('.') : []) node = (node as Record<string, unknown> | undefined)?.[part];
    if (typeof node !== 'object' || node === null) continue;
    for (const key of Object.keys(node)) {
      if (!known.has(key)) warnings.push(`unknown key "${path ? `${path}.` : ''}${key}" is ignored`);
    }
  }
  return warnings;
}

/** Keys Berth reads but does not apply, with what happens instead. */
const NOT_APPLIED: [path: string, instead: string][] = [
  ['http.mount_prefix', 'the API is served at the root'],
  ['http.configurable_headers', 'request headers do not reach the run configuration'],
  ['http.logging_headers', 'request headers are not logged'],
  ['http.middleware_order', 'auth runs before the http.app middleware'],
  ['checkpointer.path', 'threads are checkpointed to Postgres'],
  ['checkpointer.serde', 'checkpoints are serialized as JSON'],
  ['webhooks', 'run webhooks are checked by the platform (BERTH_WEBHOOK_* settings)'],
  ['encryption', 'data is not encrypted by project code'],
];

function notAppliedWarnings(json: LangGraphJson): string[] {
  const warnings: string[] = [];
  for (const [path, instead] of NOT_APPLIED) {
    let node: unknown = json;
    for (const part of path.split('.')) node = (node as Record<string, unknown> | undefined)?.[part];
    if (node !== undefined) warnings.push(`"${path}" has no effect on Berth: ${instead}`);
  }
  if (json.http?.enable_custom_route_auth === false && json.auth) {
    warnings.push('"http.enable_custom_route_auth": false has no effect on Berth: custom routes are always authenticated');
  }
  return warnings;
}

/** The route groups (and run webhooks) a project serves: all but those its `http.disable_*` turn off. */
export interface ServedFeatures {
  /** `/info` (`/ok` stays: the platform probes it). */
  meta: boolean;
  assistants: boolean;
  threads: boolean;
  /** Runs, crons and run webhook records. */
  runs: boolean;
  store: boolean;
  mcp: boolean;
  /** A2A: `/a2a/{assistant_id}` and the agent cards. */
  a2a: boolean;
  ui: boolean;
  /** Runs may name a `webhook`. */
  webhooks: boolean;
}

export function servedFeatures(http: ProjectConfig['http']): ServedFeatures {
  const on = (flag: boolean | undefined) => flag !== true;
  return {
    meta: on(http?.disable_meta),
    assistants: on(http?.disable_assistants),
    threads: on(http?.disable_threads),
    runs: on(http?.disable_runs),
    store: on(http?.disable_store),
    mcp: on(http?.disable_mcp),
    a2a: on(http?.disable_a2a),
    ui: on(http?.disable_ui),
    webhooks: on(http?.disable_webhooks),
  };
}

/**
 * Splits a `path[:export]` spec at its last `:` and resolves the path against `projectDir`,
 * checking that the file exists.
 * @throws ProjectConfigError naming `key` when the spec is malformed or the file is missing.
 */
export function resolveModuleSpec(spec: string, projectDir: string, configPath: string, key: string): { file: string; sourceFile: string; exportName: string } {
  const colon = spec.lastIndexOf(':');
  // A colon in position 1 is a Windows drive letter (`C:\x.ts`), not an export separator.
  const hasExport = colon !== -1 && !(colon === 1 && /^[A-Za-z]:[\\/]/.test(spec));
  const file = hasExport ? spec.slice(0, colon) : spec;
  const exportName = hasExport ? spec.slice(colon + 1) : 'default';
  if (!file) throw new ProjectConfigError(configPath, key, `"${spec}" has no file path before ":"`);
  if (!exportName) throw new ProjectConfigError(configPath, key, `"${spec}" has an empty export name after ":"`);
  const sourceFile = resolve(projectDir, file);
  if (!existsSync(sourceFile) || !statSync(sourceFile).isFile()) {
    throw new ProjectConfigError(configPath, key, `file not found: ${file} (resolved to ${sourceFile})`);
  }
  return { file, sourceFile, exportName };
}

/**
 * Reads and validates a `langgraph.json`, resolving every file it names (graphs, `auth.path`,
 * `http.app`, an `env` file path) relative to the config's directory.
 * @param configPath - path of `langgraph.json` (relative paths resolve against the cwd).
 * @throws ProjectConfigError for a missing or unreadable file, invalid JSON, a schema violation,
 *   a malformed module spec, or a named file that does not exist (the env file is checked when
 *   it is loaded, see `loadProjectEnv`).
 */
export function loadProjectConfig(configPath: string): ProjectConfig {
  const absolute = resolve(configPath);
  let text: string;
  try {
    text = readFileSync(absolute, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const problem = code === 'ENOENT' ? 'config file not found' : `cannot read config file (${code ?? String(error)})`;
    throw new ProjectConfigError(absolute, undefined, problem, { cause: error });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new ProjectConfigError(absolute, undefined, `invalid JSON: ${(error as Error).message}`, { cause: error });
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ProjectConfigError(absolute, undefined, 'must contain a JSON object');
  }
  const parsed = langGraphJsonSchema.safeParse(raw);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    const rest = parsed.error.issues.length > 1 ? ` (and ${parsed.error.issues.length - 1} more problem(s))` : '';
    const key = first.path.length ? first.path.join('.') : undefined;
    throw new ProjectConfigError(absolute, key, `${first.message}${rest}`, { cause: parsed.error });
  }
  const json = parsed.data;
  const projectDir = dirname(absolute);

  const graphs: Record<string, GraphSpec> = {};
  for (const [graphId, entry] of Object.entries(json.graphs)) {
    const spec = typeof entry === 'string' ? entry : entry.path;
    const resolved = resolveModuleSpec(spec, projectDir, absolute, `graphs.${graphId}`);
    const description = typeof entry === 'string' ? undefined : entry.description;
    graphs[graphId] = { graphId, spec, ...resolved, ...(description !== undefined ? { description } : {}) };
  }

  const ui: Record<string, string> = {};
  for (const [name, file] of Object.entries(json.ui ?? {})) {
    const sourceFile = resolve(projectDir, file);
    if (!existsSync(sourceFile) || !statSync(sourceFile).isFile()) {
      throw new ProjectConfigError(absolute, `ui.${name}`, `file not found: ${file} (resolved to ${sourceFile})`);
    }
    ui[name] = sourceFile;
  }

  const config: ProjectConfig = { configPath: absolute, projectDir, json, graphs, ui, warnings: [...unknownKeyWarnings(json), ...notAppliedWarnings(json)] };
  if (typeof json.env === 'string') config.envFile = resolve(projectDir, json.env);
  if (json.auth) {
    const auth = resolveModuleSpec(json.auth.path, projectDir, absolute, 'auth.path');
    config.auth = { ...auth, disableStudioAuth: json.auth.disable_studio_auth ?? false };
  }
  if (json.http) config.http = json.http;
  if (json.http?.app) config.httpApp = resolveModuleSpec(json.http.app, projectDir, absolute, 'http.app');
  return config;
}
