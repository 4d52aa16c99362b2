/**
 * Time travel: a thread's checkpoints as a timeline (`threads.getHistory`, a page at a time, the
 * older pages on request), forks shown as branches side by side under the checkpoint they left
 * from, the current branch (the one the thread's head is on) marked. Any checkpoint opens to its
 * state, where it can be edited or re-run from (history-checkpoint.tsx): both make a new branch,
 * which becomes the thread's head, and the open checkpoint follows it.
 */
import type { Config, ThreadState } from '@langchain/langgraph-sdk';
import { useInfiniteQuery } from '@tanstack/react-query';
import { useEffect, useId, useMemo, useRef, useState } from 'react';
import { Button } from '../../components/controls';
import { Badge, ErrorNote, Time } from '../../components/ui';
import { useStudio } from '../context';
import { describeError } from '../memory/errors';
import { CheckpointPanel } from './history-checkpoint';
import { buildTimeline, chainFrom, checkpointId, writtenBy, type Timeline } from './history-tree';
import { threadKeys, type RunRequest } from './use-run-stream';

/** Checkpoints a page. */
const PAGE = 50;

/** The history's query key: under the state's, so whatever refreshes the thread's state (a run's end, an answer) refreshes it too. */
const historyKey = (key: string, threadId: string) => [...threadKeys(key, threadId).state, 'history'];

export function History({
  threadId,
  assistantId,
  busy,
  onRun,
}: {
  threadId: string;
  /** The assistant a re-run uses when the checkpoint does not name the one that wrote it. */
  assistantId: string | undefined;
  /** A run of the thread is streaming: nothing can fork the thread meanwhile. */
  busy: boolean;
  onRun: (assistantId: string, request: RunRequest) => void;
}) {
  const [open, setOpen] = useState(false);
  const panelId = useId();
  return (
    <section aria-label="History" className="rounded-md border border-slate-300 p-3 dark:border-slate-700">
      <Button aria-expanded={open} aria-controls={panelId} onClick={() => setOpen(!open)}>
        {open ? 'Hide history' : 'History (time travel)'}
      </Button>
      <div id={panelId} hidden={!open}>
        {open ? <HistoryPanel threadId={threadId} assistantId={assistantId} busy={busy} onRun={onRun} /> : null}
      </div>
    </section>
  );
}

/** `'head'`: the open checkpoint is whatever the head is (after a re-run: the branch it made). */
type Selection = string | 'head' | undefined;

function HistoryPanel({ threadId, assistantId, busy, onRun }: Parameters<typeof History>[0]) {
  const { client, target } = useStudio();
  const history = useInfiniteQuery({
    queryKey: historyKey(target.key, threadId),
    queryFn: ({ pageParam, signal }) => client.threads.getHistory(threadId, { limit: PAGE, signal, ...(pageParam ? { before: pageParam } : {}) }),
    initialPageParam: undefined as Config | undefined,
    getNextPageParam: (last) => (last.length === PAGE ? { configurable: last.at(-1)!.checkpoint } : undefined),
  });
  const states = useMemo(() => history.data?.pages.flat() ?? [], [history.data]);
  const timeline = useMemo(() => buildTimeline(states), [states]);
  const [selection, setSelection] = useState<Selection>();
  // A re-run was started here: once it has run (the history is read again as it ends), its branch opens.
  const [follow, setFollow] = useState<'asked' | 'running'>();
  useEffect(() => {
    if (follow === 'asked' && busy) setFollow('running');
    if (follow === 'running' && !busy) {
      setFollow(undefined);
      setSelection('head');
    }
  }, [busy, follow]);
  const selected = timeline.byId.get(selection === 'head' ? (timeline.head ?? '') : (selection ?? ''));

  return (
    <div className="mt-3 grid gap-4 lg:grid-cols-2">
      <div className="min-w-0 space-y-2">
        <h3 className="text-sm font-semibold">Checkpoints{states.length > 0 ? ` · ${states.length}${history.hasNextPage ? '+' : ''}` : ''}</h3>
        {history.error ? <ErrorNote error={describeError(history.error)} /> : null}
        {history.hasNextPage ? (
          <Button className="text-xs" disabled={history.isFetchingNextPage} onClick={() => void history.fetchNextPage()}>
            Load earlier checkpoints
          </Button>
        ) : null}
        {history.data === undefined ? (
          <p className="text-sm">Loading the history…</p>
        ) : states.length === 0 ? (
          <p className="text-sm text-slate-700 dark:text-slate-300">No checkpoints yet: run the thread first.</p>
        ) : (
          <ol aria-label="Timeline" className="max-h-[32rem] space-y-1 overflow-y-auto pr-1 text-sm">
            {timeline.roots.map((root) => (
              <Chain key={root} timeline={timeline} start={root} selected={selected && checkpointId(selected)} onOpen={setSelection} />
            ))}
          </ol>
        )}
      </div>
      <div className="min-w-0">
        {selected ? (
          <CheckpointPanel
            key={checkpointId(selected)}
            threadId={threadId}
            state={selected}
            isHead={checkpointId(selected) === timeline.head}
            timeline={timeline}
            assistantId={typeof selected.metadata?.assistant_id === 'string' ? selected.metadata.assistant_id : assistantId}
            busy={busy}
            onRun={onRun}
            onForked={(id) => (id ? setSelection(id) : setFollow('asked'))}
            onClose={() => setSelection(undefined)}
          />
        ) : (
          <p className="text-sm text-slate-700 dark:text-slate-300">Open a checkpoint to see the state at that point, edit it or re-run from it.</p>
        )}
      </div>
    </div>
  );
}

