/**
 * The runs table's columns: what each shows, and the run fields it needs — the table asks the API
 * for those only (`select` of `POST /runs/query`), so a narrow table stays fast on a big project.
 */
import type { ReactNode } from 'react';
import { Badge } from '../../components/ui';
import { formatCost, formatCount, formatSeconds } from '../../format';
import type { Run } from './data';

export interface Column {
  label: string;
  /** Fields of the run it reads. */
  fields: string[];
  /** Tailwind width of its cell. */
  width: string;
  cell: (run: Run) => ReactNode;
}

const latency = (run: Run) => (run.start_time && run.end_time ? (Date.parse(run.end_time) - Date.parse(run.start_time)) / 1000 : null);
const statusTone = { success: 'good', error: 'bad', pending: 'busy' } as const;

export const COLUMNS = {
  name: { label: 'Name', fields: ['name'], width: 'w-56', cell: (r) => r.name ?? '—' },
  type: { label: 'Type', fields: ['run_type'], width: 'w-20', cell: (r) => r.run_type ?? '—' },
  status: {
    label: 'Status',
    fields: ['status'],
    width: 'w-24',
    cell: (r) => (r.status ? <Badge tone={statusTone[r.status as keyof typeof statusTone] ?? 'none'}>{r.status}</Badge> : '—'),
  },
  start: {
    label: 'Start',
    fields: ['start_time'],
    width: 'w-44',
    cell: (r) => (r.start_time ? <time dateTime={r.start_time}>{new Date(r.start_time).toLocaleString()}</time> : '—'),
  },
  latency: { label: 'Latency', fields: ['start_time', 'end_time'], width: 'w-24', cell: (r) => formatSeconds(latency(r)) },
  tokens: { label: 'Tokens', fields: ['total_tokens'], width: 'w-20', cell: (r) => formatCount(r.total_tokens) },
  cost: { label: 'Cost', fields: ['total_cost'], width: 'w-20', cell: (r) => formatCost(r.total_cost) },
  tags: { label: 'Tags', fields: ['tags'], width: 'w-40', cell: (r) => (r.tags?.length ? r.tags.join(', ') : '—') },
  thread: {
    label: 'Thread',
    fields: ['extra'],
    width: 'w-40',
    cell: (r) => {
      const thread = r.extra?.metadata?.thread_id;
      return typeof thread === 'string' ? <span className="font-mono text-xs">{thread}</span> : '—';
    },
  },
  error: { label: 'Error', fields: ['error'], width: 'w-64', cell: (r) => r.error ?? '' },
} satisfies Record<string, Column>;

export type ColumnKey = keyof typeof COLUMNS;
export const COLUMN_KEYS = Object.keys(COLUMNS) as ColumnKey[];
export const DEFAULT_COLUMNS: ColumnKey[] = ['name', 'status', 'start', 'latency', 'tokens', 'cost'];

/** The columns named in a `cols` search param (comma-separated, in the table's order), or the default. */
export function columnsOf(param: string | undefined): ColumnKey[] {
  if (param === undefined) return DEFAULT_COLUMNS;
  const chosen = new Set(param.split(','));
  return COLUMN_KEYS.filter((key) => chosen.has(key));
}

/** The fields to ask for: the chosen columns' and the trace id every row links with. */
export function selectOf(columns: ColumnKey[]): string[] {
  return [...new Set(['trace_id', ...columns.flatMap((key) => COLUMNS[key].fields)])];
}
