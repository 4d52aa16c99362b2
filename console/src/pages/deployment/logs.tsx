/**
 * A revision's build log or server (deploy) log in a virtualized list, so that 100,000 lines scroll
 * smoothly. Without an end time it opens at its newest lines and is followed live:
 * `GET …/revisions/{revision_id}/logs?follow=true&tail=1000` as server-sent events (an EventSource on
 * this origin: the session cookie goes with it, and it resumes after a dropped connection with
 * Last-Event-ID, which the server prefers to the tail) until the log ends; scrolling to the top reads
 * the lines before the oldest shown (`before=<its id>`), prepended with the viewport kept where it
 * was. With an end time it is read in pages of JSON (`offset` = the previous page's `next_offset`).
 * `since` narrows both; going back an hour moves `since` back.
 */
import { useInfiniteQuery } from '@tanstack/react-query';
import { useVirtualizer } from '@tanstack/react-virtual';
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from 'react';
import { call } from '../../api';
import { ErrorNote } from '../../components/ui';
import { Button, inputClass } from '../../components/controls';
import { deploymentPath, type LogEntry, type LogPage, type LogType } from './types';

const PAGE = 1000;
const ROW_HEIGHT = 20;
const HOUR = 3_600_000;

export interface LogRange {
  since?: string | undefined;
  until?: string | undefined;
}

type StreamState = 'connecting' | 'live' | 'ended' | 'closed';

/** The entries of a followed log as they arrive (batched per animation frame), and the stream's state. */
function useFollowedLog(url: string | null): { entries: LogEntry[]; state: StreamState } {
  const [entries, setEntries] = useState<LogEntry[]>([]);
  const [state, setState] = useState<StreamState>('connecting');
  useEffect(() => {
    setEntries([]);
    if (!url) return;
    setState('connecting');
    const source = new EventSource(url);
    let pending: LogEntry[] = [];
    let frame = 0;
    let lastId = 0;
    const flush = () => {
      frame = 0;
      const batch = pending;
      pending = [];
      setEntries((current) => current.concat(batch));
    };
    source.addEventListener('open', () => setState('live'));
    source.addEventListener('log', (event) => {
      const entry = JSON.parse((event as MessageEvent<string>).data) as LogEntry;
      // A resumed stream starts after Last-Event-ID; this guards the list against a repeat anyway.
      if (entry.id <= lastId) return;
      lastId = entry.id;
      pending.push(entry);
      frame ||= requestAnimationFrame(flush);
    });
    // The log ended: the server closes the stream, which must not be reopened.
    source.addEventListener('end', () => {
      source.close();
      setState('ended');
    });
    source.addEventListener('error', () => {
      if (source.readyState === EventSource.CLOSED) setState('closed');
      else setState('connecting');
    });
    return () => {
      source.close();
      if (frame) cancelAnimationFrame(frame);
    };
  }, [url]);
  return { entries, state };
}

type OlderState = 'more' | 'loading' | 'first';

/**
 * The lines before a followed log's oldest one, read a page at a time on demand (`before=<id>`),
 * oldest first; 'first' once a page came back short (the log's first line is shown).
 */
function useOlderLines(url: (before: number) => string, resetKey: string | null) {
  const [entries, setEntries] = useState<LogEntry[]>([]);
  const [state, setState] = useState<OlderState>('more');
  const [error, setError] = useState<unknown>(null);
  const busy = useRef(false);
  // The newest way to make the URL (it closes over the current range), without re-making `load`.
  const urlOf = useRef(url);
  urlOf.current = url;
  useEffect(() => {
    setEntries([]);
    setState('more');
    setError(null);
  }, [resetKey]);
  const load = useCallback(
    async (oldestId: number | undefined) => {
      if (oldestId === undefined || busy.current || state === 'first') return;
      busy.current = true;
      setState('loading');
      try {
        const page = await call<LogPage>(urlOf.current(oldestId));
        setEntries((current) => page.logs.concat(current));
        setState(page.logs.length < PAGE ? 'first' : 'more');
        setError(null);
      } catch (failure) {
        setError(failure);
        setState('more');
      } finally {
        busy.current = false;
      }
    },
    [state],
  );
  return { entries, state, error, load };
}

