/**
 * Imports a project's source file (TypeScript or JavaScript) without a build step.
 *
 * - Plain Node: tsx's ESM loader is registered once, process-wide (`register()` from
 *   `tsx/esm/api`, which calls `module.register`), then the file is loaded with a normal
 *   `import()`. A process-wide loader, not `tsImport`, because `tsImport` gives every import a
 *   `?tsx-namespace=` URL, so the project would get its own copies of `@langchain/langgraph`,
 *   `@langchain/core` and `zod`: their module-level registries (e.g. the zod schema-meta registry
 *   that marks `messages` channels) would not be the server's, and `instanceof` checks between
 *   server and project objects would fail.
 * - Under jest (ESM; `import.meta.jest` is set): jest resolves every `import()` itself and
 *   compiles `.ts` with swc, and it refuses `module.register`. No loader is registered and the
 *   same `import()` just works.
 * - Under the tsx CLI (`tsx src/main.ts`): its loader is already active and is not added twice.
 */
import { existsSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

let loaderRegistered: Promise<void> | undefined;

/** Every file loaded through the loader (and bundled for a `ui` entry) in this process, by absolute path. */
const loadedFiles = new Set<string>();
const loadListeners = new Set<(path: string) => void>();

/** A file the project's code loaded: as a module (a `file:` URL), or bundled for its UI (a path). */
export function noteLoadedFile(urlOrPath: string): void {
  let path: string;
  if (urlOrPath.startsWith('file:')) {
    const url = new URL(urlOrPath);
    url.search = '';
    url.hash = '';
    path = fileURLToPath(url);
  } else if (isAbsolute(urlOrPath)) {
    path = urlOrPath;
  } else {
    // node: builtins, data: URLs: no file to watch.
    return;
  }
  if (loadedFiles.has(path)) return;
  loadedFiles.add(path);
  for (const listener of loadListeners) listener(path);
}

/**
 * Calls `listener` with every file loaded so far through the project loader (modules the graphs,
 * auth, http app import, transitively, node_modules included; the files bundled for `ui`), then
 * with each one loaded later, until the returned function is called. `berth dev` reloads when one
 * of them changes: what the project runs, not whatever else is in its folder.
 */
export function onFileLoaded(listener: (path: string) => void): () => void {
  for (const path of loadedFiles) listener(path);
  loadListeners.add(listener);
  return () => void loadListeners.delete(listener);
}

/** True when something already compiles TypeScript for `import()` in this process. */
function typeScriptAlreadyHandled(): boolean {
  if ((import.meta as ImportMeta & { jest?: unknown }).jest !== undefined) return true;
  return process.execArgv.some((arg) => /(?:^|[\\/])tsx(?:[\\/]|$)/.test(arg));
}

/**
 * Registers tsx's ESM loader for the whole process, once (later calls reuse the first
 * registration, whatever their `tsconfig`).
 * @param tsconfig - tsconfig.json whose `paths` etc. apply to project files; `false` for none.
 */
export function ensureTypeScriptLoader(tsconfig: string | false = false): Promise<void> {
  loaderRegistered ??= (async () => {
    if (typeScriptAlreadyHandled()) return;
    const { register } = await import('tsx/esm/api');
    try {
      register({ tsconfig, onImport: noteLoadedFile });
    } catch {
      // A runtime that forbids loader hooks (as jest does) compiles TypeScript its own way.
    }
  })();
  return loaderRegistered;
}

/**
 * Imports an absolute file path (`.ts`, `.mts`, `.cts`, `.tsx`, `.js`, `.mjs`, `.cjs`) as a
 * module and returns its namespace object.
 */
export async function importSourceFile(absolutePath: string, options: { tsconfig?: string | false } = {}): Promise<Record<string, unknown>> {
  await ensureTypeScriptLoader(options.tsconfig ?? false);
  return (await import(pathToFileURL(absolutePath).href)) as Record<string, unknown>;
}

/**
 * The named export of a project module (`auth.path`, `http.app`, `store.index.embed`), imported with
 * the project's tsconfig.json when it has one.
 * @param fail - makes the error to throw, from a problem that names the file (and the import error as cause).
 */
export async function importProjectExport(
  projectDir: string,
  module: { sourceFile: string; exportName: string },
  fail: (problem: string, cause?: unknown) => Error,
): Promise<unknown> {
  const tsconfig = join(projectDir, 'tsconfig.json');
  let namespace: Record<string, unknown>;
  try {
    namespace = await importSourceFile(module.sourceFile, { tsconfig: existsSync(tsconfig) ? tsconfig : false });
  } catch (error) {
    throw fail(`cannot import ${module.sourceFile}: ${(error as Error)?.message ?? String(error)}`, error);
  }
  const value = namespace[module.exportName];
  if (value === undefined) {
    const names = Object.keys(namespace).filter((k) => namespace[k] !== undefined);
    throw fail(`${module.sourceFile} has no export "${module.exportName}" (it exports: ${names.join(', ') || 'nothing'})`);
  }
  return value;
}
