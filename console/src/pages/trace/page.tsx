/**
 * One trace (`/traces/{project_id}/{trace_id}`): its runs as a tree beside a waterfall, the opened
 * run's details beside them (`?run=` keeps which one, so a URL shows the same run), and links to
 * the project, to the runs of the same thread (the runs table filtered on metadata `thread_id`) and
 * to the deployment whose tracing project this is.
 * The runs come from `POST /runs/query` (load.ts: only the fields the tree and the waterfall show,
 * the first page shown at once); a run's inputs and outputs only when it is opened.
 */
import { useQuery } from '@tanstack/react-query';
import { createRoute } from '@tanstack/react-router';
import { useCallback, useMemo, useState } from 'react';
import { call } from '../../api';
import { PathLink } from '../../components/path-link';
import { ErrorNote, PageTitle } from '../../components/ui';
import { authedRoute } from '../../routes/root';
import { formatCost, formatDuration } from '../../format';
import { RunDetails, type RunDetail } from './run-details';
import { RunsView } from './runs-view';
import { MAX_TRACE_RUNS, traceHead, traceRest } from './load';
import { buildTree } from './tree';

interface TraceSearch {
  run?: string;
}

interface Project {
  id: string;
  name: string;
}

interface DeploymentRef {
  id: string;
  name: string;
  session_id: string | null;
}

/** The filter of the runs table for the runs of one thread (its `thread_id` metadata). */
export function threadFilter(threadId: string): string {
  return `eq(thread_id, ${JSON.stringify(threadId)})`;
}

const linkStyle = 'text-blue-700 underline hover:no-underline dark:text-blue-300';

