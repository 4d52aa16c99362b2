/**
 * The opened run (`GET /runs/{run_id}`, fetched when it is opened): name, type, status, start and
 * latency, its error first and in red, then inputs and outputs (messages as a chat, the rest as a
 * JSON tree), metadata, tags, tokens and cost.
 */
import { useQuery } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { call } from '../../api';
import { Chat, findMessages } from '../../components/chat';
import { JsonTree, LongText } from '../../components/json-tree';
import { Badge, ErrorNote, type Tone } from '../../components/ui';
import { formatCost, formatDuration } from '../../format';
import type { TraceRun } from './tree';

export interface RunDetail extends TraceRun {
  inputs?: unknown;
  outputs?: unknown;
  error?: string | null;
  extra?: { metadata?: Record<string, unknown> } & Record<string, unknown>;
  tags?: string[];
  prompt_tokens?: number | null;
  completion_tokens?: number | null;
  total_tokens?: number | null;
  prompt_cost?: number | null;
  total_cost?: number | null;
  completion_cost?: number | null;
}

export const runQuery = (runId: string) => ({
  queryKey: ['run', runId],
  queryFn: ({ signal }: { signal: AbortSignal }) => call<RunDetail>(`/runs/${encodeURIComponent(runId)}`, { signal }),
  staleTime: 30_000,
});

const STATUS_TONE: Record<string, Tone> = { success: 'good', error: 'bad', pending: 'busy' };

function Section({ title, children }: { title: string; children: ReactNode }) {
  return (
    <section className="mt-4">
      <h3 className="mb-1 text-sm font-semibold">{title}</h3>
      {children}
    </section>
  );
}

/** Inputs or outputs: the messages among them as a chat, everything else as a tree. */
function Payload({ value, label }: { value: unknown; label: string }) {
  if (value === undefined || value === null || (typeof value === 'object' && Object.keys(value).length === 0))
    return <p className="text-sm text-slate-700 dark:text-slate-300">None</p>;
  const found = findMessages(value);
  if (!found) return <JsonTree value={value} label={label} />;
  return (
    <>
      <Chat messages={found.messages} />
      {found.rest ? <JsonTree value={found.rest} label={`other ${label}`} /> : null}
    </>
  );
}

function Fact({ term, children }: { term: string; children: ReactNode }) {
  return (
    <div>
      <dt className="text-xs text-slate-700 dark:text-slate-300">{term}</dt>
      <dd className="text-sm">{children}</dd>
    </div>
  );
}

export function RunDetails({ runId }: { runId: string }) {
  const run = useQuery(runQuery(runId));
  if (run.error) return <ErrorNote error={run.error} />;
  if (!run.data) return <p className="text-sm text-slate-700 dark:text-slate-300">Loading the run…</p>;
  const r = run.data;
  const start = r.start_time ? new Date(r.start_time) : undefined;
  const latency = r.start_time && r.end_time ? Date.parse(r.end_time) - Date.parse(r.start_time) : undefined;
  const metadata = r.extra?.metadata;
  const tokens = [
    ['prompt', r.prompt_tokens],
    ['completion', r.completion_tokens],
    ['total', r.total_tokens],
  ].filter(([, n]) => typeof n === 'number') as [string, number][];
  const costs = [
    ['prompt', r.prompt_cost],
    ['completion', r.completion_cost],
    ['total', r.total_cost],
  ].filter(([, n]) => typeof n === 'number') as [string, number][];
  return (
    <article aria-labelledby="run-title" data-testid="run-details">
      <h2 id="run-title" className="text-lg font-semibold break-words">
        {r.name ?? r.id}
      </h2>
      <dl className="mt-2 grid grid-cols-2 gap-x-4 gap-y-2 sm:grid-cols-4">
        <Fact term="Type">{r.run_type ?? '—'}</Fact>
        <Fact term="Status">{r.status ? <Badge tone={STATUS_TONE[r.status] ?? 'none'}>{r.status}</Badge> : '—'}</Fact>
        <Fact term="Started">{start ? <time dateTime={r.start_time}>{start.toLocaleString()}</time> : '—'}</Fact>
        <Fact term="Latency">{latency === undefined ? 'running' : formatDuration(latency)}</Fact>
      </dl>
      {r.error ? (
        <section aria-labelledby="run-error" className="mt-4 rounded-md border border-red-300 bg-red-50 p-3 dark:border-red-800 dark:bg-red-950">
          <h3 id="run-error" className="text-sm font-semibold text-red-900 dark:text-red-200">
            Error
          </h3>
          <pre className="mt-1 max-h-64 overflow-auto font-mono text-xs text-red-900 dark:text-red-100" data-testid="run-error">
            <LongText text={r.error} />
          </pre>
        </section>
      ) : null}
      <Section title="Inputs">
        <Payload value={r.inputs} label="inputs" />
      </Section>
      <Section title="Outputs">
        <Payload value={r.outputs} label="outputs" />
      </Section>
      {metadata && Object.keys(metadata).length > 0 ? (
        <Section title="Metadata">
          <JsonTree value={metadata} label="metadata" />
        </Section>
      ) : null}
      {r.tags && r.tags.length > 0 ? (
        <Section title="Tags">
          <ul className="flex flex-wrap gap-1">
            {r.tags.map((tag) => (
              <li key={tag}>
                <Badge tone="none">{tag}</Badge>
              </li>
            ))}
          </ul>
        </Section>
      ) : null}
      {tokens.length > 0 || costs.length > 0 ? (
        <Section title="Tokens and cost">
          <dl className="grid grid-cols-3 gap-x-4 gap-y-2">
            {tokens.map(([kind, n]) => (
              <Fact key={`t-${kind}`} term={`${kind} tokens`}>
                {n.toLocaleString('en')}
              </Fact>
            ))}
            {costs.map(([kind, n]) => (
              <Fact key={`c-${kind}`} term={`${kind} cost`}>
                {formatCost(n)}
              </Fact>
            ))}
          </dl>
        </Section>
      ) : null}
    </article>
  );
}
