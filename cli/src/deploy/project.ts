/**
 * What `berth deploy` learns from a project directory: its `langgraph.json`, its `.env` (parsed
 * like dotenv does), the deployment name it defaults to, and which env entries become deployment
 * secrets.
 */
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname, isAbsolute, relative, resolve, sep } from 'node:path';
import { isSecretName } from '@berth/ids';
import { CliError } from '../client.js';

/**
 * Variables the platform sets itself, or that are credentials of the platform rather than of the
 * project: never sent as secrets (they would be wrong inside the deployment, or leak a key).
 */
const RESERVED = new Set([
  'DATABASE_URL',
  'DATABASE_URI',
  'POSTGRES_URI',
  'REDIS_URL',
  'REDIS_URI',
  'PORT',
  'HOST',
  'MOUNT_PREFIX',
  'LANGSMITH_API_KEY',
  'LANGCHAIN_API_KEY',
  'LANGSMITH_TENANT_ID',
  'LANGGRAPH_HOST_API_KEY',
  'LANGGRAPH_HOST_URL',
  'LANGGRAPH_CLOUD_LICENSE_KEY',
  'LANGSMITH_DEPLOYMENT_NAME',
]);
const RESERVED_PREFIXES = ['BERTH_'];

/** `langgraph.json` is missing or unreadable. */
export class ProjectConfigError extends CliError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ProjectConfigError';
  }
}

export interface Project {
  /** The folder that is packed and uploaded (the current directory). */
  dir: string;
  /** Absolute path of langgraph.json. */
  configFile: string;
  /** langgraph.json relative to `dir`, `/`-separated: `source_revision_config.langgraph_config_path`. */
  configPath: string;
  /** The project's environment: the file langgraph.json's `env` names (or its inline values), else `.env`. */
  env: Record<string, string>;
  /** Where `env` came from, for messages (`.env`, `inline env of langgraph.json`, or none). */
  envSource: string | undefined;
}

/**
 * Parses dotenv text: `KEY=value`, `export KEY=value`, `#` comments (also after an unquoted value),
 * single quotes (literal), double quotes (with `\n`, `\t`, `\"`, `\\` escapes, may span lines),
 * backticks. Later keys win; lines that are not assignments are ignored, like dotenv does.
 */
export function parseDotEnv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const source = text.replace(/\r\n?/g, '\n');
  const line = /^[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*=[ \t]*/gm;
  let match: RegExpExecArray | null;
  while ((match = line.exec(source)) !== null) {
    const key = match[1]!;
    let at = line.lastIndex;
    const quote = source[at];
    let value: string;
    if (quote === '"' || quote === "'" || quote === '`') {
      const end = findClosingQuote(source, at + 1, quote);
      if (end < 0) {
        // No closing quote: dotenv takes the rest of the line as it is.
        const eol = source.indexOf('\n', at);
        value = source.slice(at, eol < 0 ? undefined : eol).trim();
        at = eol < 0 ? source.length : eol;
      } else {
        value = source.slice(at + 1, end);
        if (quote === '"') value = value.replace(/\\([nrt"\\])/g, (_m, c: string) => ({ n: '\n', r: '\r', t: '\t', '"': '"', '\\': '\\' })[c]!);
        at = end + 1;
      }
    } else {
      const eol = source.indexOf('\n', at);
      value = source.slice(at, eol < 0 ? undefined : eol);
      const comment = value.search(/(^|[ \t])#/);
      if (comment >= 0) value = value.slice(0, comment);
      value = value.trim();
      at = eol < 0 ? source.length : eol;
    }
    out[key] = value;
    line.lastIndex = at;
  }
  return out;
}

function findClosingQuote(source: string, from: number, quote: string): number {
  for (let i = from; i < source.length; i++) {
    if (quote === '"' && source[i] === '\\') {
      i++;
      continue;
    }
    if (source[i] === quote) return i;
  }
  return -1;
}

/** Reads and parses a dotenv file; `undefined` when there is none. */
export async function readDotEnv(file: string): Promise<Record<string, string> | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CliError(`cannot read ${file}: ${(error as Error).message}`, { cause: error });
  }
  return parseDotEnv(text);
}

/** Whether a variable is the platform's rather than the project's. */
export function isReserved(name: string): boolean {
  return RESERVED.has(name) || RESERVED_PREFIXES.some((prefix) => name.startsWith(prefix));
}

export interface SecretSplit {
  secrets: { name: string; value: string }[];
  /** Names left out: reserved ones, and names that cannot be environment variables. */
  skipped: string[];
}

/** The env entries sent as deployment secrets, in name order, and the ones left out. */
export function secretsFromEnv(env: Record<string, string>): SecretSplit {
  const secrets: { name: string; value: string }[] = [];
  const skipped: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (isReserved(name) || !isSecretName(name)) skipped.push(name);
    else secrets.push({ name, value: env[name]! });
  }
  return { secrets, skipped };
}

/**
 * Loads the project in `dir` with its config at `config` (relative to `dir` unless absolute).
 * @throws ProjectConfigError when langgraph.json is missing, outside `dir`, or not a JSON object.
 */
export async function loadProject(dir: string, config = 'langgraph.json'): Promise<Project> {
  const root = resolve(dir);
  const configFile = resolve(root, config);
  const exists = await stat(configFile).then(
    (s) => s.isFile(),
    () => false,
  );
  if (!exists) {
    throw new ProjectConfigError(
      `no ${basename(configFile)} at ${configFile}: run \`berth deploy\` in the folder of a LangGraph project ` +
        '(the one with langgraph.json), or pass --config <path>',
    );
  }
  const rel = relative(root, configFile);
  if (rel.startsWith(`..${sep}`) || isAbsolute(rel)) {
    throw new ProjectConfigError(`${configFile} is outside ${root}: the project folder (packed and uploaded) must contain it`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(configFile, 'utf8'));
  } catch (error) {
    throw new ProjectConfigError(`${configFile} is not valid JSON: ${(error as Error).message}`, { cause: error });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new ProjectConfigError(`${configFile} must hold a JSON object`);
  const declared = (parsed as { env?: unknown }).env;
  let env: Record<string, string> = {};
  let envSource: string | undefined;
  if (typeof declared === 'string') {
    const file = resolve(dirname(configFile), declared);
    const values = await readDotEnv(file);
    if (!values) throw new ProjectConfigError(`${configFile} names the env file ${declared}, which does not exist (${file})`);
    env = values;
    envSource = relative(root, file) || declared;
  } else if (declared && typeof declared === 'object' && !Array.isArray(declared)) {
    env = Object.fromEntries(Object.entries(declared as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
    envSource = 'the env of langgraph.json';
  } else {
    const values = await readDotEnv(resolve(root, '.env'));
    if (values) {
      env = values;
      envSource = '.env';
    }
  }
  return { dir: root, configFile, configPath: rel.split(sep).join('/'), env, envSource };
}