const stateWords: Record<StreamState, string> = {
  connecting: 'Connecting…',
  live: 'Live: new lines appear as they are written',
  ended: 'The log has ended',
  closed: 'The stream was refused or closed',
};

const levelClass: Record<string, string> = {
  error: 'text-red-800 dark:text-red-300',
  warn: 'text-amber-800 dark:text-amber-300',
};

function LogLines({ entries, label, follow, onTop }: { entries: LogEntry[]; label: string; follow: boolean; onTop?: () => void }) {
  const scroller = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);
  const firstId = useRef<number | undefined>(undefined);
  const virtualizer = useVirtualizer({ count: entries.length, getScrollElement: () => scroller.current, estimateSize: () => ROW_HEIGHT, overscan: 30 });
  // Lines put before the first one shown (older ones read on scrolling up): the same lines stay in
  // view, moved down by as many rows (rows are all ROW_HEIGHT high).
  useLayoutEffect(() => {
    const previous = firstId.current;
    firstId.current = entries[0]?.id;
    if (previous === undefined || entries[0]?.id === previous || !scroller.current) return;
    const moved = entries.findIndex((entry) => entry.id === previous);
    if (moved > 0) scroller.current.scrollTop += moved * ROW_HEIGHT;
  }, [entries]);
  // Stay at the newest line while following, unless the reader scrolled up.
  useLayoutEffect(() => {
    if (follow && atBottom.current && entries.length) virtualizer.scrollToIndex(entries.length - 1, { align: 'end' });
  }, [entries.length, follow, virtualizer]);
  return (
    <div
      ref={scroller}
      role="log"
      aria-live="off"
      aria-label={label}
      tabIndex={0}
      data-testid="log-lines"
      data-lines={entries.length}
      onScroll={(event) => {
        const el = event.currentTarget;
        atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < ROW_HEIGHT * 2;
        if (onTop && el.scrollTop < ROW_HEIGHT * 5) onTop();
      }}
      className="h-96 overflow-auto rounded-md border border-slate-300 bg-white font-mono text-xs focus-visible:outline-2 focus-visible:outline-blue-600 dark:border-slate-700 dark:bg-slate-900"
    >
      {entries.length === 0 ? <p className="p-3 font-sans text-sm text-slate-700 dark:text-slate-300">No lines yet.</p> : null}
      <div style={{ height: virtualizer.getTotalSize(), position: 'relative' }}>
        {virtualizer.getVirtualItems().map((item) => {
          const entry = entries[item.index]!;
          return (
            <div
              key={entry.id}
              data-line={entry.id}
              className={`absolute left-0 flex w-max min-w-full gap-3 px-3 whitespace-pre ${levelClass[entry.level] ?? ''}`}
              style={{ top: item.start, height: ROW_HEIGHT, lineHeight: `${ROW_HEIGHT}px` }}
            >
              <time dateTime={entry.timestamp} className="text-slate-700 dark:text-slate-300">
                {new Date(entry.timestamp).toLocaleTimeString()}
              </time>
              <span>{entry.message}</span>
            </div>
          );
        })}
      </div>
    </div>
  );
}

/** `datetime-local` text (local time, to the minute) of an ISO time, and back. */
function localInput(iso: string | undefined): string {
  if (!iso) return '';
  const date = new Date(iso);
  return new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}
const isoOf = (local: string) => (local ? new Date(local).toISOString() : undefined);

