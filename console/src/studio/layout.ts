/**
 * A graph of `GET /assistants/{assistant_id}/graph` laid out top to bottom by dagre: where each
 * node's box and each edge's line go. Box sizes follow the label (no text measuring: the font is
 * the console's own, so an estimate per character is close enough and needs no DOM).
 */
import dagre from '@dagrejs/dagre';

/** What the agent server answers (the LangGraph API's drawable graph). */
export interface DrawableGraph {
  nodes: { id: string | number; name?: string; type?: string; data?: unknown }[];
  edges: { source: string | number; target: string | number; conditional?: boolean; data?: unknown }[];
}

export interface PlacedNode {
  id: string;
  label: string;
  /** `__start__` / `__end__`: drawn as terminals, never run. */
  terminal: boolean;
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface PlacedEdge {
  source: string;
  target: string;
  conditional: boolean;
  label?: string;
  points: { x: number; y: number }[];
}

export interface Layout {
  nodes: PlacedNode[];
  edges: PlacedEdge[];
  width: number;
  height: number;
}

const NODE_HEIGHT = 40;
const CHAR_WIDTH = 8;
const MARGIN = 16;

/** The label of a node: `__start__` → `start`; a subgraph's node keeps its path (`outer:inner`). */
export function nodeLabel(id: string): string {
  return id === '__start__' ? 'start' : id === '__end__' ? 'end' : id;
}

export function layoutGraph(graph: DrawableGraph): Layout {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: 'TB', nodesep: 32, ranksep: 48, marginx: MARGIN, marginy: MARGIN });
  g.setDefaultEdgeLabel(() => ({}));
  for (const node of graph.nodes) {
    const id = String(node.id);
    g.setNode(id, { width: Math.max(88, nodeLabel(id).length * CHAR_WIDTH + 32), height: NODE_HEIGHT });
  }
  graph.edges.forEach((edge, i) => g.setEdge(String(edge.source), String(edge.target), {}, String(i)));
  dagre.layout(g);
  const nodes = g.nodes().map((id) => {
    const { x, y, width, height } = g.node(id);
    return { id, label: nodeLabel(id), terminal: id === '__start__' || id === '__end__', x: x - width / 2, y: y - height / 2, width, height };
  });
  const edges = graph.edges.map((edge, i) => {
    const source = String(edge.source);
    const target = String(edge.target);
    const label = typeof edge.data === 'string' && edge.data !== target ? edge.data : undefined;
    return { source, target, conditional: edge.conditional === true, ...(label ? { label } : {}), points: g.edge(source, target, String(i))?.points ?? [] };
  });
  const size = g.graph();
  return { nodes, edges, width: Math.ceil(size.width ?? 0), height: Math.ceil(size.height ?? 0) };
}
