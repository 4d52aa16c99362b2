/**
 * Studio's Crons tab: the agent server's scheduled runs (`client.crons`), listed with their next
 * run; created from a form (assistant, schedule, input, optionally a thread), paused and resumed
 * (`update` with `enabled`: a paused cron has no next run and fires no more until resumed), and
 * deleted after a confirmation.
 */
import type { Assistant, Cron } from '@langchain/langgraph-sdk';
import { useQuery } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { Badge, ErrorNote, TableHead, Time } from '../../components/ui';
import { Button, Dialog, inputClass } from '../../components/controls';
import { useStudio } from '../context';
import { describeError } from './errors';
import { JsonField, parseJsonObject } from './json-field';
import { useWrite } from './write';

/** Crons per page. */
const PAGE = 25;

const cronsKey = (targetKey: string) => ['studio', targetKey, 'crons'] as const;

/** `graph_id` for a system assistant, else its name and graph. */
const assistantName = (a: Assistant) => (a.metadata?.created_by === 'system' ? a.graph_id : `${a.name} (${a.graph_id})`);

export function CronsTab() {
  const { client, target } = useStudio();
  const [page, setPage] = useState(0);
  const assistants = useQuery({
    queryKey: ['studio', target.key, 'assistants', 'all'],
    queryFn: ({ signal }) => client.assistants.search({ limit: 100, signal }),
  });
  const crons = useQuery({
    queryKey: [...cronsKey(target.key), page],
    // One more than a page: whether there is a next one.
    queryFn: ({ signal }) => client.crons.search({ limit: PAGE + 1, offset: page * PAGE, sortBy: 'created_at', sortOrder: 'desc', signal }),
  });
  const names = new Map(assistants.data?.map((a) => [a.assistant_id, assistantName(a)]));
  const shown = crons.data?.slice(0, PAGE) ?? [];
  return (
    <div className="space-y-6">
      <section aria-labelledby="crons-list" className="space-y-2">
        <h2 id="crons-list" className="text-lg font-semibold">
          Crons
        </h2>
        {crons.error ? <ErrorNote error={describeError(crons.error)} /> : null}
        {!crons.data && !crons.error ? <p>Loading the crons…</p> : null}
        {crons.data && shown.length === 0 ? <p>No crons on this agent server.</p> : null}
        {shown.length ? (
          <table className="w-full border-collapse text-left text-sm">
            <caption className="sr-only">Crons, newest first</caption>
            <TableHead columns={['Schedule', 'Assistant', 'Thread', 'Next run', 'State', 'Actions']} />
            <tbody>
              {shown.map((cron) => (
                <CronRow key={cron.cron_id} cron={cron} assistant={names.get(cron.assistant_id)} />
              ))}
            </tbody>
          </table>
        ) : null}
        {page > 0 || (crons.data?.length ?? 0) > PAGE ? (
          <div className="flex items-center gap-2 text-sm">
            <Button disabled={page === 0} onClick={() => setPage(page - 1)}>
              Previous page
            </Button>
            <span>Page {page + 1}</span>
            <Button disabled={(crons.data?.length ?? 0) <= PAGE} onClick={() => setPage(page + 1)}>
              Next page
            </Button>
          </div>
        ) : null}
      </section>
      <NewCron assistants={assistants.data ?? []} />
    </div>
  );
}

