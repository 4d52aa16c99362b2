/**
 * One deployment (`/deployments/{deployment_id}`): its status and URL, its revisions with the
 * chosen one's timeline and logs, secrets, resources, the webhook secret, delete. It follows
 * `GET /v2/deployments/{deployment_id}/events` while open, so a deploy started elsewhere (the CLI)
 * appears and moves on without a reload. The chosen revision, log and time range are search
 * params: a link reproduces the view.
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { createRoute, Link, useNavigate } from '@tanstack/react-router';
import { useEffect } from 'react';
import { call } from '../../api';
import { DeploymentStatusBadge, ErrorNote, PageTitle, Time } from '../../components/ui';
import { authedRoute } from '../../routes/root';
import { CopyButton, Section } from '../../components/controls';
import { RevisionLog, type LogRange } from './logs';
import { Revisions, RevisionStatusBadge, RevisionTimeline } from './revisions';
import { DeleteDeployment, Resources, Secrets, WebhookSecretRotation } from './settings';
import { deploymentPath, keys, type DeploymentDetail, type LogType, type RevisionList } from './types';
import { PathLink } from '../../components/path-link';

interface DeploymentSearch {
  revision?: string;
  log?: LogType;
  since?: string;
  until?: string;
}

/** Reads the deployment again at each change the control plane announces; leaves when it is deleted. */
function useDeploymentEvents(deploymentId: string) {
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  useEffect(() => {
    const source = new EventSource(`${deploymentPath(deploymentId)}/events`);
    source.addEventListener('changed', () => {
      void queryClient.invalidateQueries({ queryKey: keys.deployment(deploymentId) });
      void queryClient.invalidateQueries({ queryKey: ['deployments'] });
    });
    source.addEventListener('deleted', () => {
      source.close();
      queryClient.removeQueries({ queryKey: keys.deployment(deploymentId) });
      void navigate({ to: '/deployments' });
    });
    return () => source.close();
  }, [deploymentId, queryClient, navigate]);
}

const isoTime = (value: unknown) => (typeof value === 'string' && !Number.isNaN(Date.parse(value)) ? new Date(value).toISOString() : undefined);

