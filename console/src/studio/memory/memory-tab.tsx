/**
 * Studio's Memory tab: the agent server's long-term store (`client.store`). Namespaces are browsed
 * one level at a time (`listNamespaces` with the open prefix and `maxDepth` one deeper); the items
 * under the open prefix are searched with a filter on value fields and a text query (semantic
 * search when the project has `store.index`; a server without one refuses a query, and the tab says
 * so and shows the items without it), a page at a time; an item opens beside the list.
 */
import type { SearchItem } from '@langchain/langgraph-sdk';
import { useQuery } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { ErrorNote, TableHead, Time } from '../../components/ui';
import { Button, inputClass } from '../../components/controls';
import { useStudio } from '../context';
import { describeError, refusesQuery } from './errors';
import { ItemPanel, NewItemDialog } from './item-panel';
import { JsonField, parseJsonObject, type JsonObject } from './json-field';
import { dotted, storeKey, type ItemRef } from './store';

/** Items per page. */
const PAGE = 20;
/** Namespaces shown per level before "show more". */
const NAMESPACES = 50;

interface Search {
  query: string;
  filter?: JsonObject | undefined;
}

export function MemoryTab() {
  const [prefix, setPrefix] = useState<string[]>([]);
  const [search, setSearch] = useState<Search>({ query: '' });
  const [page, setPage] = useState(0);
  const [open, setOpen] = useState<ItemRef>();
  const [creating, setCreating] = useState(false);

  const drill = (next: string[]) => {
    setPrefix(next);
    setPage(0);
  };
  return (
    <div className={`grid gap-6 ${open ? 'lg:grid-cols-[14rem_minmax(0,1fr)_minmax(0,24rem)]' : 'lg:grid-cols-[14rem_minmax(0,1fr)]'}`}>
      <Namespaces prefix={prefix} onDrill={drill} />
      <div className="min-w-0 space-y-4">
        <SearchForm
          onSearch={(next) => {
            setSearch(next);
            setPage(0);
          }}
        />
        <Items prefix={prefix} search={search} page={page} onPage={setPage} open={open} onOpen={setOpen} />
        <Button onClick={() => setCreating(true)}>New item</Button>
        <NewItemDialog open={creating} namespace={prefix} onClose={() => setCreating(false)} onCreated={setOpen} />
      </div>
      {open ? <ItemPanel key={`${dotted(open.namespace)}/${open.key}`} item={open} onClose={() => setOpen(undefined)} /> : null}
    </div>
  );
}

/** The open prefix as a path to click back along, and the namespaces one level below it. */
function Namespaces({ prefix, onDrill }: { prefix: string[]; onDrill: (prefix: string[]) => void }) {
  const { client, target } = useStudio();
  const [shown, setShown] = useState(NAMESPACES);
  const children = useQuery({
    queryKey: [...storeKey(target.key), 'namespaces', prefix, shown],
    // One more than shown: whether there are more. Namespaces are cut to one level below the prefix.
    queryFn: ({ signal }) => client.store.listNamespaces({ ...(prefix.length ? { prefix } : {}), maxDepth: prefix.length + 1, limit: shown + 1, signal }),
  });
  const below = children.data?.namespaces.filter((ns) => ns.length > prefix.length) ?? [];
  const drill = (next: string[]) => {
    setShown(NAMESPACES);
    onDrill(next);
  };
  return (
    <nav aria-label="Namespaces" className="space-y-2 text-sm">
      <h2 className="font-medium">Namespaces</h2>
      <ol className="flex flex-wrap items-center gap-1" aria-label="Open namespace">
        <li>
          <button type="button" className={crumb} aria-current={prefix.length === 0 ? 'location' : undefined} onClick={() => drill([])}>
            All
          </button>
        </li>
        {prefix.map((label, i) => (
          <li key={i} className="flex items-center gap-1">
            <span aria-hidden="true">/</span>
            <button
              type="button"
              className={crumb}
              aria-current={i === prefix.length - 1 ? 'location' : undefined}
              onClick={() => drill(prefix.slice(0, i + 1))}
            >
              {label}
            </button>
          </li>
        ))}
      </ol>
      {children.error ? <ErrorNote error={describeError(children.error)} /> : null}
      {children.data && below.length === 0 ? <p className="text-slate-700 dark:text-slate-300">No namespaces below this one.</p> : null}
      <ul className="space-y-0.5" data-testid="namespaces">
        {below.slice(0, shown).map((ns) => (
          <li key={dotted(ns)}>
            <button
              type="button"
              data-namespace={dotted(ns)}
              onClick={() => drill(ns)}
              className="w-full truncate rounded px-2 py-1 text-left font-mono text-xs hover:bg-slate-200 dark:hover:bg-slate-800"
            >
              {ns.at(-1)}
              <span className="sr-only"> (open namespace {dotted(ns)})</span>
            </button>
          </li>
        ))}
      </ul>
      {(children.data?.namespaces.length ?? 0) > shown ? (
        <Button className="px-2 py-0.5 text-xs" onClick={() => setShown(shown + NAMESPACES)}>
          Show more namespaces
        </Button>
      ) : null}
    </nav>
  );
}

const crumb = 'rounded px-1 font-mono text-xs underline hover:no-underline aria-[current]:font-semibold aria-[current]:no-underline';

