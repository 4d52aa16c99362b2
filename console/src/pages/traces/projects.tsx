/**
 * The tenant's tracing projects (`/traces`): each project's runs, error rate, p50/p99 latency,
 * tokens and cost over the chosen range (`GET /sessions?include_stats`), and one project's figures
 * over time as charts (`POST /sessions/stats`). The range and the charted project are search
 * params, so a link shows the same. A deployment's project links to the deployment
 * (`GET /v2/deployments`: each names its `session_id`).
 */
import * as ToggleGroup from '@radix-ui/react-toggle-group';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { createRoute, Link } from '@tanstack/react-router';
import { useMemo, type ReactNode } from 'react';
import { call } from '../../api';
import { ErrorNote, PageTitle, TableHead, Time } from '../../components/ui';
import { authedRoute } from '../../routes/root';
import type { Deployment, DeploymentList } from '../../types';
import { TimeChart } from './chart';
import { PathLink } from '../../components/path-link';
import { formatCost, formatCount, formatInterval, formatPercent, formatSeconds } from '../../format';
import { isoParam, RANGE_LABELS, RANGES, type Project, type ProjectStats, type RangeName, type RunStats } from './data';

/** A deployment names the project its agent servers trace to. */
type TracedDeployment = Deployment & { session_id: string | null };

interface ProjectsSearch {
  range?: RangeName;
  /** A custom range's bounds, ISO. */
  from?: string;
  to?: string;
  /** The project charted (the one with most runs by default). */
  chart?: string;
}

/** The range's bounds; "now" is taken when the range is chosen, to the next minute. */
function useRange(search: ProjectsSearch): { start: string; end: string } {
  const range = search.range ?? '24h';
  return useMemo(() => {
    if (range === 'custom' && search.from && search.to) return { start: search.from, end: search.to };
    const end = Math.ceil(Date.now() / 60_000) * 60_000;
    return { start: new Date(end - RANGES[range === 'custom' ? '24h' : range]).toISOString(), end: new Date(end).toISOString() };
  }, [range, search.from, search.to]);
}

/** An ISO time as a `datetime-local` input's value (local time, to the minute). */
const localInput = (iso: string | undefined) => {
  if (!iso) return '';
  const d = new Date(iso);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};

function RangePicker({ search }: { search: ProjectsSearch }) {
  const navigate = projectsRoute.useNavigate();
  const range = search.range ?? '24h';
  return (
    <div className="flex flex-wrap items-center gap-3 text-sm">
      <ToggleGroup.Root
        type="single"
        aria-label="Time range"
        value={range}
        onValueChange={(value) => {
          if (!value) return;
          void navigate({ search: (s) => ({ ...s, range: value as RangeName }), replace: true });
        }}
        className="flex rounded-md border border-slate-300 dark:border-slate-600"
      >
        {(Object.keys(RANGE_LABELS) as RangeName[]).map((value) => (
          <ToggleGroup.Item
            key={value}
            value={value}
            className="px-3 py-1 text-slate-700 first:rounded-l-md last:rounded-r-md data-[state=on]:bg-slate-800 data-[state=on]:text-white dark:text-slate-200 dark:data-[state=on]:bg-slate-200 dark:data-[state=on]:text-slate-900"
          >
            {RANGE_LABELS[value]}
          </ToggleGroup.Item>
        ))}
      </ToggleGroup.Root>
      {range === 'custom'
        ? (['from', 'to'] as const).map((bound) => (
            <label key={bound} className="flex items-center gap-1">
              {bound === 'from' ? 'From' : 'To'}
              <input
                type="datetime-local"
                value={localInput(search[bound])}
                onChange={(event) => {
                  const iso = isoParam(event.target.value);
                  void navigate({ search: (s) => ({ ...s, [bound]: iso }), replace: true });
                }}
                className="rounded-md border border-slate-400 bg-white px-2 py-1 dark:border-slate-500 dark:bg-slate-900"
              />
            </label>
          ))
        : null}
    </div>
  );
}