/** A line of checkpoints (as `<li>`s of the list it is in), then the branches of the fork that ends it, if any. */
function Chain({ timeline, start, selected, onOpen }: { timeline: Timeline; start: string; selected: string | undefined; onOpen: (id: string) => void }) {
  const { chain, forks } = chainFrom(timeline, start);
  const from = timeline.byId.get(chain.at(-1)!)!;
  return (
    <>
      {chain.map((id) => (
        <CheckpointRow key={id} timeline={timeline} state={timeline.byId.get(id)!} selected={selected === id} onOpen={onOpen} />
      ))}
      {forks.length > 0 ? (
        <li data-fork={checkpointId(from)}>
          <p className="py-1 text-xs font-medium text-slate-700 dark:text-slate-300">
            {forks.length} branches from step {String(from.metadata?.step ?? '?')}
          </p>
          <ol className="space-y-2">
            {forks.map((child, i) => {
              const current = timeline.current.has(child);
              return (
                <li
                  key={child}
                  data-branch={child}
                  data-current={current || undefined}
                  className={`border-l-4 pl-3 ${current ? 'border-blue-700 dark:border-blue-300' : 'border-slate-300 dark:border-slate-600'}`}
                >
                  <p className="pb-1 text-xs font-semibold">
                    Branch {i + 1} of {forks.length}
                    {current ? (
                      <>
                        {' '}
                        <Badge tone="busy">current</Badge>
                      </>
                    ) : null}
                  </p>
                  <ol className="space-y-1">
                    <Chain timeline={timeline} start={child} selected={selected} onOpen={onOpen} />
                  </ol>
                </li>
              );
            })}
          </ol>
        </li>
      ) : null}
    </>
  );
}

function CheckpointRow({ timeline, state, selected, onOpen }: { timeline: Timeline; state: ThreadState; selected: boolean; onOpen: (id: string) => void }) {
  const id = checkpointId(state);
  const step = String(state.metadata?.step ?? '?');
  const head = id === timeline.head;
  const source = String(state.metadata?.source ?? '');
  const ref = useRef<HTMLLIElement>(null);
  // The open checkpoint is in view: after a fork it is the new head, maybe below the fold of the timeline.
  useEffect(() => {
    if (selected) ref.current?.scrollIntoView({ block: 'nearest' });
  }, [selected]);
  return (
    <li ref={ref} data-checkpoint={id} data-step={step} data-source={source} data-head={head || undefined}>
      <button
        type="button"
        aria-pressed={selected}
        onClick={() => onOpen(id)}
        className={`w-full rounded-md border px-2 py-1 text-left ${selected ? 'border-slate-900 dark:border-slate-100' : 'border-slate-300 dark:border-slate-700'} hover:bg-slate-100 dark:hover:bg-slate-800`}
      >
        <span className="flex flex-wrap items-center gap-2">
          <span className="font-mono text-xs">step {step}</span>
          <span>{writtenBy(timeline, state)}</span>
          {head ? <Badge tone="good">head</Badge> : null}
          {source === 'update' || source === 'fork' ? <Badge tone="warn">{source}</Badge> : null}
        </span>
        <span className="block text-xs text-slate-700 dark:text-slate-300">
          {state.next.length > 0 ? `next: ${state.next.join(', ')}` : 'ended'}
          {state.created_at ? (
            <>
              {' · '}
              <Time iso={state.created_at} />
            </>
          ) : null}
          {' · '}
          <span className="font-mono">{id.slice(-8)}</span>
        </span>
      </button>
    </li>
  );
}
