/** Small pieces the pages share. */
import type { ReactNode } from 'react';
import type { DeploymentStatus } from '../types';

const tones = {
  good: 'bg-green-100 text-green-900 dark:bg-green-950 dark:text-green-200',
  busy: 'bg-blue-100 text-blue-900 dark:bg-blue-950 dark:text-blue-200',
  warn: 'bg-amber-100 text-amber-900 dark:bg-amber-950 dark:text-amber-200',
  bad: 'bg-red-100 text-red-900 dark:bg-red-950 dark:text-red-200',
  none: 'bg-slate-200 text-slate-900 dark:bg-slate-800 dark:text-slate-200',
} as const;

export type Tone = keyof typeof tones;

export function Badge({ tone, children }: { tone: Tone; children: ReactNode }) {
  return <span className={`inline-block rounded px-2 py-0.5 text-xs font-medium ${tones[tone]}`}>{children}</span>;
}

const deploymentTones: Record<DeploymentStatus, Tone> = {
  READY: 'good',
  AWAITING_DEPLOY: 'busy',
  UNHEALTHY: 'warn',
  LATEST_FAILED: 'warn',
  FAILED: 'bad',
  UNKNOWN: 'none',
};

/** Deployment statuses that need someone's attention. */
export const UNHEALTHY_STATUSES: ReadonlySet<DeploymentStatus> = new Set(['UNHEALTHY', 'FAILED', 'LATEST_FAILED']);

export function DeploymentStatusBadge({ status }: { status: DeploymentStatus }) {
  return <Badge tone={deploymentTones[status]}>{status.replace(/_/g, ' ')}</Badge>;
}

/** A time as "3 min ago", with the exact time on hover and for screen readers. */
export function Time({ iso }: { iso: string }) {
  const date = new Date(iso);
  return (
    <time dateTime={iso} title={date.toLocaleString()}>
      {relative(date)}
    </time>
  );
}

const units: [Intl.RelativeTimeFormatUnit, number][] = [
  ['day', 86_400_000],
  ['hour', 3_600_000],
  ['minute', 60_000],
];
const format = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });

function relative(date: Date): string {
  const ms = date.getTime() - Date.now();
  for (const [unit, size] of units) if (Math.abs(ms) >= size) return format.format(Math.round(ms / size), unit);
  return 'just now';
}

export function ErrorNote({ error }: { error: unknown }) {
  return (
    <p role="alert" className="rounded-md bg-red-50 p-3 text-sm text-red-800 dark:bg-red-950 dark:text-red-200">
      {error instanceof Error ? error.message : String(error)}
    </p>
  );
}

export function PageTitle({ children }: { children: ReactNode }) {
  return <h1 className="text-2xl font-semibold tracking-tight">{children}</h1>;
}

/** A table's header row: one column heading each. */
export function TableHead({ columns }: { columns: string[] }) {
  return (
    <thead className="border-b border-slate-300 text-slate-700 dark:border-slate-700 dark:text-slate-300">
      <tr>
        {columns.map((column) => (
          <th key={column} scope="col" className="py-2 pr-4 font-medium">
            {column}
          </th>
        ))}
      </tr>
    </thead>
  );
}
