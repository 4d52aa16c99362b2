/**
 * Studio's Runs tab: the deployment's queue — its running and pending runs of every thread, oldest
 * first (`POST /runs/search`) — with each run's thread, assistant, age and status; Cancel per run
 * (`POST /threads/{thread_id}/runs/{run_id}/cancel`) and "Cancel all pending" (`POST /runs/cancel`
 * with `status: pending`), both on the server. LangSmith's Studio has no such view.
 */
import type { Run } from '@langchain/langgraph-sdk';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { ErrorNote, TableHead, Time } from '../../components/ui';
import { useStudio } from '../context';
import { useAssistants } from '../graphs';
import { assistantLabel } from '../threads/run-form';
import { RunStatusBadge } from '../threads/run-status';
import { secondaryButtonClass } from '../threads/styles';
import { searchQueue } from './queue';

/** The queue is re-read this often while the tab is open (runs start and end on their own). */
const POLL_MS = 1_000;

export function RunsTab() {
  const { client, target } = useStudio();
  const queue = useQuery({
    queryKey: ['studio', target.key, 'queue'],
    queryFn: ({ signal }) => searchQueue(target, signal),
    refetchInterval: POLL_MS,
  });
  const assistants = useAssistants();
  const [failure, setFailure] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const act = async (action: () => Promise<unknown>) => {
    setBusy(true);
    try {
      await action();
      setFailure(undefined);
    } catch (e) {
      setFailure(e);
    }
    setBusy(false);
    await queue.refetch();
  };
  // `interrupt`: the server stops the run and keeps what it wrote (its thread stays usable).
  const cancel = (run: Run) => act(() => client.runs.cancel(run.thread_id, run.run_id, false, 'interrupt'));
  const cancelPending = () => act(() => client.runs.cancelMany({ status: 'pending', action: 'interrupt' }));

  const runs = queue.data?.runs;
  const pending = runs?.filter((r) => r.status === 'pending').length ?? 0;
  const running = (runs?.length ?? 0) - pending;
  const assistant = (id: string) => {
    const found = assistants.data?.find((a) => a.assistant_id === id);
    return found ? assistantLabel(found) : id.slice(0, 8);
  };
  return (
    <section aria-label="Queue" className="space-y-3 text-sm">
      <div className="flex flex-wrap items-center gap-3">
        <h2 className="font-semibold" data-testid="queue-summary">
          {runs === undefined ? 'Runs' : `${running} running · ${pending} queued`}
          {queue.data && queue.data.total > queue.data.runs.length ? ` (the oldest ${queue.data.runs.length} of ${queue.data.total} shown)` : ''}
        </h2>
        <button type="button" disabled={busy || pending === 0} onClick={() => void cancelPending()} className={`ml-auto ${secondaryButtonClass}`}>
          Cancel all pending
        </button>
      </div>
      {queue.error ? <ErrorNote error={queue.error} /> : null}
      {failure ? <ErrorNote error={failure} /> : null}
      {runs === undefined ? (
        <p>Loading the queue…</p>
      ) : runs.length === 0 ? (
        <p className="text-slate-700 dark:text-slate-300">No run is running or queued.</p>
      ) : (
        <table className="w-full text-left">
          <caption className="sr-only">Running and queued runs of every thread, oldest first</caption>
          <TableHead columns={['Run', 'Status', 'Thread', 'Assistant', 'Created', 'Action']} />
          <tbody>
            {runs.map((run) => (
              <tr key={run.run_id} data-run={run.run_id} data-status={run.status} className="border-t border-slate-200 dark:border-slate-800">
                <td className="py-1 font-mono text-xs">{run.run_id.slice(0, 8)}</td>
                <td>
                  <RunStatusBadge status={run.status} />
                </td>
                <td className="font-mono text-xs" data-thread={run.thread_id} title={run.thread_id}>
                  {run.thread_id.slice(0, 8)}
                </td>
                <td>{assistant(run.assistant_id)}</td>
                <td className="text-xs">
                  <Time iso={run.created_at} />
                </td>
                <td className="text-right">
                  <button
                    type="button"
                    disabled={busy}
                    onClick={() => void cancel(run)}
                    aria-label={`Cancel run ${run.run_id.slice(0, 8)}`}
                    className={`${secondaryButtonClass} px-2 py-0.5 text-xs`}
                  >
                    Cancel
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
