/**
 * A trace's runs as a tree: children under their `parent_run_id` in start order,
 * a run whose parent is not among the runs at the top; and the rows a tree view shows, given which
 * runs are collapsed. Plain loops, no recursion: a trace of 5,000 runs or one 5,000 deep is built
 * in a few milliseconds.
 */

/** What the tree and the waterfall read of a run (the `select` of the page's runs query). */
export interface TraceRun {
  id: string;
  name?: string;
  run_type?: string;
  status?: string;
  start_time?: string;
  end_time?: string | null;
  parent_run_id?: string | null;
}

export const TRACE_RUN_FIELDS = ['name', 'run_type', 'status', 'start_time', 'end_time', 'parent_run_id'];

export interface TraceNode {
  run: TraceRun;
  children: TraceNode[];
  parent: TraceNode | null;
  depth: number;
  /** Start and end in ms since the epoch (end: the trace's end while the run has none). */
  start: number;
  end: number;
}

export interface TraceTree {
  roots: TraceNode[];
  byId: Map<string, TraceNode>;
  /** The first start and last end of the trace's runs, in ms since the epoch. */
  start: number;
  end: number;
}

/** Start order, ties by id: the order of LangSmith's dotted_order (start time and id), without reading it (it grows with depth). */
const order = (a: TraceNode, b: TraceNode) => a.start - b.start || (a.run.id < b.run.id ? -1 : a.run.id > b.run.id ? 1 : 0);

export function buildTree(runs: readonly TraceRun[], now = Date.now()): TraceTree {
  const byId = new Map<string, TraceNode>();
  let start = Infinity;
  let end = -Infinity;
  for (const run of runs) {
    const s = run.start_time ? Date.parse(run.start_time) : NaN;
    const e = run.end_time ? Date.parse(run.end_time) : NaN;
    const node: TraceNode = { run, children: [], parent: null, depth: 0, start: s, end: e };
    byId.set(run.id, node);
    if (Number.isFinite(s)) start = Math.min(start, s);
    if (Number.isFinite(e)) end = Math.max(end, e);
  }
  if (!Number.isFinite(start)) start = now;
  // A trace still running ends now, as far as its bars go.
  const unfinished = runs.some((r) => !r.end_time);
  end = Math.max(Number.isFinite(end) ? end : start, unfinished ? Math.max(now, start) : start);
  const roots: TraceNode[] = [];
  for (const node of byId.values()) {
    if (!Number.isFinite(node.start)) node.start = start;
    if (!Number.isFinite(node.end)) node.end = end;
    const parent = node.run.parent_run_id ? byId.get(node.run.parent_run_id) : undefined;
    if (parent && parent !== node) {
      node.parent = parent;
      parent.children.push(node);
    } else roots.push(node);
  }
  // Depths from the roots down; runs on a cycle of parents (never reached) are lifted to the top.
  const reached = new Set<TraceNode>();
  for (const root of roots) descend(root, reached);
  for (const node of byId.values()) {
    if (reached.has(node)) continue;
    node.parent?.children.splice(node.parent.children.indexOf(node), 1);
    node.parent = null;
    node.depth = 0;
    roots.push(node);
    descend(node, reached);
  }
  roots.sort(order);
  return { roots, byId, start, end };
}

/** Sorts the children below `top` and sets their depths, marking each node reached. */
function descend(top: TraceNode, reached: Set<TraceNode>): void {
  const stack = [top];
  while (stack.length) {
    const node = stack.pop()!;
    reached.add(node);
    node.children.sort(order);
    for (const child of node.children) {
      child.depth = node.depth + 1;
      if (!reached.has(child)) stack.push(child);
    }
  }
}

/** The rows of the tree view: every node whose ancestors are all expanded, in tree order. */
export function visibleRows(tree: TraceTree, collapsed: ReadonlySet<string>): TraceNode[] {
  const rows: TraceNode[] = [];
  const stack = [...tree.roots].reverse();
  while (stack.length) {
    const node = stack.pop()!;
    rows.push(node);
    if (!collapsed.has(node.run.id)) for (let i = node.children.length - 1; i >= 0; i--) stack.push(node.children[i]!);
  }
  return rows;
}
