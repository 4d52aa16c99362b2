/**
 * Generative UI (`ui` of langgraph.json): each entry maps a name (usually a graph id) to a module
 * whose default export is `{ [componentName]: ReactComponent }`. Each is bundled with esbuild into
 * a browser script, kept in memory and served by `api/ui.ts`; the SDK's `LoadExternalComponent`
 * loads that script into a shadow root and calls `__LGUI_<name>.render(component, shadowRootId)`.
 *
 * Shared dependencies (React, react-dom, the SDK and `ui_config.shared`) are not bundled: the page
 * that renders the component provides them through `globalThis[Symbol.for("LGUI_REQUIRE")]`
 * (set by the SDK's `bootstrapUiContext`), so the component uses the page's single React.
 */
import { extname, relative, resolve, sep } from 'node:path';
import { build, type Plugin } from 'esbuild';
import { BerthError } from '@berth/errors';
import { noteLoadedFile, type ProjectConfig } from '@berth/langgraph-project';

/** One built file of a UI bundle (`entrypoint.js`, and `entrypoint.css` when the components import CSS). */
export interface UiAsset {
  basename: string;
  contentType: string;
  contents: Uint8Array;
}

/** A `ui` entry failed to bundle (missing file, syntax error, an import that does not resolve). */
export class UiBundleError extends BerthError {
  constructor(name: string, problem: string, options?: { cause?: unknown }) {
    super('invalid_argument', `ui "${name}": ${problem}`, options);
  }
}

/** Packages the rendering page provides, with their subpaths (`react/jsx-runtime`, `react-dom/client`…). */
const SHARED_BY_DEFAULT = ['react', 'react-dom', '@langchain/langgraph-sdk'];

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'application/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

/** The global the script assigns its exports to: `__LGUI_` and the name with non-alphanumerics as `_`. */
export function uiGlobalName(name: string): string {
  return `__LGUI_${name.replace(/[^a-zA-Z0-9]/g, '_')}`;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/** Resolves shared packages to a module that takes them from the page at run time. */
function sharedModules(names: string[]): Plugin {
  const filter = new RegExp(`^(?:${names.map(escapeRegExp).join('|')})(?:/.*)?$`);
  return {
    name: 'berth-ui-shared',
    setup(b) {
      b.onResolve({ filter }, (args) => ({ path: args.path, namespace: 'berth-ui-shared' }));
      b.onLoad({ filter: /.*/, namespace: 'berth-ui-shared' }, (args) => ({
        // CommonJS, so that esbuild's interop gives named and default imports of it.
        contents: `module.exports = globalThis[Symbol.for("LGUI_REQUIRE")](${JSON.stringify(args.path)});`,
        loader: 'js',
      }));
    },
  };
}

/** The entry module: the project's components plus the `render` the SDK calls. */
function entryModule(componentsFile: string, projectDir: string): Plugin {
  const importPath = `./${relative(projectDir, componentsFile).split(sep).join('/')}`;
  return {
    name: 'berth-ui-entry',
    setup(b) {
      b.onResolve({ filter: /^berth-ui-entry$/ }, () => ({ path: 'entry', namespace: 'berth-ui-entry' }));
      b.onLoad({ filter: /.*/, namespace: 'berth-ui-entry' }, () => ({
        resolveDir: projectDir,
        loader: 'js',
        contents: [
          `import components from ${JSON.stringify(importPath)};`,
          // The SDK has made the element and its shadow root; the component is rendered by the
          // page's React into a div placed there, through the store the SDK registered.
          'export function render(name, shadowRootId) {',
          '  const root = document.getElementById(shadowRootId).shadowRoot;',
          '  const target = document.createElement("div");',
          '  root.appendChild(target);',
          '  globalThis[Symbol.for("LGUI_EXT_STORE")].respond(shadowRootId, components[name], target);',
          '}',
        ].join('\n'),
      }));
    },
  };
}

/**
 * Bundles one `ui` entry.
 * @throws UiBundleError when esbuild reports errors.
 */
export async function bundleUi(name: string, componentsFile: string, projectDir: string, shared: string[] = []): Promise<UiAsset[]> {
  try {
    const result = await build({
      entryPoints: { entrypoint: 'berth-ui-entry' },
      bundle: true,
      write: false,
      outdir: resolve(projectDir, '.berth', 'ui', name),
      format: 'iife',
      globalName: uiGlobalName(name),
      platform: 'browser',
      target: 'es2020',
      jsx: 'automatic',
      logLevel: 'silent',
      plugins: [entryModule(componentsFile, projectDir), sharedModules([...SHARED_BY_DEFAULT, ...shared])],
      metafile: true,
    });
    // What it bundled from files (the others are the plugins' namespaces), relative to the working directory.
    for (const input of Object.keys(result.metafile.inputs)) if (!/^[a-z-]+:/.test(input)) noteLoadedFile(resolve(input));
    return result.outputFiles.map((file) => {
      const basename = file.path.slice(file.path.lastIndexOf(sep) + 1);
      // esbuild marks Symbol.for() pure; without the mark the lookup reads as the SDK documents it
      // (`globalThis[Symbol.for("LGUI_REQUIRE")]`), which the LangGraph server's tests look for.
      const contents = basename.endsWith('.js') ? new TextEncoder().encode(file.text.replaceAll('/* @__PURE__ */ Symbol.for(', 'Symbol.for(')) : file.contents;
      return { basename, contentType: CONTENT_TYPES[extname(basename)] ?? 'application/octet-stream', contents };
    });
  } catch (error) {
    const errors = (error as { errors?: { text: string; location?: { file: string; line: number } | null }[] }).errors;
    const problem = errors?.length
      ? errors.map((e) => (e.location ? `${e.location.file}:${e.location.line}: ${e.text}` : e.text)).join('; ')
      : ((error as Error)?.message ?? String(error));
    throw new UiBundleError(name, `cannot bundle ${componentsFile}: ${problem}`, { cause: error });
  }
}

/**
 * Bundles every `ui` entry of the project (none when `http.disable_ui` is set).
 * @returns the assets of each entry by name.
 * @throws UiBundleError for the first entry that fails.
 */
export async function bundleProjectUi(project: ProjectConfig): Promise<Map<string, UiAsset[]>> {
  const bundles = new Map<string, UiAsset[]>();
  if (project.http?.disable_ui) return bundles;
  const shared = project.json.ui_config?.shared ?? [];
  for (const [name, file] of Object.entries(project.ui)) bundles.set(name, await bundleUi(name, file, project.projectDir, shared));
  return bundles;
}
