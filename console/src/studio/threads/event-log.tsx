/**
 * The events a run streamed, as the server sent them (SSE event name and data), in a collapsible
 * log: how many of each kind came, and each event's data — what each stream mode sends.
 */
import { JsonTree } from '../../components/json-tree';
import type { StreamedEvent } from './use-run-stream';

/** The part of an event shown on its line; the whole data opens below it. */
const PREVIEW = 160;

export function EventLog({ events, count }: { events: StreamedEvent[]; count: number }) {
  if (count === 0) return null;
  const byKind = new Map<string, number>();
  for (const { event } of events) byKind.set(event, (byKind.get(event) ?? 0) + 1);
  return (
    <details className="rounded-md border border-slate-300 p-2 text-sm dark:border-slate-700" data-testid="event-log">
      <summary className="cursor-pointer font-medium">
        Events ({count}
        {count > events.length ? `, the latest ${events.length} kept` : ''})
      </summary>
      <p className="mt-1 font-mono text-xs text-slate-700 dark:text-slate-300" aria-label="Events by kind">
        {[...byKind].map(([kind, n]) => `${kind} ×${n}`).join(' · ')}
      </p>
      <ol className="mt-2 max-h-96 space-y-1 overflow-auto" aria-label="Events">
        {events.map((e) => (
          <li key={e.seq} data-event={e.event} data-event-run={e.runId} className="font-mono text-xs">
            <details>
              <summary className="cursor-pointer">
                <span className="font-semibold">{e.event}</span> <span className="text-slate-700 dark:text-slate-300">{preview(e.data)}</span>
              </summary>
              <JsonTree value={e.data} label={e.event} />
            </details>
          </li>
        ))}
      </ol>
    </details>
  );
}

function preview(data: unknown): string {
  const text = JSON.stringify(data) ?? String(data);
  return text.length > PREVIEW ? `${text.slice(0, PREVIEW)}…` : text;
}
