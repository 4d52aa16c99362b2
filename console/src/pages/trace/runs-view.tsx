/**
 * A trace's runs as a tree beside a waterfall, in one virtualized list (only the rows in view are
 * in the DOM, so 5,000 runs render as fast as 50): each row is a tree item (indented name, type,
 * status) and its bar, placed by start and end relative to the trace. The ARIA tree pattern: the
 * list takes focus and points at the active row (`aria-activedescendant`); Up/Down/Home/End move,
 * Right expands or goes to the first child, Left collapses or goes to the parent, Enter/Space open
 * the run's details (as a click does).
 */
import { useVirtualizer } from '@tanstack/react-virtual';
import { useEffect, useMemo, useRef, type KeyboardEvent } from 'react';
import { formatDuration } from '../../format';
import { visibleRows, type TraceNode, type TraceTree } from './tree';

const ROW_HEIGHT = 28;

export interface RunsViewProps {
  tree: TraceTree;
  collapsed: ReadonlySet<string>;
  onToggle: (id: string) => void;
  activeId: string | undefined;
  onActivate: (id: string) => void;
  openedId: string | undefined;
  onOpen: (id: string) => void;
}

const rowId = (id: string) => `run-${id}`;

const BAR_TONES: Record<string, string> = {
  llm: 'bg-violet-500',
  chat_model: 'bg-violet-500',
  tool: 'bg-amber-500',
  retriever: 'bg-teal-500',
  chain: 'bg-blue-500',
};

export function RunsView({ tree, collapsed, onToggle, activeId, onActivate, openedId, onOpen }: RunsViewProps) {
  const rows = useMemo(() => visibleRows(tree, collapsed), [tree, collapsed]);
  const indexOf = useMemo(() => new Map(rows.map((node, i) => [node.run.id, i])), [rows]);
  const scroller = useRef<HTMLDivElement>(null);
  const virtualizer = useVirtualizer({ count: rows.length, getScrollElement: () => scroller.current, estimateSize: () => ROW_HEIGHT, overscan: 10 });
  const activeIndex = activeId === undefined ? -1 : (indexOf.get(activeId) ?? -1);
  const span = Math.max(1, tree.end - tree.start);

  // The active row is always in the DOM (aria-activedescendant must point at an element).
  useEffect(() => {
    if (activeIndex >= 0) virtualizer.scrollToIndex(activeIndex, { align: 'auto' });
  }, [activeIndex, virtualizer]);

  const move = (index: number) => {
    const node = rows[Math.max(0, Math.min(rows.length - 1, index))];
    if (node) onActivate(node.run.id);
  };

  const onKeyDown = (event: KeyboardEvent) => {
    const node = rows[activeIndex];
    const expanded = node ? node.children.length > 0 && !collapsed.has(node.run.id) : false;
    switch (event.key) {
      case 'ArrowDown':
        move(activeIndex + 1);
        break;
      case 'ArrowUp':
        move(activeIndex - 1);
        break;
      case 'Home':
        move(0);
        break;
      case 'End':
        move(rows.length - 1);
        break;
      case 'PageDown':
        move(activeIndex + 10);
        break;
      case 'PageUp':
        move(activeIndex - 10);
        break;
      case 'ArrowRight':
        if (!node || node.children.length === 0) break;
        if (expanded) onActivate(node.children[0]!.run.id);
        else onToggle(node.run.id);
        break;
      case 'ArrowLeft':
        if (!node) break;
        if (expanded) onToggle(node.run.id);
        else if (node.parent) onActivate(node.parent.run.id);
        break;
      case 'Enter':
      case ' ':
        if (node) onOpen(node.run.id);
        break;
      default:
        return;
    }
    event.preventDefault();
  };

  return (
    <div className="rounded-md border border-slate-300 bg-white dark:border-slate-700 dark:bg-slate-900">
      <div aria-hidden="true" className="flex border-b border-slate-300 text-xs font-medium text-slate-700 dark:border-slate-700 dark:text-slate-300">
        <div className="w-2/5 shrink-0 px-2 py-1">Run</div>
        <div className="flex flex-1 justify-between py-1 pr-16">
          <span>0</span>
          <span>{formatDuration(span)}</span>
        </div>
      </div>
      <div
        ref={scroller}
        role="tree"
        aria-label="Runs of the trace"
        tabIndex={0}
        aria-activedescendant={activeIndex >= 0 ? rowId(rows[activeIndex]!.run.id) : undefined}
        onKeyDown={onKeyDown}
        onFocus={() => {
          if (activeIndex < 0) move(0);
        }}
        className="h-[28rem] overflow-auto outline-none focus-visible:ring-2 focus-visible:ring-blue-500"
        data-testid="runs-view"
      >
        <div className="relative w-full" style={{ height: virtualizer.getTotalSize() }}>
          {virtualizer.getVirtualItems().map((item) => {
            const node = rows[item.index]!;
            return (
              <Row
                key={node.run.id}
                node={node}
                top={item.start}
                left={(node.start - tree.start) / span}
                width={(node.end - node.start) / span}
                expanded={node.children.length > 0 ? !collapsed.has(node.run.id) : undefined}
                active={item.index === activeIndex}
                opened={node.run.id === openedId}
                onToggle={onToggle}
                onClick={() => {
                  onActivate(node.run.id);
                  onOpen(node.run.id);
                  scroller.current?.focus({ preventScroll: true });
                }}
              />
            );
          })}
        </div>
      </div>
    </div>
  );
}