/** A text query and a filter on value fields; submitted together. */
function SearchForm({ onSearch }: { onSearch: (search: Search) => void }) {
  const [query, setQuery] = useState('');
  const [filter, setFilter] = useState('');
  const parsed = parseJsonObject(filter, {});
  const queryId = useId();
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (parsed.problem !== undefined) return;
    onSearch({ query: query.trim(), filter: Object.keys(parsed.value).length ? parsed.value : undefined });
  };
  return (
    <form role="search" aria-label="Search the store" onSubmit={submit} className="grid gap-3 md:grid-cols-[1fr_1fr_auto] md:items-start">
      <div className="space-y-1">
        <label htmlFor={queryId} className="block text-sm font-medium">
          Text query
        </label>
        <input id={queryId} type="search" value={query} onChange={(e) => setQuery(e.target.value)} className={`${inputClass} w-full`} />
      </div>
      <JsonField
        label="Filter on value fields"
        rows={1}
        text={filter}
        onText={setFilter}
        problem={parsed.problem}
        hint={'{"field": value} or {"field": {"$gt": n}}'}
      />
      <Button type="submit" tone="primary" className="md:mt-6" disabled={parsed.problem !== undefined}>
        Search
      </Button>
    </form>
  );
}

interface Found {
  items: SearchItem[];
  /** Set when the server refused the text query: why (it has no semantic search). */
  refused?: string;
}

function Items({
  prefix,
  search,
  page,
  onPage,
  open,
  onOpen,
}: {
  prefix: string[];
  search: Search;
  page: number;
  onPage: (page: number) => void;
  open: ItemRef | undefined;
  onOpen: (item: ItemRef) => void;
}) {
  const { client, target } = useStudio();
  const found = useQuery({
    queryKey: [...storeKey(target.key), 'items', prefix, search, page],
    queryFn: async ({ signal }): Promise<Found> => {
      // One more than a page: whether there is a next one.
      const options = { ...(search.filter ? { filter: search.filter } : {}), limit: PAGE + 1, offset: page * PAGE, signal };
      if (!search.query) return client.store.searchItems(prefix, options);
      try {
        return await client.store.searchItems(prefix, { ...options, query: search.query });
      } catch (error) {
        if (!refusesQuery(error)) throw error;
        return { ...(await client.store.searchItems(prefix, options)), refused: describeError(error) };
      }
    },
  });
  const where = prefix.length ? `under ${dotted(prefix)}` : 'in the store';
  const scored = Boolean(search.query) && !found.data?.refused;
  const items = found.data?.items.slice(0, PAGE) ?? [];
  return (
    <section aria-label="Items" className="space-y-2">
      {found.data?.refused ? (
        <p role="note" className="rounded-md bg-amber-50 p-3 text-sm text-amber-900 dark:bg-amber-950 dark:text-amber-200">
          This agent server has no semantic search, so the text query was not applied: the items below match the namespace and filter only. (It said:{' '}
          {found.data.refused})
        </p>
      ) : null}
      {found.error ? <ErrorNote error={describeError(found.error)} /> : null}
      {!found.data && !found.error ? <p>Loading the items…</p> : null}
      {found.data && items.length === 0 ? <p>No items {where} match.</p> : null}
      {items.length ? (
        <table className="w-full border-collapse text-left text-sm">
          <caption className="sr-only">
            Items {where}
            {scored ? ', most similar to the query first' : ', most recently updated first'}
          </caption>
          <TableHead columns={['Key', 'Namespace', 'Updated', ...(scored ? ['Score'] : [])]} />
          <tbody>
            {items.map((item) => (
              <ItemRow key={`${dotted(item.namespace)}/${item.key}`} item={item} scored={scored} open={open} onOpen={onOpen} />
            ))}
          </tbody>
        </table>
      ) : null}
      {page > 0 || (found.data?.items.length ?? 0) > PAGE ? (
        <div className="flex items-center gap-2 text-sm">
          <Button disabled={page === 0} onClick={() => onPage(page - 1)}>
            Previous page
          </Button>
          <span>Page {page + 1}</span>
          <Button disabled={(found.data?.items.length ?? 0) <= PAGE} onClick={() => onPage(page + 1)}>
            Next page
          </Button>
        </div>
      ) : null}
    </section>
  );
}

function ItemRow({ item, scored, open, onOpen }: { item: SearchItem; scored: boolean; open: ItemRef | undefined; onOpen: (item: ItemRef) => void }) {
  const current = open !== undefined && open.key === item.key && dotted(open.namespace) === dotted(item.namespace);
  return (
    <tr
      data-item={`${dotted(item.namespace)}/${item.key}`}
      aria-current={current ? 'true' : undefined}
      className="border-b border-slate-200 align-top aria-[current]:bg-slate-100 dark:border-slate-800 dark:aria-[current]:bg-slate-900"
    >
      <th scope="row" className="py-2 pr-4 font-normal">
        <button
          type="button"
          onClick={() => onOpen({ namespace: item.namespace, key: item.key })}
          className="rounded text-left font-mono text-xs break-all text-blue-700 underline hover:no-underline dark:text-blue-300"
        >
          {item.key}
        </button>
      </th>
      <td className="py-2 pr-4 font-mono text-xs break-all">{dotted(item.namespace)}</td>
      <td className="py-2 pr-4 whitespace-nowrap">
        <Time iso={item.updatedAt} />
      </td>
      {scored ? <td className="py-2 font-mono text-xs">{item.score == null ? '—' : item.score.toFixed(3)}</td> : null}
    </tr>
  );
}
