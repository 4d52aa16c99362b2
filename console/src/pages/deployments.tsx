/**
 * The deployments of the tenant (`GET /v2/deployments`): name, status with its reason, latest
 * revision, URL and last update; searched by name (`?q=`, typed search params: a link keeps it).
 */
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { createRoute, Link } from '@tanstack/react-router';
import { call } from '../api';
import { DeploymentStatusBadge, ErrorNote, PageTitle, TableHead, Time } from '../components/ui';
import { authedRoute } from '../routes/root';
import type { DeploymentList } from '../types';

const PAGE_SIZE = 50;

interface DeploymentsSearch {
  q?: string;
  offset?: number;
}

function DeploymentsPage() {
  const search = deploymentsRoute.useSearch();
  const navigate = deploymentsRoute.useNavigate();
  const q = search.q ?? '';
  const offset = search.offset ?? 0;
  const list = useQuery({
    queryKey: ['deployments', q, offset],
    queryFn: ({ signal }) => {
      const params = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String(offset) });
      if (q) params.set('name_contains', q);
      return call<DeploymentList>(`/v2/deployments?${params}`, { signal });
    },
    placeholderData: keepPreviousData,
    refetchInterval: 5000,
  });
  const rows = list.data?.resources ?? [];

  return (
    <>
      <div className="flex flex-wrap items-end justify-between gap-4">
        <PageTitle>Deployments</PageTitle>
        <div role="search" className="flex items-center gap-2">
          <label htmlFor="deployment-search" className="text-sm">
            Search by name
          </label>
          <input
            id="deployment-search"
            type="search"
            value={q}
            maxLength={63}
            onChange={(event) => void navigate({ search: { ...(event.target.value ? { q: event.target.value } : {}) }, replace: true })}
            className="w-64 rounded-md border border-slate-400 bg-white px-3 py-1.5 text-sm dark:border-slate-500 dark:bg-slate-900"
          />
        </div>
      </div>
      <div className="mt-6">
        {list.error ? <ErrorNote error={list.error} /> : null}
        {list.isPending ? (
          <p className="text-sm text-slate-700 dark:text-slate-300">Loading…</p>
        ) : rows.length === 0 ? (
          <p className="text-sm text-slate-700 dark:text-slate-300">
            {q ? `No deployment's name contains “${q}”.` : 'No deployments yet: `berth deploy` in a LangGraph project makes one.'}
          </p>
        ) : (
          <table className="w-full border-collapse text-left text-sm">
            <caption className="sr-only">Deployments{q ? ` whose name contains “${q}”` : ''}</caption>
            <TableHead columns={['Name', 'Status', 'Latest revision', 'URL', 'Updated']} />
            <tbody>
              {rows.map((d) => (
                <tr key={d.id} className="border-b border-slate-200 align-top dark:border-slate-800">
                  <th scope="row" className="py-2 pr-4 font-medium">
                    <Link to="/deployments/$deploymentId" params={{ deploymentId: d.id }} className="underline">
                      {d.name}
                    </Link>
                  </th>
                  <td className="py-2 pr-4">
                    <DeploymentStatusBadge status={d.status} />
                    {d.status_message ? <p className="mt-1 max-w-sm text-xs text-slate-700 dark:text-slate-300">{d.status_message}</p> : null}
                  </td>
                  <td className="py-2 pr-4 font-mono text-xs">{d.latest_revision_id ? d.latest_revision_id.slice(0, 8) : '—'}</td>
                  <td className="py-2 pr-4 font-mono text-xs break-all">{d.deployment_url}</td>
                  <td className="py-2 whitespace-nowrap">
                    <Time iso={d.updated_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <nav aria-label="Pages" className="mt-4 flex gap-2 text-sm">
          {offset > 0 ? (
            <button
              type="button"
              className="rounded-md border border-slate-300 px-3 py-1 dark:border-slate-600"
              onClick={() => void navigate({ search: (s) => ({ ...s, offset: Math.max(0, offset - PAGE_SIZE) || undefined }) })}
            >
              Previous
            </button>
          ) : null}
          {rows.length === PAGE_SIZE ? (
            <button
              type="button"
              className="rounded-md border border-slate-300 px-3 py-1 dark:border-slate-600"
              onClick={() => void navigate({ search: (s) => ({ ...s, offset: offset + PAGE_SIZE }) })}
            >
              Next
            </button>
          ) : null}
        </nav>
      </div>
    </>
  );
}

export const deploymentsRoute = createRoute({
  getParentRoute: () => authedRoute,
  path: '/deployments',
  validateSearch: (search: Record<string, unknown>): DeploymentsSearch => {
    const q = typeof search.q === 'string' ? search.q.slice(0, 63) : undefined;
    const offset = typeof search.offset === 'number' && Number.isSafeInteger(search.offset) && search.offset > 0 ? search.offset : undefined;
    return { ...(q ? { q } : {}), ...(offset ? { offset } : {}) };
  },
  component: DeploymentsPage,
});