function ProjectCharts({ project, start, end }: { project: Project; start: string; end: string }) {
  const stats = useQuery({
    queryKey: ['project-stats', project.id, start, end],
    queryFn: ({ signal }) =>
      call<ProjectStats>('/sessions/stats', { method: 'POST', body: { session: [project.id], start_time: start, end_time: end }, signal }),
    placeholderData: keepPreviousData,
  });
  if (stats.error) return <ErrorNote error={stats.error} />;
  const figures = stats.data?.projects[0];
  if (!figures) return <p className="text-sm text-slate-700 dark:text-slate-300">Loading charts…</p>;
  const buckets = figures.buckets.map((b) => b.start_time);
  const of = (pick: (s: RunStats) => number | null) => figures.buckets.map((b) => pick(b.stats));
  const per = `per ${formatInterval(stats.data!.bucket_seconds)}`;
  const t = figures.stats;
  const errors = Math.round((t.error_rate ?? 0) * t.run_count);
  return (
    <section aria-label={`Charts of ${project.name}`} className="mt-4 grid gap-4 md:grid-cols-2" data-testid="charts">
      <TimeChart
        title={`Runs and errors ${per}`}
        description={`${formatCount(t.run_count)} runs, ${formatCount(errors)} with an error (${formatPercent(t.error_rate)}).`}
        buckets={buckets}
        series={[
          { name: 'Runs', kind: 'bar', tone: 'fill-sky-600 dark:fill-sky-400', values: of((s) => s.run_count) },
          { name: 'Errors', kind: 'bar', tone: 'fill-red-600 dark:fill-red-400', values: of((s) => (s.error_rate ?? 0) * s.run_count) },
        ]}
        format={(n) => formatCount(Math.round(n))}
      />
      <TimeChart
        title={`Latency ${per}`}
        description={`p50 ${formatSeconds(t.latency_p50)}, p99 ${formatSeconds(t.latency_p99)} over the range.`}
        buckets={buckets}
        series={[
          { name: 'p50', kind: 'line', tone: 'stroke-sky-600 dark:stroke-sky-400', values: of((s) => s.latency_p50) },
          { name: 'p99', kind: 'line', tone: 'stroke-amber-600 dark:stroke-amber-400', values: of((s) => s.latency_p99) },
        ]}
        format={formatSeconds}
      />
      <TimeChart
        title={`Tokens ${per}`}
        description={`${formatCount(t.total_tokens)} tokens over the range.`}
        buckets={buckets}
        series={[{ name: 'Tokens', kind: 'bar', tone: 'fill-violet-600 dark:fill-violet-400', values: of((s) => s.total_tokens) }]}
        format={(n) => formatCount(Math.round(n))}
      />
      <TimeChart
        title={`Cost ${per}`}
        description={`${formatCost(t.total_cost)} over the range.`}
        buckets={buckets}
        series={[{ name: 'Cost', kind: 'bar', tone: 'fill-emerald-600 dark:fill-emerald-400', values: of((s) => s.total_cost) }]}
        format={formatCost}
      />
    </section>
  );
}

/** A project's figure (`data-stat` names it for tests and scripts). */
function Stat({ name, children }: { name: string; children: ReactNode }) {
  return (
    <td className="py-2 pr-4 tabular-nums" data-stat={name}>
      {children}
    </td>
  );
}