function DeploymentPage() {
  const { deploymentId } = deploymentRoute.useParams();
  const search = deploymentRoute.useSearch();
  const navigate = deploymentRoute.useNavigate();
  useDeploymentEvents(deploymentId);
  const deployment = useQuery({
    queryKey: keys.deployment(deploymentId),
    queryFn: ({ signal }) => call<DeploymentDetail>(deploymentPath(deploymentId), { signal }),
  });
  const revisions = useQuery({
    queryKey: keys.revisions(deploymentId),
    queryFn: ({ signal }) => call<RevisionList>(`${deploymentPath(deploymentId)}/revisions?limit=50`, { signal }),
  });

  if (deployment.error) {
    return (
      <>
        <PageTitle>Deployment</PageTitle>
        <div className="mt-4">
          <ErrorNote error={deployment.error} />
        </div>
        <Link to="/deployments" className="mt-4 inline-block underline">
          Back to the deployments
        </Link>
      </>
    );
  }
  const d = deployment.data;
  if (!d) return <p>Loading…</p>;
  const list = revisions.data?.resources ?? [];
  const chosenId = search.revision ?? d.latest_revision_id ?? undefined;
  const chosen = list.find((r) => r.id === chosenId);
  const logType: LogType =
    search.log ?? (chosen && ['AWAITING_SOURCE', 'QUEUED', 'AWAITING_BUILD', 'BUILDING', 'BUILD_FAILED'].includes(chosen.status) ? 'build' : 'deploy');
  const setSearch = (next: Partial<DeploymentSearch>) => void navigate({ search: (s) => ({ ...s, ...next }), replace: true });
  const range: LogRange = { since: search.since, until: search.until };

  return (
    <>
      <nav aria-label="Breadcrumb" className="text-sm">
        <Link to="/deployments" className="text-slate-700 underline dark:text-slate-300">
          Deployments
        </Link>
      </nav>
      <header className="mt-2 space-y-2">
        <PageTitle>{d.name}</PageTitle>
        <div className="flex flex-wrap items-center gap-3 text-sm" data-testid="deployment-status">
          <DeploymentStatusBadge status={d.status} />
          {d.status_message || d.health_message ? <span>{d.status_message ?? d.health_message}</span> : null}
          <span className="text-slate-700 dark:text-slate-300">
            updated <Time iso={d.updated_at} />
          </span>
        </div>
        <dl className="grid grid-cols-[max-content_1fr] gap-x-4 gap-y-1 text-sm">
          <dt className="text-slate-700 dark:text-slate-300">URL</dt>
          <dd className="flex items-center gap-2">
            <code className="font-mono text-xs break-all" data-testid="deployment-url">
              {d.deployment_url}
            </code>
            <CopyButton text={d.deployment_url} label="Copy the deployment URL" />
          </dd>
          <dt className="text-slate-700 dark:text-slate-300">Studio</dt>
          <dd>
            <Link to="/deployments/$deploymentId/studio" params={{ deploymentId: d.id }} className="underline">
              Open {d.name} in Studio
            </Link>
          </dd>
          <dt className="text-slate-700 dark:text-slate-300">Tracing project</dt>
          <dd>
            {d.session_id ? (
              <PathLink href={`/traces/${encodeURIComponent(d.session_id)}`} className="underline">
                Traces of {d.name}
              </PathLink>
            ) : (
              'none'
            )}
          </dd>
          <dt className="text-slate-700 dark:text-slate-300">Serving revision</dt>
          <dd className="font-mono text-xs">{d.active_revision_id ? d.active_revision_id.slice(0, 8) : 'none yet'}</dd>
        </dl>
      </header>

      <Section title="Revisions" id="revisions">
        {revisions.error ? <ErrorNote error={revisions.error} /> : null}
        <Revisions deployment={d} revisions={list} chosen={chosenId} onChoose={(revision) => setSearch({ revision })} />
      </Section>

      {chosen ? (
        <Section title={`Revision ${chosen.id.slice(0, 8)}`} id="revision">
          <div className="grid gap-6 lg:grid-cols-[16rem_1fr]">
            <div>
              <p className="mb-3 text-sm">
                Status <RevisionStatusBadge status={chosen.status} />
              </p>
              <RevisionTimeline deploymentId={d.id} revision={chosen} />
            </div>
            <div>
              <div role="group" aria-label="Log" className="mb-3 flex gap-2">
                {(['build', 'deploy'] as const).map((type) => (
                  <button
                    key={type}
                    type="button"
                    aria-pressed={logType === type}
                    onClick={() => setSearch({ log: type })}
                    className="rounded-md border border-slate-400 px-3 py-1 text-sm aria-pressed:bg-slate-900 aria-pressed:text-white focus-visible:outline-2 focus-visible:outline-blue-600 dark:border-slate-500 dark:aria-pressed:bg-slate-100 dark:aria-pressed:text-slate-900"
                  >
                    {type === 'build' ? 'Build log' : 'Server log'}
                  </button>
                ))}
              </div>
              <RevisionLog
                key={`${chosen.id}-${logType}`}
                deploymentId={d.id}
                revisionId={chosen.id}
                type={logType}
                range={range}
                onRange={(next) => setSearch({ since: next.since, until: next.until })}
              />
            </div>
          </div>
        </Section>
      ) : null}

      <Section title="Secrets" id="secrets">
        <Secrets deployment={d} />
      </Section>
      <Section title="Resources and replicas" id="resources">
        <Resources key={JSON.stringify(d.source_config.resource_spec ?? {})} deployment={d} />
      </Section>
      <Section title="Webhook secret" id="webhook">
        <WebhookSecretRotation deploymentId={d.id} />
      </Section>
      <Section title="Delete" id="delete">
        <DeleteDeployment deployment={d} />
      </Section>
    </>
  );
}

export const deploymentRoute = createRoute({
  getParentRoute: () => authedRoute,
  path: '/deployments/$deploymentId',
  validateSearch: (search: Record<string, unknown>): DeploymentSearch => {
    const revision = typeof search.revision === 'string' && /^[0-9a-f-]{36}$/.test(search.revision) ? search.revision : undefined;
    const log = search.log === 'build' || search.log === 'deploy' ? search.log : undefined;
    const since = isoTime(search.since);
    const until = isoTime(search.until);
    return { ...(revision ? { revision } : {}), ...(log ? { log } : {}), ...(since ? { since } : {}), ...(until ? { until } : {}) };
  },
  component: DeploymentPage,
});
