/**
 * Loading the graphs of a project the way `langgraphjs dev` does: import each module named in
 * `graphs`, take the named export and accept a compiled graph, a graph builder (compiled by us)
 * or a factory `(config) => graph | Promise<graph>` (called every time a graph is needed).
 * The server always supplies the checkpointer and store; whatever the project compiled in is
 * replaced.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { BaseCheckpointSaver, BaseStore, LangGraphRunnableConfig, Pregel } from '@langchain/langgraph';
import type { GraphSpec, ProjectConfig } from './config.js';
import { GraphLoadError } from './errors.js';
import { captureContextDeclarations } from './context-schema.js';
import { importSourceFile } from './import-module.js';

/** A compiled graph (`CompiledStateGraph`, or any Pregel such as a functional-API entrypoint). */
export type RunnableGraph = Pregel<any, any, any, any, any, any, any, any, any, any>;

/** What the module exports for a graph. */
export type GraphExportKind = 'compiled' | 'builder' | 'factory';

/** The server's persistence for one use of a graph. */
export interface GetGraphOptions {
  /** The server's checkpointer; `null` for none (stateless runs, schema and drawing requests). */
  checkpointer: BaseCheckpointSaver | null;
  /** The server's store; when omitted the graph keeps none of its own either. */
  store?: BaseStore;
}

/** One graph of a project, ready to be instantiated per use. */
export interface LoadedGraph {
  readonly graphId: string;
  readonly description?: string;
  readonly spec: GraphSpec;
  readonly kind: GraphExportKind;
  /**
   * A compiled instance for inspection (schemas, drawing, context validation), without
   * persistence: the export itself, the builder compiled once, or, for a factory, what it
   * returned when called once at load time with `{configurable: {}}` (`undefined` when that
   * call threw or returned something else; runs still call the factory and report its errors).
   */
  readonly template: RunnableGraph | undefined;
  /**
   * A compiled graph with the server's checkpointer and store. Compiled exports are shallow
   * copies (so concurrent uses with different persistence never share state), builders are
   * compiled with the checkpointer and store, factories are called with `config`.
   * @throws GraphLoadError when a factory throws or returns something that is not a graph.
   */
  getGraph(config: LangGraphRunnableConfig | undefined, options: GetGraphOptions): Promise<RunnableGraph>;
}

interface Builder {
  compile(options?: { checkpointer?: BaseCheckpointSaver; store?: BaseStore }): unknown;
}

type Factory = (config: LangGraphRunnableConfig) => unknown;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function isCompiledGraph(value: unknown): value is RunnableGraph {
  return isObject(value) && typeof value.invoke === 'function' && typeof value.streamEvents === 'function' && typeof value.getGraphAsync === 'function';
}

function isBuilder(value: unknown): value is Builder {
  return isObject(value) && typeof value.compile === 'function' && !isCompiledGraph(value);
}

function isClass(value: Function): boolean {
  return /^class[\s{]/.test(Function.prototype.toString.call(value));
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'function') return isClass(value) ? `class ${value.name || '(anonymous)'}` : 'function';
  if (isObject(value)) return `object${value.constructor?.name ? ` (${value.constructor.name})` : ''}`;
  return typeof value;
}

/**
 * LangChain 1.x `createAgent` returns a wrapper that looks like a compiled graph and keeps the
 * real one in `.graph`; use the inner graph (as langgraphjs does).
 */
function unwrap(graph: RunnableGraph): RunnableGraph {
  const inner = (graph as unknown as { graph?: unknown }).graph;
  return isCompiledGraph(inner) && isObject((inner as unknown as { builder?: unknown }).builder) ? inner : graph;
}

/** A graph-like value → a compiled graph carrying the server's persistence. */
function withPersistence(graphId: string, value: unknown, options: GetGraphOptions, origin: string): RunnableGraph {
  const checkpointer = options.checkpointer ?? undefined;
  if (isBuilder(value)) {
    let compiled: unknown;
    try {
      compiled = value.compile({ checkpointer, store: options.store });
    } catch (error) {
      throw new GraphLoadError(graphId, `compiling ${origin} failed: ${(error as Error).message}`, { cause: error });
    }
    if (!isCompiledGraph(compiled)) throw new GraphLoadError(graphId, `compiling ${origin} did not return a graph`);
    return unwrap(compiled);
  }
  if (isCompiledGraph(value)) {
    const graph = unwrap(value);
    // `withConfig({})` is Pregel's own shallow copy (`new this.constructor({...this})`).
    const copy = typeof graph.withConfig === 'function' ? (graph.withConfig({}) as RunnableGraph) : graph;
    copy.checkpointer = checkpointer;
    copy.store = options.store;
    return copy;
  }
  throw new GraphLoadError(
    graphId,
    `${origin} is not a graph: expected a compiled graph, a StateGraph builder or a factory function, got ${describeValue(value)}`,
  );
}

class ProjectGraph implements LoadedGraph {
  readonly graphId: string;
  readonly description?: string;

  constructor(
    readonly spec: GraphSpec,
    readonly kind: GraphExportKind,
    private readonly value: unknown,
    readonly template: RunnableGraph | undefined,
  ) {
    this.graphId = spec.graphId;
    if (spec.description !== undefined) this.description = spec.description;
  }

