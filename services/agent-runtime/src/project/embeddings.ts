/**
 * The embeddings behind the store's semantic search: `store.index` of `langgraph.json`
 * (`{embed, dims, fields?}`), loaded once at startup.
 *
 * `embed` is either a module spec of the project (`./src/embed.ts:embed`), whose export is a
 * function `(texts: string[]) => number[][] | Promise<number[][]>` or a LangChain `Embeddings`
 * object, or `provider:model` (e.g. `openai:text-embedding-3-small`), built with the project's own
 * installed `@langchain/<provider>` package. Anything else stops the server at startup.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BerthError } from '@berth/errors';
import { importProjectExport, ProjectConfigError, resolveModuleSpec, type ProjectConfig } from '@berth/langgraph-project';

/** What the store needs of an embeddings provider. */
export interface TextEmbedder {
  embedDocuments(texts: string[]): Promise<number[][]>;
  embedQuery(text: string): Promise<number[]>;
}

/** Semantic search as configured: the embedder, its vector size and the value fields it embeds. */
export interface StoreIndex {
  embedder: TextEmbedder;
  dims: number;
  /** Paths of value fields (LangGraph's syntax: `a.b`, `list[*]`, `list[0]`); `$` is the whole value. */
  fields: string[];
  /** The `embed` spec as written, for logs. */
  spec: string;
}

/** An embedding call failed or returned something that is not `dims` numbers per text. */
export class EmbeddingError extends BerthError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('internal', message, options);
  }
}

/** Providers known by `provider:model`: their package and Embeddings class (all take `{model}`). */
const PROVIDERS: Record<string, { pkg: string; className: string }> = {
  openai: { pkg: '@langchain/openai', className: 'OpenAIEmbeddings' },
  cohere: { pkg: '@langchain/cohere', className: 'CohereEmbeddings' },
  mistralai: { pkg: '@langchain/mistralai', className: 'MistralAIEmbeddings' },
  ollama: { pkg: '@langchain/ollama', className: 'OllamaEmbeddings' },
};

const KEY = 'store.index.embed';

function isEmbeddings(value: unknown): value is TextEmbedder {
  const v = value as Partial<TextEmbedder> | null;
  return typeof v === 'object' && v !== null && typeof v.embedDocuments === 'function' && typeof v.embedQuery === 'function';
}

/** A spec naming a file (`./x.ts:fn`, `/abs/x.js`) rather than `provider:model`. */
function isFileSpec(spec: string): boolean {
  return /^\.{0,2}[\\/]/.test(spec) || /\.[cm]?[jt]sx?(:[^:]*)?$/.test(spec);
}

/** Checks what an embedder returned: `count` vectors of `dims` finite numbers. */
function checkVectors(vectors: unknown, count: number, dims: number, spec: string): number[][] {
  if (!Array.isArray(vectors) || vectors.length !== count) {
    throw new EmbeddingError(
      `store.index.embed (${spec}) returned ${Array.isArray(vectors) ? `${vectors.length} vectors` : typeof vectors} for ${count} text(s)`,
    );
  }
  for (const vector of vectors) {
    if (!Array.isArray(vector) || vector.length !== dims || !vector.every((x) => typeof x === 'number' && Number.isFinite(x))) {
      throw new EmbeddingError(`store.index.embed (${spec}) returned a vector that is not ${dims} finite numbers (store.index.dims)`);
    }
  }
  return vectors as number[][];
}

/** Wraps an embedder so every result is checked against `dims` and failures are EmbeddingErrors. */
function checked(inner: TextEmbedder, dims: number, spec: string): TextEmbedder {
  const call = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (error) {
      if (error instanceof EmbeddingError) throw error;
      throw new EmbeddingError(`store.index.embed (${spec}) failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
    }
  };
  return {
    embedDocuments: (texts) => call(async () => checkVectors(await inner.embedDocuments(texts), texts.length, dims, spec)),
    embedQuery: (text) => call(async () => checkVectors([await inner.embedQuery(text)], 1, dims, spec)[0]!),
  };
}

async function fromModule(project: ProjectConfig, spec: string): Promise<TextEmbedder> {
  const module = resolveModuleSpec(spec, project.projectDir, project.configPath, KEY);
  const value = await importProjectExport(project.projectDir, module, (problem, cause) => new ProjectConfigError(project.configPath, KEY, problem, { cause }));
  if (isEmbeddings(value)) return value;
  if (typeof value === 'function') {
    const fn = value as (texts: string[]) => unknown;
    return {
      embedDocuments: async (texts) => (await fn(texts)) as number[][],
      embedQuery: async (text) => ((await fn([text])) as number[][])[0]!,
    };
  }
  throw new ProjectConfigError(
    project.configPath,
    KEY,
    `export "${module.exportName}" of ${spec} is ${value === undefined ? 'missing' : typeof value}; expected a function (texts: string[]) => number[][] or an Embeddings object`,
  );
}

async function fromProvider(project: ProjectConfig, spec: string): Promise<TextEmbedder> {
  const colon = spec.indexOf(':');
  const provider = colon > 0 ? spec.slice(0, colon) : '';
  const model = colon > 0 ? spec.slice(colon + 1) : '';
  const known = PROVIDERS[provider];
  if (!known || !model) {
    throw new ProjectConfigError(
      project.configPath,
      KEY,
      `"${spec}" is neither a file spec (./src/embed.ts:embed) nor provider:model with a known provider (${Object.keys(PROVIDERS).join(', ')})`,
    );
  }
  let entry: string;
  try {
    // The project's own copy, as graph code would import it.
    entry = createRequire(join(project.projectDir, 'package.json')).resolve(known.pkg);
  } catch (error) {
    throw new ProjectConfigError(project.configPath, KEY, `"${spec}" needs ${known.pkg}, which the project does not install (npm install ${known.pkg})`, {
      cause: error,
    });
  }
  const module = (await import(pathToFileURL(entry).href)) as Record<string, unknown>;
  const EmbeddingsClass = module[known.className] as (new (fields: { model: string }) => unknown) | undefined;
  if (typeof EmbeddingsClass !== 'function') throw new ProjectConfigError(project.configPath, KEY, `${known.pkg} has no export ${known.className}`);
  const embeddings = new EmbeddingsClass({ model });
  if (!isEmbeddings(embeddings)) throw new ProjectConfigError(project.configPath, KEY, `${known.pkg}.${known.className} is not an Embeddings class`);
  return embeddings;
}

/**
 * The project's semantic search configuration, or undefined when `store.index` is absent.
 * @throws ProjectConfigError when `embed` cannot be loaded (missing file or export, unknown
 *   provider, provider package not installed).
 */
export async function loadStoreIndex(project: ProjectConfig): Promise<StoreIndex | undefined> {
  const index = project.json.store?.index;
  if (!index) return undefined;
  const embedder = isFileSpec(index.embed) ? await fromModule(project, index.embed) : await fromProvider(project, index.embed);
  return { embedder: checked(embedder, index.dims, index.embed), dims: index.dims, fields: index.fields ?? ['$'], spec: index.embed };
}
