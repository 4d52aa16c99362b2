/**
 * A laid-out graph: edges drawn in SVG (conditional ones dashed), nodes as buttons over it, so each
 * is reached with Tab and named for screen readers with its state (`plan, running`). The edges are
 * listed for screen readers too, as the picture cannot say them.
 */
import type { Layout, PlacedEdge } from './layout';

/** A node's part in the run shown: executing now, or finished (with its latest update). */
export type NodeState = 'running' | 'done';

const nodeTone: Record<NodeState | 'idle', string> = {
  idle: 'border-slate-400 bg-white text-slate-900 dark:border-slate-500 dark:bg-slate-900 dark:text-slate-100',
  running:
    'border-blue-700 bg-blue-100 text-blue-950 ring-4 ring-blue-400/60 motion-safe:animate-pulse dark:border-blue-300 dark:bg-blue-950 dark:text-blue-100',
  done: 'border-green-700 bg-green-50 text-green-950 dark:border-green-400 dark:bg-green-950 dark:text-green-100',
};

function edgePath(edge: PlacedEdge): string {
  const [first, ...rest] = edge.points;
  if (!first) return '';
  return `M${first.x},${first.y}` + rest.map((p) => ` L${p.x},${p.y}`).join('');
}

export function GraphView({
  layout,
  states,
  selected,
  onSelect,
}: {
  layout: Layout;
  states: ReadonlyMap<string, NodeState>;
  selected: string | undefined;
  onSelect: (id: string) => void;
}) {
  const label = (id: string) => layout.nodes.find((n) => n.id === id)?.label ?? id;
  return (
    <div className="overflow-auto rounded-md border border-slate-300 bg-slate-50 dark:border-slate-700 dark:bg-slate-950">
      {/* React sets styles through the CSSOM, which the console's CSP (no inline styles) allows. */}
      <div className="relative" style={{ width: layout.width, height: layout.height }}>
        <svg width={layout.width} height={layout.height} className="absolute inset-0 text-slate-500 dark:text-slate-400" aria-hidden="true">
          <defs>
            <marker id="studio-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
              <path d="M0,0 L10,5 L0,10 z" fill="currentColor" />
            </marker>
          </defs>
          {layout.edges.map((edge, i) => (
            <path
              key={i}
              d={edgePath(edge)}
              fill="none"
              stroke="currentColor"
              strokeWidth={1.5}
              strokeDasharray={edge.conditional ? '6 4' : undefined}
              markerEnd="url(#studio-arrow)"
              data-edge={`${edge.source}->${edge.target}`}
              data-conditional={edge.conditional}
            />
          ))}
        </svg>
        <ul aria-label="Nodes">
          {layout.nodes.map((node) => {
            const state = states.get(node.id);
            return (
              <li key={node.id}>
                <button
                  type="button"
                  data-node={node.id}
                  data-state={state ?? 'idle'}
                  aria-pressed={selected === node.id}
                  aria-label={`${node.label}${state ? `, ${state === 'running' ? 'running' : 'finished'}` : ''}`}
                  onClick={() => onSelect(node.id)}
                  style={{ left: node.x, top: node.y, width: node.width, height: node.height }}
                  className={`absolute truncate border-2 px-3 text-sm font-medium focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-blue-600 aria-pressed:underline ${
                    node.terminal ? 'rounded-full' : 'rounded-md'
                  } ${nodeTone[state ?? 'idle']}`}
                >
                  {node.label}
                </button>
              </li>
            );
          })}
        </ul>
        <ul className="sr-only" aria-label="Edges">
          {layout.edges.map((edge, i) => (
            <li key={i}>
              {label(edge.source)} to {label(edge.target)}
              {edge.conditional ? ' (conditional)' : ''}
              {edge.label ? ` when ${edge.label}` : ''}
            </li>
          ))}
        </ul>
      </div>
    </div>
  );
}