function TracePage() {
  const { projectId, traceId } = traceRoute.useParams();
  const search = traceRoute.useSearch();
  const navigate = traceRoute.useNavigate();

  // The first page is shown at once (runs in start order: every parent comes before its children); the rest follows.
  const head = useQuery({
    queryKey: ['trace-head', projectId, traceId],
    queryFn: ({ signal }) => traceHead(projectId, traceId, signal),
    staleTime: 30_000,
    refetchOnWindowFocus: false,
  });
  const more = head.data?.first.cursors.next != null;
  const rest = useQuery({
    queryKey: ['trace-rest', projectId, traceId],
    enabled: more,
    queryFn: ({ signal }) => traceRest(projectId, traceId, head.data!, signal),
    staleTime: 30_000,
    refetchOnWindowFocus: false,
  });
  const loaded = useMemo(() => rest.data ?? (head.data ? { runs: head.data.first.runs, truncated: false } : undefined), [rest.data, head.data]);
  const loadingRest = more && !rest.data;
  const project = useQuery({
    queryKey: ['session', projectId],
    queryFn: ({ signal }) => call<Project>(`/sessions/${encodeURIComponent(projectId)}`, { signal }),
    staleTime: 60_000,
  });
  // The root's metadata only (its thread): the root run itself may be megabytes.
  const root = useQuery({
    queryKey: ['trace-root-extra', projectId, traceId],
    queryFn: async ({ signal }) =>
      (
        await call<{ runs: RunDetail[] }>('/runs/query', {
          method: 'POST',
          body: { session: [projectId], id: [traceId], select: ['extra', 'total_tokens', 'total_cost'], limit: 1 },
          signal,
        })
      ).runs[0] ?? null,
    staleTime: 60_000,
  });
  // A deployment's tracing project is named after it: look among the deployments of that name.
  const projectName = project.data?.name;
  const deployment = useQuery({
    queryKey: ['deployment-of-project', projectId, projectName],
    enabled: projectName !== undefined,
    queryFn: async ({ signal }) => {
      const list = await call<{ resources: DeploymentRef[] }>(`/v2/deployments?name_contains=${encodeURIComponent(projectName!)}&limit=100`, { signal });
      return list.resources.find((d) => d.session_id === projectId) ?? null;
    },
    staleTime: 60_000,
    // Tracing without deployments (or a platform without a control plane) is fine: no link.
    retry: false,
  });

  const tree = useMemo(() => (loaded ? buildTree(loaded.runs) : undefined), [loaded]);
  const [collapsed, setCollapsed] = useState<ReadonlySet<string>>(new Set());
  const [activeId, setActiveId] = useState<string | undefined>(undefined);
  const openedId = search.run ?? tree?.roots[0]?.run.id;
  const onToggle = useCallback(
    (id: string) =>
      setCollapsed((before) => {
        const next = new Set(before);
        if (!next.delete(id)) next.add(id);
        return next;
      }),
    [],
  );
  const onOpen = useCallback((id: string) => void navigate({ search: { run: id }, replace: true }), [navigate]);

  const threadId = root.data?.extra?.metadata?.thread_id;
  const rootNode = tree?.roots[0];
  return (
    <>
      <nav aria-label="Breadcrumb" className="text-sm">
        <ol className="flex flex-wrap gap-1 text-slate-700 dark:text-slate-300">
          <li>
            <PathLink href="/traces" className={linkStyle}>
              Traces
            </PathLink>{' '}
            /
          </li>
          <li>
            <PathLink href={`/traces/${encodeURIComponent(projectId)}`} className={linkStyle}>
              {projectName ?? 'Project'}
            </PathLink>{' '}
            /
          </li>
          <li aria-current="page">Trace</li>
        </ol>
      </nav>
      <div className="mt-2 flex flex-wrap items-end justify-between gap-4">
        <PageTitle>{rootNode?.run.name ?? 'Trace'}</PageTitle>
        <ul className="flex flex-wrap gap-4 text-sm">
          {typeof threadId === 'string' || typeof threadId === 'number' ? (
            <li>
              <PathLink
                className={linkStyle}
                href={`/traces/${encodeURIComponent(projectId)}?${new URLSearchParams({ filter: threadFilter(String(threadId)) })}`}
              >
                Runs of thread {String(threadId)}
              </PathLink>
            </li>
          ) : null}
          {deployment.data ? (
            <li>
              <PathLink className={linkStyle} href={`/deployments/${encodeURIComponent(deployment.data.id)}`}>
                Deployment {deployment.data.name}
              </PathLink>
            </li>
          ) : null}
        </ul>
      </div>
      {tree && rootNode ? (
        <p className="mt-1 text-sm text-slate-700 dark:text-slate-300" data-testid="trace-summary">
          {loadingRest
            ? `The first ${loaded!.runs.length} runs; loading the rest…`
            : `${loaded!.runs.length.toLocaleString('en')} runs${loaded!.truncated ? ` (the first ${MAX_TRACE_RUNS.toLocaleString('en')} only)` : ''}`}{' '}
          · {formatDuration(tree.end - tree.start)}
          {typeof root.data?.total_tokens === 'number' ? ` · ${root.data.total_tokens.toLocaleString('en')} tokens` : ''}
          {typeof root.data?.total_cost === 'number' ? ` · ${formatCost(root.data.total_cost)}` : ''}
        </p>
      ) : null}
      <div className="mt-4">
        {head.error || rest.error ? <ErrorNote error={head.error ?? rest.error} /> : null}
        {head.isPending ? <p className="text-sm text-slate-700 dark:text-slate-300">Loading the trace…</p> : null}
        {tree && !rootNode ? <p className="text-sm text-slate-700 dark:text-slate-300">This project has no trace {traceId}.</p> : null}
        {tree && rootNode ? (
          <div className="grid gap-4 lg:grid-cols-[3fr_2fr]">
            <RunsView
              tree={tree}
              collapsed={collapsed}
              onToggle={onToggle}
              activeId={activeId ?? openedId}
              onActivate={setActiveId}
              openedId={openedId}
              onOpen={onOpen}
            />
            <div
              role="region"
              aria-label="Run details"
              tabIndex={0}
              className="max-h-[80vh] min-w-0 overflow-auto rounded-md border border-slate-300 bg-white p-4 dark:border-slate-700 dark:bg-slate-900"
            >
              {openedId ? <RunDetails key={openedId} runId={openedId} /> : null}
            </div>
          </div>
        ) : null}
      </div>
    </>
  );
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const traceRoute = createRoute({
  getParentRoute: () => authedRoute,
  path: '/traces/$projectId/$traceId',
  validateSearch: (search: Record<string, unknown>): TraceSearch => (typeof search.run === 'string' && UUID.test(search.run) ? { run: search.run } : {}),
  component: TracePage,
});