function RangeForm({ range, onRange }: { range: LogRange; onRange: (range: LogRange) => void }) {
  const [since, setSince] = useState(localInput(range.since));
  const [until, setUntil] = useState(localInput(range.until));
  useEffect(() => {
    setSince(localInput(range.since));
    setUntil(localInput(range.until));
  }, [range.since, range.until]);
  return (
    <form
      className="flex flex-wrap items-end gap-3 text-sm"
      onSubmit={(event) => {
        event.preventDefault();
        onRange({ since: isoOf(since), until: isoOf(until) });
      }}
    >
      <label className="flex flex-col gap-1">
        Since
        <input type="datetime-local" value={since} onChange={(e) => setSince(e.target.value)} className={inputClass} />
      </label>
      <label className="flex flex-col gap-1">
        Until (empty: follow live)
        <input type="datetime-local" value={until} onChange={(e) => setUntil(e.target.value)} className={inputClass} />
      </label>
      <Button type="submit">Show</Button>
      <Button
        onClick={() => {
          const from = range.since ? Date.parse(range.since) : Date.now();
          onRange({ since: new Date(from - HOUR).toISOString(), until: range.until });
        }}
      >
        {range.since ? 'An hour earlier' : 'The last hour only'}
      </Button>
      {range.since || range.until ? <Button onClick={() => onRange({})}>Newest lines, live</Button> : null}
    </form>
  );
}

export function RevisionLog({
  deploymentId,
  revisionId,
  type,
  range,
  onRange,
}: {
  deploymentId: string;
  revisionId: string;
  type: LogType;
  range: LogRange;
  onRange: (range: LogRange) => void;
}) {
  const base = `${deploymentPath(deploymentId)}/revisions/${encodeURIComponent(revisionId)}/logs`;
  const query = (extra: Record<string, string>) => {
    const params = new URLSearchParams({ type, ...extra });
    if (range.since) params.set('since', range.since);
    if (range.until) params.set('until', range.until);
    return `${base}?${params}`;
  };
  const follow = !range.until;
  const followUrl = follow ? query({ follow: 'true', tail: String(PAGE) }) : null;
  const followed = useFollowedLog(followUrl);
  const older = useOlderLines((before) => query({ before: String(before), limit: String(PAGE) }), followUrl);
  const pages = useInfiniteQuery({
    queryKey: ['deployment', deploymentId, 'log', revisionId, type, range.since, range.until],
    enabled: !follow,
    initialPageParam: 0,
    queryFn: ({ pageParam, signal }) => call<LogPage>(query({ limit: String(PAGE), offset: String(pageParam) }), { signal }),
    getNextPageParam: (last) => (last.logs.length === PAGE ? last.next_offset : undefined),
  });
  const followedEntries = useMemo(() => older.entries.concat(followed.entries), [older.entries, followed.entries]);
  const entries = follow ? followedEntries : (pages.data?.pages.flatMap((p) => p.logs) ?? []);
  const loadOlder = () => void older.load(entries[0]?.id);
  const label = `${type === 'build' ? 'Build log' : 'Server log'} of revision ${revisionId.slice(0, 8)}`;
  return (
    <div className="space-y-3">
      <RangeForm range={range} onRange={onRange} />
      <p className="text-sm text-slate-700 dark:text-slate-300" data-testid="log-state">
        {follow ? stateWords[followed.state] : `${entries.length} lines${pages.hasNextPage ? ' (more to read)' : ''}`}
      </p>
      {pages.error ? <ErrorNote error={pages.error} /> : null}
      {follow && older.error ? <ErrorNote error={older.error} /> : null}
      {follow && entries.length ? (
        <p className="flex items-center gap-3 text-sm text-slate-700 dark:text-slate-300" data-testid="log-older">
          {older.state === 'first' ? (
            'From the first line of the log'
          ) : (
            <>
              Newest lines first: scroll up for older ones
              <Button disabled={older.state === 'loading'} onClick={loadOlder}>
                {older.state === 'loading' ? 'Reading older lines…' : 'Older lines'}
              </Button>
            </>
          )}
        </p>
      ) : null}
      <LogLines entries={entries} label={label} follow={follow} {...(follow ? { onTop: loadOlder } : {})} />
      {!follow && pages.hasNextPage ? (
        <Button disabled={pages.isFetchingNextPage} onClick={() => void pages.fetchNextPage()}>
          Read the next {PAGE} lines
        </Button>
      ) : null}
    </div>
  );
}
