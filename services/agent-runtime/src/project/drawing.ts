/**
 * The drawable structure of a graph, as GET /assistants/{id}/graph returns it: LangChain's
 * `Graph.toJSON()` of the compiled graph's `getGraphAsync({ xray })`.
 */
import type { LangGraphRunnableConfig } from '@langchain/langgraph';
import { inspectionGraph, type LoadedGraph } from '@berth/langgraph-project';

/** A node of the drawing. `id` is the node name (`__start__`, `__end__`, node names). */
export interface DrawingNode {
  id: string | number;
  type: 'runnable' | 'schema' | string;
  /** `{id, name}` of a runnable node; the JSON Schema of the graph's input or output for a schema node. */
  data: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

/** An edge of the drawing; `conditional` marks edges added by conditional routing. */
export interface DrawingEdge {
  source: string | number;
  target: string | number;
  /** The label of a conditional edge. */
  data?: string;
  conditional?: boolean;
}

/** The body of GET /assistants/{id}/graph. */
export interface GraphDrawing {
  nodes: DrawingNode[];
  edges: DrawingEdge[];
}

/**
 * Draws a graph (its `template`). `xray` expands subgraphs: `true` all levels, a number that
 * many levels. A factory is called with `config` when one is given, or when it has no template.
 * @throws GraphLoadError when a factory has to be called and fails.
 */
export async function graphDrawing(loaded: LoadedGraph, options: { xray?: boolean | number; config?: LangGraphRunnableConfig } = {}): Promise<GraphDrawing> {
  const config = options.config ?? { configurable: {} };
  const graph = await inspectionGraph(loaded, options.config);
  const xray = options.xray === undefined || options.xray === false || options.xray === 0 ? undefined : options.xray;
  const drawable = await graph.getGraphAsync({ ...config, ...(xray !== undefined ? { xray } : {}) });
  return drawable.toJSON() as unknown as GraphDrawing;
}