  async getGraph(config: LangGraphRunnableConfig | undefined, options: GetGraphOptions): Promise<RunnableGraph> {
    const origin = `export "${this.spec.exportName}" of ${this.spec.spec}`;
    if (this.kind !== 'factory') return withPersistence(this.graphId, this.value, options, origin);
    let produced: unknown;
    try {
      produced = await (this.value as Factory)(config ?? { configurable: {} });
    } catch (error) {
      throw new GraphLoadError(this.graphId, `graph factory ${origin} threw: ${(error as Error).message}`, {
        cause: error,
      });
    }
    return withPersistence(this.graphId, produced, options, `the value returned by the factory ${origin}`);
  }
}

/**
 * A compiled graph to inspect (schemas, drawing, subgraphs), without persistence: the template,
 * or for a factory given a `config`, what the factory builds from it.
 * @throws GraphLoadError when a factory has to be called and fails.
 */
export async function inspectionGraph(loaded: LoadedGraph, config?: LangGraphRunnableConfig): Promise<RunnableGraph> {
  if (loaded.template && (config === undefined || loaded.kind !== 'factory')) return loaded.template;
  return loaded.getGraph(config ?? { configurable: {} }, { checkpointer: null });
}

/**
 * Imports one graph module and classifies its export.
 * @throws GraphLoadError when the module cannot be imported, lacks the export, or the export
 *   is neither a compiled graph, a builder nor a function; a builder that fails to compile is
 *   reported here too.
 */
export async function loadGraph(spec: GraphSpec, options: { tsconfig?: string | false } = {}): Promise<LoadedGraph> {
  const { graphId } = spec;
  let namespace: Record<string, unknown>;
  try {
    // Before the module builds its graphs: context schemas LangGraph would drop are remembered.
    await captureContextDeclarations(spec.sourceFile);
    namespace = await importSourceFile(spec.sourceFile, options);
  } catch (error) {
    const hint = commonJsHint(spec.sourceFile);
    throw new GraphLoadError(graphId, `cannot import ${spec.file}: ${(error as Error)?.message ?? String(error)}${hint}`, {
      cause: error,
    });
  }
  if (!(spec.exportName in namespace) || namespace[spec.exportName] === undefined) {
    const available = Object.keys(namespace).filter((k) => namespace[k] !== undefined);
    throw new GraphLoadError(graphId, `${spec.spec}: module has no export "${spec.exportName}" (exports: ${available.join(', ') || 'none'})`);
  }
  let value: unknown = namespace[spec.exportName];
  // A module may export a promise of a graph (top-level async setup); langgraphjs awaits it.
  if (isObject(value) && typeof value.then === 'function') {
    try {
      value = await (value as unknown as PromiseLike<unknown>);
    } catch (error) {
      throw new GraphLoadError(graphId, `export "${spec.exportName}" of ${spec.spec} rejected`, { cause: error });
    }
  }
  const origin = `export "${spec.exportName}" of ${spec.spec}`;
  if (typeof value === 'function' && !isClass(value)) {
    const factory = new ProjectGraph(spec, 'factory', value, undefined);
    const template = await factory.getGraph({ configurable: {} }, { checkpointer: null }).catch(() => undefined);
    return new ProjectGraph(spec, 'factory', value, template);
  }
  if (isBuilder(value)) {
    // Compiling now also reports a builder that cannot compile at load time.
    return new ProjectGraph(spec, 'builder', value, withPersistence(graphId, value, { checkpointer: null }, origin));
  }
  if (isCompiledGraph(value)) return new ProjectGraph(spec, 'compiled', value, unwrap(value));
  return withPersistence(graphId, value, { checkpointer: null }, origin) as never; // throws "not a graph"
}

/**
 * Loads every graph of a project. Modules are imported without a build step (see
 * `import-module.ts`); the project's `tsconfig.json`, when present, applies to them.
 * @returns graphs by id, in `langgraph.json` order.
 * @throws GraphLoadError for the first graph that cannot be loaded.
 */
export async function loadGraphs(config: Pick<ProjectConfig, 'graphs' | 'projectDir'>): Promise<Map<string, LoadedGraph>> {
  const tsconfigPath = join(config.projectDir, 'tsconfig.json');
  const tsconfig = existsSync(tsconfigPath) ? tsconfigPath : false;
  const graphs = new Map<string, LoadedGraph>();
  for (const spec of Object.values(config.graphs)) graphs.set(spec.graphId, await loadGraph(spec, { tsconfig }));
  return graphs;
}

/**
 * LangGraph.js graphs are ES modules. A `.ts`/`.js` file outside a `"type": "module"` package is
 * loaded as CommonJS, which fails in confusing ways; say what to change.
 */
function commonJsHint(sourceFile: string): string {
  if (!/\.(ts|tsx|js|jsx)$/.test(sourceFile)) return '';
  for (let dir = dirname(sourceFile); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { type?: string }).type === 'module') return '';
      } catch {
        return '';
      }
      return ` (hint: ${manifest} does not say "type": "module", so the file is loaded as CommonJS; LangGraph.js projects are ES modules: add "type": "module" to it)`;
    }
    if (dirname(dir) === dir) {
      return ` (hint: no package.json with "type": "module" above ${sourceFile}, so it is loaded as CommonJS; add a package.json with "type": "module" to the project)`;
    }
  }
}
