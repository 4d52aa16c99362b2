/**
 * The subgraphs of a graph (GET /assistants/{id}/subgraphs): each one's JSON Schemas, keyed by
 * its namespace — the node names leading to it, `|`-separated (`outer`, `outer|inner`). As for the
 * graph itself (schemas.ts), schemas that only list channel names take the subgraph's TypeScript
 * types, read from the graph module's source (type-subgraphs.ts) in the type reader's worker.
 */
import type { LangGraphRunnableConfig } from '@langchain/langgraph';
import type { Logger } from '@berth/log';
import { compiledGraphSchemas, inspectionGraph, namesOnly, withTypes, type GraphSchemas, type JsonSchema, type LoadedGraph } from '@berth/langgraph-project';
import type { TypeSchemaReader } from './type-schema-reader.js';

/**
 * One subgraph's schemas, under the names of the SDK's `GraphSchema` (`state_schema`, …) and under
 * the short names the LangGraph.js server uses for subgraphs (`state`, `input`, `output`, `config`).
 */
export interface SubgraphSchemas extends GraphSchemas {
  state: JsonSchema | null;
  input: JsonSchema | null;
  output: JsonSchema | null;
  config: JsonSchema | null;
}

/** Namespaces already warned about, per graph: a warning per namespace, not per request. */
const warned = new WeakMap<LoadedGraph, Set<string>>();

/**
 * The subgraphs directly under `namespace` (the root when omitted), or all of them below it with
 * `recurse`. A factory is built with `config` (the assistant's). With `types`, schemas listing
 * channel names only are replaced by the subgraph's TypeScript-declared ones where they can be read.
 * @throws GraphLoadError when a factory has to be called and fails.
 */
export async function graphSubgraphs(
  loaded: LoadedGraph,
  options: { namespace?: string; recurse?: boolean; config?: LangGraphRunnableConfig; types?: TypeSchemaReader; log?: Logger } = {},
): Promise<Record<string, SubgraphSchemas>> {
  const graph = await inspectionGraph(loaded, options.config);
  const found: [string, GraphSchemas][] = [];
  for await (const [namespace, subgraph] of graph.getSubgraphsAsync(options.namespace, options.recurse ?? false)) {
    found.push([namespace, compiledGraphSchemas(subgraph as typeof graph, loaded.graphId)]);
  }
  const untyped = found.filter(([, s]) => namesOnly(s));
  const typed = options.types && untyped.length > 0 ? await options.types.read(loaded.graphId, loaded.spec.sourceFile, loaded.spec.exportName, true) : null;
  const missing = typed ? untyped.map(([namespace]) => namespace).filter((namespace) => !typed.subgraphs[namespace]) : [];
  const seen = warned.get(loaded) ?? new Set<string>();
  warned.set(loaded, seen);
  const unwarned = missing.filter((namespace) => !seen.has(namespace));
  if (unwarned.length > 0) {
    unwarned.forEach((namespace) => seen.add(namespace));
    options.log?.warn(
      { graph_id: loaded.graphId, namespaces: unwarned },
      "cannot find these subgraphs' TypeScript types in the graph's module: their schemas list channel names only",
    );
  }
  const out: Record<string, SubgraphSchemas> = {};
  for (const [namespace, derived] of found) {
    const s = withTypes(derived, typed?.subgraphs[namespace] ?? null);
    out[namespace] = { ...s, state: s.state_schema, input: s.input_schema, output: s.output_schema, config: s.config_schema };
  }
  return out;
}