function CronRow({ cron, assistant }: { cron: Cron; assistant: string | undefined }) {
  const { client, target } = useStudio();
  const [deleting, setDeleting] = useState(false);
  const toggle = useWrite(cronsKey(target.key), (enabled: boolean) => client.crons.update(cron.cron_id, { enabled }));
  const remove = useWrite(
    cronsKey(target.key),
    () => client.crons.delete(cron.cron_id),
    () => setDeleting(false),
  );
  const name = `cron ${cron.schedule} (${cron.cron_id.slice(0, 8)})`;
  const state = !cron.enabled ? 'paused' : cron.next_run_date ? 'enabled' : 'ended';
  return (
    <tr data-cron={cron.cron_id} data-state={state} className="border-b border-slate-200 align-top dark:border-slate-800">
      <th scope="row" className="py-2 pr-4 font-normal">
        <span className="font-mono">{cron.schedule}</span>
        <span className="block text-xs text-slate-700 dark:text-slate-300">{cron.timezone ?? 'UTC'}</span>
      </th>
      <td className="py-2 pr-4">{assistant ?? <span className="font-mono text-xs">{cron.assistant_id}</span>}</td>
      <td className="py-2 pr-4">
        {cron.thread_id ? (
          <span className="font-mono text-xs" title={cron.thread_id}>
            {cron.thread_id.slice(0, 8)}
          </span>
        ) : (
          <span className="text-slate-700 dark:text-slate-300">a new thread each run</span>
        )}
      </td>
      <td className="py-2 pr-4 whitespace-nowrap" data-testid="next-run">
        {cron.next_run_date ? (
          <>
            <time dateTime={cron.next_run_date}>{new Date(cron.next_run_date).toLocaleString()}</time>
            <span className="block text-xs text-slate-700 dark:text-slate-300">
              <Time iso={cron.next_run_date} />
            </span>
          </>
        ) : (
          <span className="text-slate-700 dark:text-slate-300">none</span>
        )}
      </td>
      <td className="py-2 pr-4">
        <Badge tone={state === 'enabled' ? 'good' : 'none'}>{state}</Badge>
      </td>
      <td className="py-2">
        <div className="flex flex-wrap gap-2">
          <Button className="px-2 py-0.5 text-xs" disabled={toggle.isPending} onClick={() => toggle.mutate(!cron.enabled)}>
            {cron.enabled ? 'Pause' : 'Resume'}
            <span className="sr-only"> {name}</span>
          </Button>
          <Button className="px-2 py-0.5 text-xs" tone="danger" onClick={() => setDeleting(true)}>
            Delete<span className="sr-only"> {name}</span>
          </Button>
        </div>
        {toggle.error ? <ErrorNote error={describeError(toggle.error)} /> : null}
        <Dialog open={deleting} title={`Delete ${name}?`} onClose={() => setDeleting(false)}>
          <p>The cron is deleted: it starts no more runs. Runs it already started, and their threads, stay.</p>
          {remove.error ? <ErrorNote error={describeError(remove.error)} /> : null}
          <div className="mt-4 flex justify-end gap-2">
            <Button onClick={() => setDeleting(false)}>Cancel</Button>
            <Button tone="danger" disabled={remove.isPending} onClick={() => remove.mutate(undefined)}>
              Delete this cron
            </Button>
          </div>
        </Dialog>
      </td>
    </tr>
  );
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface CronInput {
  assistantId: string;
  schedule: string;
  timezone: string;
  threadId: string;
  input: Record<string, unknown>;
}

/** The form that creates a cron; the server checks the schedule and the time zone and says what is wrong. */
function NewCron({ assistants }: { assistants: Assistant[] }) {
  const { client, target } = useStudio();
  const [chosen, setChosen] = useState('');
  const [schedule, setSchedule] = useState('');
  const [timezone, setTimezone] = useState('');
  const [threadId, setThreadId] = useState('');
  const [input, setInput] = useState('{}');
  const [created, setCreated] = useState<string>();
  const parsed = parseJsonObject(input, {});
  const assistantId = chosen || assistants[0]?.assistant_id || '';
  const threadProblem = threadId.trim() && !UUID.test(threadId.trim()) ? 'A thread ID (a UUID), or empty for a new thread each run' : undefined;
  const create = useWrite(
    cronsKey(target.key),
    async (cron: CronInput) => {
      const payload = { schedule: cron.schedule, input: cron.input, ...(cron.timezone ? { timezone: cron.timezone } : {}) };
      const made = cron.threadId
        ? await client.crons.createForThread(cron.threadId, cron.assistantId, payload)
        : await client.crons.create(cron.assistantId, payload);
      setCreated(made.cron_id);
    },
    () => setSchedule(''),
  );
  const ids = { assistant: useId(), schedule: useId(), timezone: useId(), thread: useId() };
  const ready = assistantId !== '' && schedule.trim() !== '' && parsed.value !== undefined && !threadProblem;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (!ready) return;
    setCreated(undefined);
    create.mutate({ assistantId, schedule: schedule.trim(), timezone: timezone.trim(), threadId: threadId.trim(), input: parsed.value! });
  };
  const field = 'space-y-1';
  const labelClass = 'block text-sm font-medium';
  const note = 'text-xs text-slate-700 dark:text-slate-300';
  return (
    <section aria-labelledby="crons-new" className="max-w-2xl space-y-3">
      <h2 id="crons-new" className="text-lg font-semibold">
        New cron
      </h2>
      <form onSubmit={submit} className="space-y-3" aria-labelledby="crons-new">
        <div className="grid gap-3 sm:grid-cols-2">
          <div className={field}>
            <label htmlFor={ids.assistant} className={labelClass}>
              Assistant
            </label>
            <select id={ids.assistant} value={assistantId} onChange={(e) => setChosen(e.target.value)} className={`${inputClass} w-full`}>
              {assistants.map((a) => (
                <option key={a.assistant_id} value={a.assistant_id}>
                  {assistantName(a)}
                </option>
              ))}
            </select>
          </div>
          <div className={field}>
            <label htmlFor={ids.schedule} className={labelClass}>
              Schedule
            </label>
            <input
              id={ids.schedule}
              value={schedule}
              onChange={(e) => setSchedule(e.target.value)}
              placeholder="0 9 * * 1-5"
              aria-describedby={`${ids.schedule}-note`}
              className={`${inputClass} w-full font-mono`}
            />
            <p id={`${ids.schedule}-note`} className={note}>
              Minute, hour, day of month, month, day of week; or @daily, @hourly…
            </p>
          </div>
          <div className={field}>
            <label htmlFor={ids.timezone} className={labelClass}>
              Time zone (optional)
            </label>
            <input
              id={ids.timezone}
              value={timezone}
              onChange={(e) => setTimezone(e.target.value)}
              placeholder="UTC"
              className={`${inputClass} w-full font-mono`}
            />
          </div>
          <div className={field}>
            <label htmlFor={ids.thread} className={labelClass}>
              Thread (optional)
            </label>
            <input
              id={ids.thread}
              value={threadId}
              onChange={(e) => setThreadId(e.target.value)}
              aria-invalid={threadProblem ? true : undefined}
              aria-describedby={`${ids.thread}-note`}
              className={`${inputClass} w-full font-mono`}
            />
            <p id={`${ids.thread}-note`} className={threadProblem ? 'text-xs text-red-800 dark:text-red-300' : note}>
              {threadProblem ?? 'Each run on this thread; empty: a new thread each run.'}
            </p>
          </div>
        </div>
        <JsonField label="Input (JSON object)" text={input} onText={setInput} problem={parsed.problem} rows={4} hint="The input of each run." />
        {create.error ? <ErrorNote error={describeError(create.error)} /> : null}
        <Button type="submit" tone="primary" disabled={!ready || create.isPending}>
          Create cron
        </Button>
        <p role="status" className="text-sm">
          {created ? `Created cron ${created.slice(0, 8)}.` : ''}
        </p>
      </form>
    </section>
  );
}