function ProjectsPage() {
  const search = projectsRoute.useSearch();
  const navigate = projectsRoute.useNavigate();
  const { start, end } = useRange(search);
  const projects = useQuery({
    queryKey: ['projects', start, end],
    queryFn: ({ signal }) => {
      const params = new URLSearchParams({ include_stats: 'true', stats_start_time: start, stats_end_time: end, limit: '100' });
      return call<Project[]>(`/sessions?${params}`, { signal });
    },
    placeholderData: keepPreviousData,
  });
  // Which deployment traces to each project: the deployments name their project.
  const deployments = useQuery({
    queryKey: ['deployments', 'by-project'],
    queryFn: ({ signal }) => call<DeploymentList>('/v2/deployments?limit=100', { signal }),
    select: (list) => new Map((list.resources as TracedDeployment[]).flatMap((d) => (d.session_id ? [[d.session_id, d] as const] : []))),
  });
  const rows = projects.data ?? [];
  const charted = rows.find((p) => p.id === search.chart) ?? [...rows].sort((a, b) => (b.run_count ?? 0) - (a.run_count ?? 0))[0];

  return (
    <>
      <div className="flex flex-wrap items-end justify-between gap-4">
        <PageTitle>Traces</PageTitle>
        <RangePicker search={search} />
      </div>
      <p className="mt-1 text-sm text-slate-700 dark:text-slate-300">
        Runs that started from <Time iso={start} /> to <Time iso={end} />.
      </p>
      <div className="mt-4">
        {projects.error ? <ErrorNote error={projects.error} /> : null}
        {projects.isPending ? (
          <p className="text-sm text-slate-700 dark:text-slate-300">Loading…</p>
        ) : rows.length === 0 ? (
          <p className="text-sm text-slate-700 dark:text-slate-300">
            No tracing projects yet: a deployment traces to its own project, and the <code>langsmith</code> client with this gateway as its endpoint makes one.
          </p>
        ) : (
          <>
            <table className="w-full border-collapse text-left text-sm">
              <caption className="sr-only">Tracing projects and their runs in the range</caption>
              <TableHead columns={['Project', 'Runs', 'Error rate', 'p50', 'p99', 'Tokens', 'Cost', 'Last run', 'Deployment']} />
              <tbody>
                {rows.map((p) => {
                  const deployment = deployments.data?.get(p.id);
                  return (
                    <tr key={p.id} className="border-b border-slate-200 align-top dark:border-slate-800" data-project={p.id}>
                      <th scope="row" className="py-2 pr-4 font-medium">
                        <Link to="/traces/$projectId" params={{ projectId: p.id }} className="text-sky-800 underline dark:text-sky-300">
                          {p.name}
                        </Link>
                      </th>
                      <Stat name="runs">{formatCount(p.run_count)}</Stat>
                      <Stat name="error-rate">{formatPercent(p.error_rate)}</Stat>
                      <Stat name="p50">{formatSeconds(p.latency_p50)}</Stat>
                      <Stat name="p99">{formatSeconds(p.latency_p99)}</Stat>
                      <Stat name="tokens">{formatCount(p.total_tokens)}</Stat>
                      <Stat name="cost">{formatCost(p.total_cost)}</Stat>
                      <td className="py-2 pr-4 whitespace-nowrap">{p.last_run_start_time ? <Time iso={p.last_run_start_time} /> : '—'}</td>
                      <td className="py-2">
                        {deployment ? (
                          <PathLink href={`/deployments/${deployment.id}`} className="text-sky-800 underline dark:text-sky-300">
                            {deployment.name}
                          </PathLink>
                        ) : (
                          '—'
                        )}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
            {charted ? (
              <div className="mt-6">
                <div className="flex flex-wrap items-center gap-2 text-sm">
                  <label htmlFor="chart-project" className="font-medium">
                    Charts of
                  </label>
                  <select
                    id="chart-project"
                    value={charted.id}
                    onChange={(event) => void navigate({ search: (s) => ({ ...s, chart: event.target.value }), replace: true })}
                    className="rounded-md border border-slate-400 bg-white px-2 py-1 dark:border-slate-500 dark:bg-slate-900"
                  >
                    {rows.map((p) => (
                      <option key={p.id} value={p.id}>
                        {p.name}
                      </option>
                    ))}
                  </select>
                </div>
                <ProjectCharts project={charted} start={start} end={end} />
              </div>
            ) : null}
          </>
        )}
      </div>
    </>
  );
}

export const projectsRoute = createRoute({
  getParentRoute: () => authedRoute,
  path: '/traces',
  validateSearch: (search: Record<string, unknown>): ProjectsSearch => {
    const range = typeof search.range === 'string' && search.range in RANGE_LABELS ? (search.range as RangeName) : undefined;
    const from = isoParam(search.from);
    const to = isoParam(search.to);
    const chart = typeof search.chart === 'string' && /^[0-9a-f-]{36}$/i.test(search.chart) ? search.chart : undefined;
    return { ...(range ? { range } : {}), ...(from ? { from } : {}), ...(to ? { to } : {}), ...(chart ? { chart } : {}) };
  },
  component: ProjectsPage,
});