interface RowProps {
  node: TraceNode;
  top: number;
  /** Start and length of the bar, as shares of the trace's span. */
  left: number;
  width: number;
  expanded: boolean | undefined;
  active: boolean;
  opened: boolean;
  onToggle: (id: string) => void;
  onClick: () => void;
}

/** Positions go through React's `style`, which sets them by the CSSOM: the page's CSP refuses only style attributes in markup. */
function Row({ node, top, left, width, expanded, active, opened, onToggle, onClick }: RowProps) {
  const { run } = node;
  const failed = run.status === 'error';
  const duration = run.end_time ? formatDuration(node.end - node.start) : 'running';
  return (
    <div
      id={rowId(run.id)}
      role="treeitem"
      aria-level={node.depth + 1}
      aria-expanded={expanded}
      aria-selected={opened}
      onClick={onClick}
      style={{ transform: `translateY(${top}px)` }}
      className={`absolute top-0 left-0 flex h-7 w-full cursor-pointer items-center text-sm ${opened ? 'bg-blue-100 dark:bg-blue-950' : 'hover:bg-slate-100 dark:hover:bg-slate-800'} ${active ? 'outline-2 -outline-offset-2 outline-blue-600 dark:outline-blue-400' : ''}`}
    >
      <div className="flex w-2/5 shrink-0 items-center gap-1 overflow-hidden pr-2" style={{ paddingLeft: node.depth * 14 + 4 }}>
        <span
          aria-hidden="true"
          className="inline-block w-4 shrink-0 text-center text-slate-600 dark:text-slate-400"
          onClick={(event) => {
            if (expanded === undefined) return;
            event.stopPropagation();
            onToggle(run.id);
          }}
        >
          {expanded === undefined ? '' : expanded ? '▾' : '▸'}
        </span>
        <span className="truncate font-medium">{run.name ?? run.id}</span>
        <span className="shrink-0 text-xs text-slate-600 dark:text-slate-400">{run.run_type}</span>
        {failed ? <span className="shrink-0 rounded bg-red-100 px-1 text-xs font-medium text-red-900 dark:bg-red-950 dark:text-red-200">error</span> : null}
      </div>
      <div className="flex h-full flex-1">
        {/* The bars' track ends where the durations' column begins, so a bar never runs under its label. */}
        <div className="relative h-full flex-1">
          <div
            aria-hidden="true"
            data-testid="bar"
            className={`absolute top-2 h-3 rounded-sm ${failed ? 'bg-red-500' : (BAR_TONES[run.run_type ?? ''] ?? 'bg-slate-500')} ${run.end_time ? '' : 'opacity-60'}`}
            style={{ left: `${(left * 100).toFixed(3)}%`, width: `max(2px, ${(width * 100).toFixed(3)}%)` }}
          />
        </div>
        <span className="w-16 shrink-0 pt-1 pr-1 text-right text-xs text-slate-700 tabular-nums dark:text-slate-300">{duration}</span>
      </div>
    </div>
  );
}
