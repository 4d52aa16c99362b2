/**
 * Studio's Threads tab: the agent server's threads, newest first, a page at a time, searched by
 * status and by a metadata key and value; "New thread"; the thread chosen as a chat beside its state
 * (thread-view.tsx).
 */
import type { Metadata, Thread, ThreadStatus } from '@langchain/langgraph-sdk';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { Badge, ErrorNote, Time, type Tone } from '../../components/ui';
import { useStudio } from '../context';
import { useAssistants } from '../graphs';
import { buttonClass, inputClass, secondaryButtonClass } from './styles';
import { ThreadView } from './thread-view';

/** Threads a page. */
const PAGE = 20;
const STATUSES: ThreadStatus[] = ['idle', 'busy', 'interrupted', 'error'];
const STATUS_TONES: Record<ThreadStatus, Tone> = { idle: 'none', busy: 'busy', interrupted: 'warn', error: 'bad' };

interface Search {
  status?: ThreadStatus;
  metadata?: Metadata;
}

/** A metadata value as typed: JSON when it is (`3`, `true`, `"x"`), else the text. */
function metadataValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export function ThreadsTab() {
  const { client, target } = useStudio();
  const queries = useQueryClient();
  const [search, setSearch] = useState<Search>({});
  const [page, setPage] = useState(0);
  const [selected, setSelected] = useState<string>();
  const [creating, setCreating] = useState<unknown>();
  const assistants = useAssistants();
  const threads = useQuery({
    queryKey: ['studio', target.key, 'threads', search, page],
    // One more than a page: whether there is a next page.
    queryFn: ({ signal }) => client.threads.search({ ...search, limit: PAGE + 1, offset: page * PAGE, sortBy: 'created_at', sortOrder: 'desc', signal }),
  });
  const thread = threads.data?.find((t) => t.thread_id === selected);
  // The chosen thread's graph's own assistant (the agent server makes one per graph), else the first.
  const graphId = typeof thread?.metadata?.graph_id === 'string' ? thread.metadata.graph_id : undefined;
  const assistantId = (
    assistants.data?.find((a) => a.graph_id === graphId && a.metadata?.created_by === 'system') ??
    assistants.data?.find((a) => a.metadata?.created_by === 'system') ??
    assistants.data?.[0]
  )?.assistant_id;

  const create = async () => {
    try {
      const made = await client.threads.create();
      setCreating(undefined);
      setSearch({});
      setPage(0);
      await queries.invalidateQueries({ queryKey: ['studio', target.key, 'threads'] });
      setSelected(made.thread_id);
    } catch (error) {
      setCreating(error);
    }
  };

  return (
    <div className="grid gap-4 lg:grid-cols-[18rem_1fr]">
      <nav aria-label="Threads" className="min-w-0 space-y-3">
        <button type="button" onClick={() => void create()} className={buttonClass}>
          New thread
        </button>
        {creating ? <ErrorNote error={creating} /> : null}
        <SearchForm
          onSearch={(next) => {
            setSearch(next);
            setPage(0);
          }}
        />
        {threads.error ? <ErrorNote error={threads.error} /> : null}
        {threads.data === undefined ? (
          <p className="text-sm">Loading the threads…</p>
        ) : (
          <ThreadList threads={threads.data.slice(0, PAGE)} selected={selected} onSelect={setSelected} />
        )}
        <div className="flex items-center gap-2 text-sm">
          <button type="button" disabled={page === 0} onClick={() => setPage(page - 1)} className={secondaryButtonClass}>
            Newer
          </button>
          <span>Page {page + 1}</span>
          <button type="button" disabled={(threads.data?.length ?? 0) <= PAGE} onClick={() => setPage(page + 1)} className={secondaryButtonClass}>
            Older
          </button>
        </div>
      </nav>
      <div className="min-w-0">
        {assistants.error ? <ErrorNote error={assistants.error} /> : null}
        {selected === undefined ? (
          <p className="text-sm text-slate-700 dark:text-slate-300">Choose a thread, or start a new one.</p>
        ) : (
          <>
            <h2 className="mb-3 font-mono text-sm" data-testid="thread-id">
              thread {selected}
            </h2>
            <ThreadView key={selected} threadId={selected} assistants={assistants.data ?? []} assistantId={assistantId} />
          </>
        )}
      </div>
    </div>
  );
}

function SearchForm({ onSearch }: { onSearch: (search: Search) => void }) {
  const [status, setStatus] = useState('');
  const [key, setKey] = useState('');
  const [value, setValue] = useState('');
  const ids = { status: useId(), key: useId(), value: useId() };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    onSearch({
      ...(status ? { status: status as ThreadStatus } : {}),
      ...(key.trim() ? { metadata: { [key.trim()]: metadataValue(value) } } : {}),
    });
  };
  return (
    <form onSubmit={submit} aria-label="Search threads" className="grid grid-cols-[auto_1fr] items-center gap-2 text-sm">
      <label htmlFor={ids.status}>Status</label>
      <select id={ids.status} name="thread-status" value={status} onChange={(e) => setStatus(e.target.value)} className={inputClass}>
        <option value="">any</option>
        {STATUSES.map((s) => (
          <option key={s} value={s}>
            {s}
          </option>
        ))}
      </select>
      <label htmlFor={ids.key}>Metadata key</label>
      <input id={ids.key} name="metadata-key" value={key} onChange={(e) => setKey(e.target.value)} className={`min-w-0 ${inputClass}`} />
      <label htmlFor={ids.value}>Value</label>
      <input id={ids.value} name="metadata-value" value={value} onChange={(e) => setValue(e.target.value)} className={`min-w-0 ${inputClass}`} />
      <span />
      <button type="submit" className={`justify-self-start ${secondaryButtonClass}`}>
        Search
      </button>
    </form>
  );
}

function ThreadList({ threads, selected, onSelect }: { threads: Thread[]; selected: string | undefined; onSelect: (id: string) => void }) {
  if (threads.length === 0) return <p className="text-sm text-slate-700 dark:text-slate-300">No threads.</p>;
  return (
    <ul className="space-y-1" aria-label="Thread list">
      {threads.map((t) => (
        <li key={t.thread_id}>
          <button
            type="button"
            data-thread={t.thread_id}
            data-status={t.status}
            aria-current={t.thread_id === selected ? 'true' : undefined}
            onClick={() => onSelect(t.thread_id)}
            className={`w-full rounded-md border px-2 py-1.5 text-left text-sm ${t.thread_id === selected ? 'border-slate-900 dark:border-slate-100' : 'border-slate-300 dark:border-slate-700'}`}
          >
            <span className="flex items-center gap-2">
              <span className="font-mono text-xs">{t.thread_id.slice(0, 8)}</span>
              <Badge tone={STATUS_TONES[t.status] ?? 'none'}>{t.status}</Badge>
            </span>
            <span className="block text-xs text-slate-700 dark:text-slate-300">
              {typeof t.metadata?.graph_id === 'string' ? `${t.metadata.graph_id} · ` : ''}
              <Time iso={t.created_at} />
            </span>
          </button>
        </li>
      ))}
    </ul>
  );
}
