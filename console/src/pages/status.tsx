/**
 * Platform status: the services the gateway depends on and whether each answers (`GET /readyz`),
 * the platform's version (`GET /info`), and the tenant's deployments that are down or failed
 * (`GET /v2/deployments`).
 */
import { useQuery } from '@tanstack/react-query';
import { createRoute, Link } from '@tanstack/react-router';
import { call } from '../api';
import { Badge, DeploymentStatusBadge, ErrorNote, PageTitle, TableHead, Time, UNHEALTHY_STATUSES, type Tone } from '../components/ui';
import { authedRoute } from '../routes/root';
import type { Deployment, DeploymentList, Info, Readiness } from '../types';

const overall: Record<Readiness['status'], { tone: Tone; text: string }> = {
  ok: { tone: 'good', text: 'Every service answers' },
  degraded: { tone: 'warn', text: 'Degraded: sandboxes are unavailable, everything else answers' },
  failing: { tone: 'bad', text: 'Failing: a service the gateway needs does not answer' },
};

const PAGE = 100;
/** Pages of deployments read to find the unhealthy ones (a tenant's limit on deployments is far below). */
const MAX_PAGES = 20;

async function unhealthyDeployments(signal: AbortSignal): Promise<Deployment[]> {
  const found: Deployment[] = [];
  for (let page = 0; page < MAX_PAGES; page++) {
    const { resources } = await call<DeploymentList>(`/v2/deployments?limit=${PAGE}&offset=${page * PAGE}`, { signal });
    found.push(...resources.filter((d) => UNHEALTHY_STATUSES.has(d.status)));
    if (resources.length < PAGE) break;
  }
  return found;
}

function Services() {
  // 503 is an answer too: it lists which check fails.
  const ready = useQuery({ queryKey: ['readyz'], queryFn: ({ signal }) => call<Readiness>('/readyz', { accept: [503], signal }), refetchInterval: 5000 });
  if (ready.error) return <ErrorNote error={ready.error} />;
  if (!ready.data) return <p>Loading…</p>;
  const { status, checks } = ready.data;
  return (
    <>
      <p className="mt-2" data-testid="overall">
        <Badge tone={overall[status].tone}>{status}</Badge> <span className="ml-1 text-sm">{overall[status].text}</span>
      </p>
      <table className="mt-4 w-full max-w-2xl border-collapse text-left text-sm">
        <caption className="sr-only">Services and their readiness</caption>
        <TableHead columns={['Service', 'Readiness', 'Detail']} />
        <tbody>
          {Object.entries(checks).map(([name, check]) => (
            <tr key={name} className="border-b border-slate-200 dark:border-slate-800">
              <th scope="row" className="py-2 pr-4 font-medium">
                {name}
              </th>
              <td className="py-2 pr-4">
                <Badge tone={check.status === 'ok' ? 'good' : 'bad'}>{check.status}</Badge>
              </td>
              <td className="py-2 text-slate-700 dark:text-slate-300">{check.detail ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function Unhealthy() {
  const list = useQuery({ queryKey: ['deployments', 'unhealthy'], queryFn: ({ signal }) => unhealthyDeployments(signal), refetchInterval: 10_000 });
  if (list.error) return <ErrorNote error={list.error} />;
  if (!list.data) return <p>Loading…</p>;
  if (list.data.length === 0) return <p className="mt-2 text-sm">Every deployment of this tenant is healthy or on its way.</p>;
  return (
    <ul className="mt-2 space-y-2" aria-label="Unhealthy deployments">
      {list.data.map((d) => (
        <li key={d.id} className="rounded-md border border-slate-200 bg-white p-3 dark:border-slate-800 dark:bg-slate-900">
          <div className="flex items-center gap-3">
            <span className="font-medium">{d.name}</span>
            <DeploymentStatusBadge status={d.status} />
            <span className="ml-auto text-xs text-slate-700 dark:text-slate-300">
              updated <Time iso={d.updated_at} />
            </span>
          </div>
          {d.status_message ? <p className="mt-1 text-sm text-slate-700 dark:text-slate-300">{d.status_message}</p> : null}
        </li>
      ))}
    </ul>
  );
}

function StatusPage() {
  const info = useQuery({ queryKey: ['info'], queryFn: ({ signal }) => call<Info>('/info', { signal }), staleTime: Infinity });
  return (
    <>
      <PageTitle>Platform status</PageTitle>
      <p className="mt-1 text-sm text-slate-700 dark:text-slate-300">
        Berth version{' '}
        <span data-testid="version" className="font-mono">
          {info.data?.berth_version ?? '…'}
        </span>
      </p>
      <section aria-labelledby="services-heading" className="mt-6">
        <h2 id="services-heading" className="text-lg font-semibold">
          Services
        </h2>
        <Services />
      </section>
      <section aria-labelledby="unhealthy-heading" className="mt-8">
        <h2 id="unhealthy-heading" className="text-lg font-semibold">
          Unhealthy deployments
        </h2>
        <Unhealthy />
        <p className="mt-3 text-sm">
          <Link to="/deployments" className="text-blue-700 underline dark:text-blue-300">
            All deployments
          </Link>
        </p>
      </section>
    </>
  );
}

export const statusRoute = createRoute({
  getParentRoute: () => authedRoute,
  path: '/status',
  component: StatusPage,
});
