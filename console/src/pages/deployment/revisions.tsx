/**
 * A deployment's revisions, newest first (`GET …/revisions`): which one serves
 * (`active_revision_id`), the chosen one's status timeline, and redeploying an earlier one
 * (rollback, `POST …/revisions/{revision_id}/redeploy`).
 *
 * The revision API has one status and `created_at`/`updated_at`, no time per status: the timeline
 * takes QUEUED from `created_at`, BUILDING and DEPLOYING from the first entry of the build and the
 * deploy log (each step's first line is written as it starts), and the end (DEPLOYED or the failure)
 * from `updated_at`.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { call } from '../../api';
import { Badge, ErrorNote, TableHead, Time, type Tone } from '../../components/ui';
import { Button, Dialog } from '../../components/controls';
import { deploymentPath, keys, type DeploymentDetail, type LogPage, type LogType, type Revision, type RevisionStatus } from './types';

const revisionTones: Record<RevisionStatus, Tone> = {
  AWAITING_SOURCE: 'none',
  QUEUED: 'busy',
  AWAITING_BUILD: 'busy',
  BUILDING: 'busy',
  AWAITING_DEPLOY: 'busy',
  DEPLOYING: 'busy',
  DEPLOYED: 'good',
  BUILD_FAILED: 'bad',
  DEPLOY_FAILED: 'bad',
  INTERRUPTED: 'warn',
  UNKNOWN: 'none',
};

export function RevisionStatusBadge({ status }: { status: RevisionStatus }) {
  return <Badge tone={revisionTones[status]}>{status.replace(/_/g, ' ')}</Badge>;
}

/** The statuses of a revision on its way, in order. */
const FLOW: RevisionStatus[] = ['AWAITING_SOURCE', 'QUEUED', 'AWAITING_BUILD', 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING', 'DEPLOYED'];
/** Where a revision stops: one of these (not the serving one) may be deployed again. */
const FINISHED: ReadonlySet<RevisionStatus> = new Set(['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'INTERRUPTED']);

/** The time of a log's first entry: when its step started (undefined: it has not). */
function useFirstEntry(deploymentId: string, revision: Revision, type: LogType): string | undefined {
  const first = useQuery({
    // With the status: a move of the revision reads it again.
    queryKey: [...keys.firstLog(deploymentId, revision.id, type), revision.status],
    queryFn: ({ signal }) => call<LogPage>(`${deploymentPath(deploymentId)}/revisions/${revision.id}/logs?type=${type}&limit=1`, { signal }),
  });
  return first.data?.logs[0]?.timestamp;
}

interface Step {
  status: string;
  at?: string | undefined;
  state: 'done' | 'now' | 'failed' | 'later';
  message?: string | undefined;
}

function stepsOf(revision: Revision, buildAt: string | undefined, deployAt: string | undefined): Step[] {
  const { status } = revision;
  const reached = FLOW.indexOf(status);
  const failedAt = status === 'BUILD_FAILED' ? 'BUILDING' : status === 'DEPLOY_FAILED' ? 'DEPLOYING' : undefined;
  const step = (name: 'BUILDING' | 'DEPLOYING', at: string | undefined): Step => {
    if (failedAt === name) return { status: status, at: revision.updated_at, state: 'failed', message: revision.status_message };
    const index = FLOW.indexOf(name);
    if (reached > index || (reached < 0 && at)) return { status: name, at, state: 'done' };
    if (reached === index) return { status: name, at, state: 'now' };
    return { status: name, state: 'later' };
  };
  const steps: Step[] = [
    {
      status: status === 'AWAITING_SOURCE' ? 'AWAITING_SOURCE' : 'QUEUED',
      at: revision.created_at,
      state: status === 'AWAITING_SOURCE' || status === 'QUEUED' ? 'now' : 'done',
    },
    step('BUILDING', buildAt),
  ];
  if (status === 'BUILD_FAILED') return steps;
  steps.push(step('DEPLOYING', deployAt));
  if (status === 'DEPLOY_FAILED') return steps;
  if (status === 'INTERRUPTED') {
    // Only the steps it reached before a newer revision replaced it.
    return [
      ...steps.filter((s) => s.state === 'done' || s.status === 'QUEUED').map((s) => ({ ...s, state: 'done' as const })),
      { status, at: revision.updated_at, state: 'failed', message: revision.status_message },
    ];
  }
  steps.push(status === 'DEPLOYED' ? { status: 'DEPLOYED', at: revision.updated_at, state: 'done' } : { status: 'DEPLOYED', state: 'later' });
  return steps;
}

const markers: Record<Step['state'], string> = {
  done: 'bg-green-700 dark:bg-green-400',
  now: 'bg-blue-700 animate-pulse dark:bg-blue-400',
  failed: 'bg-red-700 dark:bg-red-400',
  later: 'border-2 border-slate-400 bg-transparent',
};
const stateWords: Record<Step['state'], string> = { done: '', now: ' (in progress)', failed: '', later: ' (not yet)' };

/** The chosen revision's way from QUEUED to DEPLOYED or its failure, with the time of each step. */
export function RevisionTimeline({ deploymentId, revision }: { deploymentId: string; revision: Revision }) {
  const buildAt = useFirstEntry(deploymentId, revision, 'build');
  const deployAt = useFirstEntry(deploymentId, revision, 'deploy');
  return (
    <ol aria-label={`Status timeline of revision ${revision.id.slice(0, 8)}`} className="space-y-2" data-testid="timeline">
      {stepsOf(revision, buildAt, deployAt).map((step) => (
        <li key={step.status} className="flex items-start gap-3 text-sm" data-state={step.state}>
          <span aria-hidden className={`mt-1 inline-block size-3 shrink-0 rounded-full ${markers[step.state]}`} />
          <div>
            <span className={step.state === 'failed' ? 'font-semibold text-red-800 dark:text-red-300' : 'font-medium'}>{step.status.replace(/_/g, ' ')}</span>
            <span className="text-slate-700 dark:text-slate-300">
              {stateWords[step.state]}
              {step.at ? (
                <>
                  {' · '}
                  <time dateTime={step.at}>{new Date(step.at).toLocaleTimeString()}</time>
                </>
              ) : null}
            </span>
            {step.message ? <p className="mt-0.5 text-red-800 dark:text-red-300">{step.message}</p> : null}
          </div>
        </li>
      ))}
    </ol>
  );
}

export function Revisions({
  deployment,
  revisions,
  chosen,
  onChoose,
}: {
  deployment: DeploymentDetail;
  revisions: Revision[];
  chosen: string | undefined;
  onChoose: (revisionId: string) => void;
}) {
  const queryClient = useQueryClient();
  const [rollback, setRollback] = useState<Revision | null>(null);
  const redeploy = useMutation({
    mutationFn: (revision: Revision) => call<DeploymentDetail>(`${deploymentPath(deployment.id)}/revisions/${revision.id}/redeploy`, { method: 'POST' }),
    onSuccess: (updated) => {
      queryClient.setQueryData(keys.deployment(deployment.id), updated);
      void queryClient.invalidateQueries({ queryKey: keys.revisions(deployment.id) });
      setRollback(null);
      if (updated.latest_revision_id) onChoose(updated.latest_revision_id);
    },
  });
  return (
    <>
      <table className="w-full border-collapse text-left text-sm">
        <caption className="sr-only">Revisions, newest first</caption>
        <TableHead columns={['Revision', 'Status', 'Created', 'Last change', 'Actions']} />
        <tbody>
          {revisions.map((revision) => {
            const active = revision.id === deployment.active_revision_id;
            return (
              <tr
                key={revision.id}
                data-revision={revision.id}
                aria-current={revision.id === chosen ? 'true' : undefined}
                className="border-b border-slate-200 align-top aria-[current]:bg-slate-100 dark:border-slate-800 dark:aria-[current]:bg-slate-900"
              >
                <th scope="row" className="py-2 pr-4 font-mono text-xs font-normal">
                  {revision.id.slice(0, 8)}
                  {active ? (
                    <span className="ml-2 font-sans">
                      <Badge tone="good">serving</Badge>
                    </span>
                  ) : null}
                </th>
                <td className="py-2 pr-4">
                  <RevisionStatusBadge status={revision.status} />
                  {revision.status_message ? <p className="mt-1 max-w-sm text-xs text-slate-700 dark:text-slate-300">{revision.status_message}</p> : null}
                </td>
                <td className="py-2 pr-4 whitespace-nowrap">
                  <Time iso={revision.created_at} />
                </td>
                <td className="py-2 pr-4 whitespace-nowrap">
                  <Time iso={revision.updated_at} />
                </td>
                <td className="py-2">
                  <div className="flex flex-wrap gap-2">
                    <Button className="px-2 py-0.5 text-xs" aria-pressed={revision.id === chosen} onClick={() => onChoose(revision.id)}>
                      Timeline and logs<span className="sr-only"> of revision {revision.id.slice(0, 8)}</span>
                    </Button>
                    {!active && FINISHED.has(revision.status) ? (
                      <Button className="px-2 py-0.5 text-xs" onClick={() => setRollback(revision)}>
                        Redeploy<span className="sr-only"> revision {revision.id.slice(0, 8)}</span>
                      </Button>
                    ) : null}
                  </div>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <Dialog open={rollback !== null} title={`Redeploy revision ${rollback?.id.slice(0, 8) ?? ''}?`} onClose={() => setRollback(null)}>
        <p>
          A new revision is built from this revision&apos;s source and, once it is DEPLOYED, serves the deployment URL in place of the revision serving now (a
          rollback). Until then the serving revision keeps answering.
        </p>
        {redeploy.error ? <ErrorNote error={redeploy.error} /> : null}
        <div className="mt-4 flex justify-end gap-2">
          <Button onClick={() => setRollback(null)}>Cancel</Button>
          <Button tone="primary" disabled={redeploy.isPending} onClick={() => rollback && redeploy.mutate(rollback)}>
            Redeploy this revision
          </Button>
        </div>
      </Dialog>
    </>
  );
}
