/**
 * The subgraphs of a graph (GET /assistants/{id}/subgraphs): each one's JSON Schemas, keyed by
 * its namespace — the node names leading to it, `|`-separated (`outer`, `outer|inner`).
 */
import type { LangGraphRunnableConfig } from '@langchain/langgraph';
import { inspectionGraph, type LoadedGraph } from './graphs.js';
import { compiledGraphSchemas, type GraphSchemas, type JsonSchema } from './schemas.js';

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

/**
 * The subgraphs directly under `namespace` (the root when omitted), or all of them below it with
 * `recurse`. A factory is built with `config` (the assistant's).
 * @throws GraphLoadError when a factory has to be called and fails.
 */
export async function graphSubgraphs(
  loaded: LoadedGraph,
  options: { namespace?: string; recurse?: boolean; config?: LangGraphRunnableConfig } = {},
): Promise<Record<string, SubgraphSchemas>> {
  const graph = await inspectionGraph(loaded, options.config);
  const out: Record<string, SubgraphSchemas> = {};
  for await (const [namespace, subgraph] of graph.getSubgraphsAsync(options.namespace, options.recurse ?? false)) {
    const s = compiledGraphSchemas(subgraph as typeof graph, loaded.graphId);
    out[namespace] = { ...s, state: s.state_schema, input: s.input_schema, output: s.output_schema, config: s.config_schema };
  }
  return out;
}
