/**
 * One thread: its messages as a chat (tokens streaming in while a run writes them) beside its
 * state (the values as JSON), the form that starts a run (run-form.tsx), the thread's
 * runs — queued ones too — with Cancel (the run is cancelled on the server, not just no longer
 * followed), and its pending interrupts to answer.
 */
import type { Assistant, Client, Run } from '@langchain/langgraph-sdk';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Chat, findMessages, type ChatMessage } from '../../components/chat';
import { JsonTree } from '../../components/json-tree';
import { ErrorNote, Time } from '../../components/ui';
import { useStudio } from '../context';
import { EventLog } from './event-log';
import { History } from './history';
import { Interrupts, pendingInterrupts } from './interrupts';
import { RunForm } from './run-form';
import { RunStatusBadge, unfinished } from './run-status';
import { secondaryButtonClass } from './styles';
import { messageId, threadKeys, useRunStream } from './use-run-stream';

/** How often the runs list is re-read while a run is queued or running (to see queued runs appear and end). */
const ACTIVE_POLL_MS = 1_000;
const IDLE_POLL_MS = 5_000;

export function ThreadView({ threadId, assistants, assistantId }: { threadId: string; assistants: Assistant[]; assistantId: string | undefined }) {
  const { client, target } = useStudio();
  const keys = threadKeys(target.key, threadId);
  const state = useQuery({ queryKey: keys.state, queryFn: ({ signal }) => client.threads.getState(threadId, undefined, { signal }) });
  const runs = useQuery({
    queryKey: keys.runs,
    queryFn: ({ signal }) => client.runs.list(threadId, { limit: 20, signal }),
    refetchInterval: (query) => (query.state.data?.some(unfinished) ? ACTIVE_POLL_MS : IDLE_POLL_MS),
  });
  const { live, start } = useRunStream(client, threadId);
  const streaming = live.status === 'running';
  const values = streaming && live.values !== undefined ? live.values : state.data?.values;
  const found = findMessages(values);
  // Tokens of a message the state holds already are not shown twice.
  const held = new Set(
    Array.isArray((values as { messages?: unknown } | undefined)?.messages) ? (values as { messages: unknown[] }).messages.map(messageId) : [],
  );
  const writing = live.partial.filter((m) => !m.id || !held.has(m.id));
  const messages: ChatMessage[] = [...(found?.messages ?? []), ...writing.map((m) => ({ role: m.role, content: m.text, toolCalls: [] }))];
  const interrupts = streaming ? [] : pendingInterrupts(state.data?.tasks);
  // A resume goes to the assistant of the run that stopped; a new run, to the one chosen.
  const lastAssistant = runs.data?.[0]?.assistant_id ?? assistantId;
  // The run followed here ended because someone cancelled it (here, or any API client).
  const cancelled = !streaming && live.runId !== undefined && runs.data?.find((r) => r.run_id === live.runId)?.status === 'interrupted';

  return (
    <div className="grid gap-4 xl:grid-cols-[1fr_24rem]">
      <section aria-label="Conversation" className="min-w-0 space-y-3">
        {state.error ? <ErrorNote error={state.error} /> : null}
        {messages.length > 0 ? <Chat messages={messages} /> : <p className="text-sm text-slate-700 dark:text-slate-300">No messages yet.</p>}
        {streaming && writing.length > 0 ? (
          <p className="sr-only" aria-live="polite">
            The assistant is writing.
          </p>
        ) : null}
        <Interrupts
          interrupts={interrupts}
          busy={streaming}
          onAnswer={(resume) => (lastAssistant ? void start(lastAssistant, { command: { resume } }) : undefined)}
        />
        <RunStatusLine status={cancelled ? 'cancelled' : live.status} error={cancelled ? undefined : live.error} />
        <RunForm assistants={assistants} assistantId={assistantId} busy={streaming} onRun={start} />
      </section>
      <aside className="min-w-0 space-y-4">
        <section aria-label="State" className="rounded-md border border-slate-300 p-3 dark:border-slate-700">
          <h3 className="mb-2 text-sm font-semibold">State{streaming ? ' (live)' : ''}</h3>
          {values === undefined ? <p className="text-sm">Loading the state…</p> : <JsonTree value={values} label="values" />}
          {state.data && state.data.next.length > 0 ? (
            <p className="mt-2 text-xs text-slate-700 dark:text-slate-300">Next: {state.data.next.join(', ')}</p>
          ) : null}
        </section>
        <RunsList client={client} threadId={threadId} runs={runs.data} error={runs.error} onChanged={() => void runs.refetch()} />
        <EventLog events={live.events} count={live.eventCount} />
      </aside>
      <div className="min-w-0 xl:col-span-2">
        <History threadId={threadId} assistantId={lastAssistant} busy={streaming} onRun={(id, request) => void start(id, request)} />
      </div>
    </div>
  );
}

function RunStatusLine({ status, error }: { status: string; error: string | undefined }) {
  const text = { idle: '', running: 'Running…', done: 'The run ended.', error: 'The run failed.', cancelled: 'The run was cancelled.' }[status] ?? '';
  return (
    <>
      <p role="status" data-testid="thread-run-status" data-status={status} className="text-sm">
        {text}
      </p>
      {error ? <ErrorNote error={error} /> : null}
    </>
  );
}

/** The thread's latest runs, newest first; queued and running ones with Cancel. */
function RunsList({
  client,
  threadId,
  runs,
  error,
  onChanged,
}: {
  client: Client;
  threadId: string;
  runs: Run[] | undefined;
  error: unknown;
  onChanged: () => void;
}) {
  const queries = useQueryClient();
  const { target } = useStudio();
  const [failure, setFailure] = useState<unknown>();
  const cancel = async (run: Run) => {
    try {
      // `interrupt`: the server stops the run and keeps what it wrote (the thread stays usable).
      await client.runs.cancel(threadId, run.run_id, false, 'interrupt');
      setFailure(undefined);
    } catch (e) {
      setFailure(e);
    }
    onChanged();
    await queries.invalidateQueries({ queryKey: threadKeys(target.key, threadId).state });
  };
  const queued = runs?.filter((r) => r.status === 'pending').length ?? 0;
  return (
    <section aria-label="Runs" className="rounded-md border border-slate-300 p-3 text-sm dark:border-slate-700">
      <h3 className="mb-2 font-semibold">Runs{queued > 0 ? ` · ${queued} queued` : ''}</h3>
      {error ? <ErrorNote error={error} /> : null}
      {failure ? <ErrorNote error={failure} /> : null}
      {runs === undefined ? (
        <p>Loading the runs…</p>
      ) : runs.length === 0 ? (
        <p className="text-slate-700 dark:text-slate-300">No runs yet.</p>
      ) : (
        <ul className="space-y-1">
          {runs.map((run) => (
            <li key={run.run_id} data-run={run.run_id} data-status={run.status} className="flex items-center gap-2">
              <span className="font-mono text-xs">{run.run_id.slice(0, 8)}</span>
              <RunStatusBadge status={run.status} />
              <span className="text-xs text-slate-700 dark:text-slate-300">
                <Time iso={run.created_at} />
              </span>
              {unfinished(run) ? (
                <button
                  type="button"
                  onClick={() => void cancel(run)}
                  aria-label={`Cancel run ${run.run_id.slice(0, 8)}`}
                  className={`ml-auto ${secondaryButtonClass} px-2 py-0.5 text-xs`}
                >
                  Cancel
                </button>
              ) : null}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
