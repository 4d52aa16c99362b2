/**
 * A tracing project's runs (`/traces/{project_id}`): a virtualized table (only the rows in view
 * are in the DOM, so 100,000 runs scroll smoothly), paged with the runs query's keyset cursor
 * (`POST /runs/query`; the next page is asked for as the end comes near). Root runs by default,
 * all runs on request; the filter, that choice and the columns are search params
 * (`?filter=eq(thread_id, "…")&all=true&cols=name,status`), and only the chosen columns' fields
 * are asked of the API. A row opens its trace (`/traces/{project_id}/{trace_id}`): click, or
 * arrow keys to move and Enter.
 */
import { keepPreviousData, useInfiniteQuery, useQuery } from '@tanstack/react-query';
import { createRoute, Link } from '@tanstack/react-router';
import { call } from '../../api';
import { ErrorNote, PageTitle } from '../../components/ui';
import { authedRoute } from '../../routes/root';
import { COLUMN_KEYS, COLUMNS, columnsOf, DEFAULT_COLUMNS, selectOf, type ColumnKey } from './columns';
import type { Project, RunPage } from './data';
import { FilterBox } from './filter';
import { RunsTable } from './runs-table';

/** Runs per page (the API's most). */
const PAGE_SIZE = 100;

/** A short hash of a text (FNV-1a), for an id. */
function hash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(36);
}

interface RunsSearch {
  filter?: string;
  /** All runs, not only the root runs. */
  all?: boolean;
  /** The chosen columns, comma-separated; the default set when absent. */
  cols?: string;
}

function ColumnChooser({ chosen }: { chosen: ColumnKey[] }) {
  const navigate = runsRoute.useNavigate();
  const toggle = (key: ColumnKey, on: boolean) => {
    const next = COLUMN_KEYS.filter((k) => (k === key ? on : chosen.includes(k)));
    const same = next.length === DEFAULT_COLUMNS.length && next.every((k) => DEFAULT_COLUMNS.includes(k));
    void navigate({ search: (s) => ({ ...s, cols: same ? undefined : next.join(',') }), replace: true });
  };
  return (
    <details className="relative text-sm">
      <summary className="cursor-pointer rounded-md border border-slate-300 px-3 py-1 dark:border-slate-600">Columns ({chosen.length})</summary>
      <fieldset className="absolute z-10 mt-1 grid grid-cols-2 gap-x-4 gap-y-1 rounded-md border border-slate-300 bg-white p-3 shadow dark:border-slate-600 dark:bg-slate-900">
        <legend className="sr-only">Columns shown</legend>
        {COLUMN_KEYS.map((key) => (
          <label key={key} className="flex items-center gap-2">
            <input type="checkbox" name="column" value={key} checked={chosen.includes(key)} onChange={(event) => toggle(key, event.target.checked)} />
            {COLUMNS[key].label}
          </label>
        ))}
      </fieldset>
    </details>
  );
}

function RunsPage() {
  const { projectId } = runsRoute.useParams();
  const search = runsRoute.useSearch();
  const navigate = runsRoute.useNavigate();
  const filter = search.filter ?? '';
  const columns = columnsOf(search.cols);
  const select = selectOf(columns);

  const queryKey = ['runs', projectId, filter, search.all ?? false, select];
  const project = useQuery({ queryKey: ['project', projectId], queryFn: ({ signal }) => call<Project>(`/sessions/${projectId}`, { signal }) });
  const runs = useInfiniteQuery({
    queryKey,
    queryFn: ({ pageParam, signal }) =>
      call<RunPage>('/runs/query', {
        method: 'POST',
        body: {
          session: [projectId],
          limit: PAGE_SIZE,
          select,
          ...(search.all ? {} : { is_root: true }),
          ...(filter ? { filter } : {}),
          ...(pageParam ? { cursor: pageParam } : {}),
        },
        signal,
      }),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.cursors.next,
    placeholderData: keepPreviousData,
    // Loaded pages stay as they are: a refetch would read every page again (a thousand of them for 100,000 runs).
    staleTime: Infinity,
    refetchOnWindowFocus: false,
  });
  const rows = runs.data?.pages.flatMap((page) => page.runs) ?? [];
  const caption = `Runs of ${project.data?.name ?? 'the project'}${filter ? ` matching ${filter}` : ''}`;

  return (
    <>
      <nav aria-label="Breadcrumb" className="text-sm">
        <Link to="/traces" className="text-sky-800 underline dark:text-sky-300">
          Traces
        </Link>
      </nav>
      <PageTitle>{project.data?.name ?? 'Project'}</PageTitle>
      {project.error ? <ErrorNote error={project.error} /> : null}
      <div className="mt-4 flex flex-col gap-3">
        <FilterBox value={filter} onApply={(text) => void navigate({ search: (s) => ({ ...s, filter: text || undefined }) })} />
        <div className="flex flex-wrap items-center gap-4 text-sm">
          <label className="flex items-center gap-2">
            <input
              type="checkbox"
              checked={search.all ?? false}
              onChange={(event) => void navigate({ search: (s) => ({ ...s, all: event.target.checked || undefined }) })}
            />
            All runs (not only root runs)
          </label>
          <ColumnChooser chosen={columns} />
          <p className="ml-auto text-slate-700 dark:text-slate-300" aria-live="polite" data-testid="loaded">
            {runs.isPending ? 'Loading…' : `${rows.length.toLocaleString('en-US')} runs loaded${runs.hasNextPage ? ', more below' : ''}`}
          </p>
        </div>
      </div>
      {runs.error ? (
        <div className="mt-3">
          <ErrorNote error={runs.error} />
        </div>
      ) : null}
      <RunsTable
        // Another query (filter, root or all runs, columns) gets a table of its own, scrolled to the top.
        key={JSON.stringify(queryKey)}
        id={`runs-${hash(JSON.stringify(queryKey))}`}
        rows={rows}
        columns={columns}
        caption={caption}
        hrefOf={(run) => `/traces/${projectId}/${run.trace_id ?? run.id}`}
        more={runs.hasNextPage && !runs.isPlaceholderData}
        fetching={runs.isFetching}
        loadMore={() => void runs.fetchNextPage()}
        empty={runs.isPending ? null : filter ? 'No run matches the filter.' : 'No runs in this project yet.'}
      />
    </>
  );
}

export const runsRoute = createRoute({
  getParentRoute: () => authedRoute,
  path: '/traces/$projectId',
  validateSearch: (search: Record<string, unknown>): RunsSearch => {
    // A filter that looks like JSON (`123`) comes back parsed: it is text all the same.
    const filter = search.filter === undefined || search.filter === null ? undefined : String(search.filter).slice(0, 10_000);
    const cols = typeof search.cols === 'string' ? columnsOf(search.cols).join(',') : undefined;
    return { ...(filter ? { filter } : {}), ...(search.all === true || search.all === 'true' ? { all: true } : {}), ...(cols !== undefined ? { cols } : {}) };
  },
  component: RunsPage,
});
