/**
 * The runs table: only the rows in view are in the DOM (`@tanstack/react-virtual`), so 100,000
 * runs scroll smoothly; the next page is asked for as the end of those loaded comes into view.
 * One tab stop for the rows: arrow keys, Page Up/Down, Home and End move it, Enter opens the row's
 * trace (so does a click). A new query gets a new table (its own scroll position from the top).
 */
import { useVirtualizer } from '@tanstack/react-virtual';
import { useEffect, useRef, useState, type KeyboardEvent } from 'react';
import { COLUMNS, type ColumnKey } from './columns';
import type { Run } from './data';
import { PathLink, usePathNavigate } from '../../components/path-link';

const ROW_HEIGHT = 36;
/** The next page is asked for when the last row in view is this close to the end of those loaded. */
const PREFETCH_ROWS = 50;
const MOVES: Record<string, number> = { ArrowDown: 1, ArrowUp: -1, PageDown: 10, PageUp: -10, Home: -Infinity, End: Infinity };

interface RunsTableProps {
  /**
   * Names the table for the router's scroll restoration: another query's table must not get this
   * one's scroll position when the URL changes, and Back comes back to where this one was.
   */
  id: string;
  rows: Run[];
  columns: ColumnKey[];
  /** What the table holds, for screen readers. */
  caption: string;
  /** The page a row opens. */
  hrefOf: (run: Run) => string;
  /** Whether there are runs after those loaded. */
  more: boolean;
  fetching: boolean;
  loadMore: () => void;
  /** Said when there are no rows (null while loading). */
  empty: string | null;
}

export function RunsTable({ id, rows, columns, caption, hrefOf, more, fetching, loadMore, empty }: RunsTableProps) {
  const go = usePathNavigate();
  const scroller = useRef<HTMLDivElement>(null);
  const virtualizer = useVirtualizer({ count: rows.length, getScrollElement: () => scroller.current, estimateSize: () => ROW_HEIGHT, overscan: 10 });
  const items = virtualizer.getVirtualItems();
  const lastInView = items.at(-1)?.index ?? 0;
  useEffect(() => {
    if (more && !fetching && lastInView >= rows.length - PREFETCH_ROWS) loadMore();
  }, [lastInView, rows.length, more, fetching, loadMore]);

  const [active, setActive] = useState(0);
  const focusActive = useRef(false);
  useEffect(() => {
    if (!focusActive.current) return;
    focusActive.current = false;
    scroller.current?.querySelector<HTMLElement>(`tr[data-index="${active}"]`)?.focus();
  });
  const onKeyDown = (event: KeyboardEvent<HTMLTableRowElement>, index: number) => {
    if (event.key === 'Enter') {
      event.preventDefault();
      go(hrefOf(rows[index]!));
      return;
    }
    const move = MOVES[event.key];
    if (move === undefined) return;
    event.preventDefault();
    const next = Math.max(0, Math.min(rows.length - 1, index + move));
    virtualizer.scrollToIndex(next);
    focusActive.current = true;
    setActive(next);
  };
  const tabStop = Math.min(active, Math.max(0, rows.length - 1));
  const paddingTop = items[0]?.start ?? 0;
  const paddingBottom = virtualizer.getTotalSize() - (items.at(-1)?.end ?? 0);

  return (
    <div
      ref={scroller}
      data-scroll-restoration-id={id}
      className="mt-3 h-[calc(100vh-20rem)] min-h-64 overflow-auto rounded-md border border-slate-200 bg-white dark:border-slate-800 dark:bg-slate-900"
      data-testid="runs-scroller"
    >
      <table className="w-full table-fixed border-collapse text-left text-sm" aria-rowcount={rows.length + 1}>
        <caption className="sr-only">{caption}. Arrow keys move between rows, Enter opens a run's trace.</caption>
        <thead className="sticky top-0 z-[1] bg-slate-100 text-slate-700 dark:bg-slate-800 dark:text-slate-200">
          <tr aria-rowindex={1}>
            {columns.map((key) => (
              <th key={key} scope="col" className={`${COLUMNS[key].width} px-3 py-2 font-medium`}>
                {COLUMNS[key].label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {paddingTop > 0 ? (
            <tr aria-hidden="true">
              <td colSpan={columns.length} style={{ height: paddingTop }} />
            </tr>
          ) : null}
          {items.map((item) => {
            const run = rows[item.index]!;
            const href = hrefOf(run);
            return (
              <tr
                key={run.id}
                data-index={item.index}
                aria-rowindex={item.index + 2}
                tabIndex={item.index === tabStop ? 0 : -1}
                onKeyDown={(event) => onKeyDown(event, item.index)}
                onFocus={() => setActive(item.index)}
                onClick={(event) => {
                  if (!(event.target as HTMLElement).closest('a')) go(href);
                }}
                className="cursor-pointer border-b border-slate-100 hover:bg-slate-50 focus:bg-sky-50 focus:outline-2 focus:-outline-offset-2 focus:outline-sky-600 dark:border-slate-800 dark:hover:bg-slate-800 dark:focus:bg-sky-950"
                style={{ height: ROW_HEIGHT }}
              >
                {columns.map((key, c) => (
                  <td key={key} className="truncate px-3">
                    {c === 0 ? (
                      <PathLink href={href} tabIndex={-1} className="text-sky-800 underline dark:text-sky-300">
                        {COLUMNS[key].cell(run)}
                      </PathLink>
                    ) : (
                      COLUMNS[key].cell(run)
                    )}
                  </td>
                ))}
              </tr>
            );
          })}
          {paddingBottom > 0 ? (
            <tr aria-hidden="true">
              <td colSpan={columns.length} style={{ height: paddingBottom }} />
            </tr>
          ) : null}
        </tbody>
      </table>
      {rows.length === 0 && empty ? <p className="p-4 text-sm text-slate-700 dark:text-slate-300">{empty}</p> : null}
    </div>
  );
}
