/**
 * What the trace screens read of the trace API (`/sessions…`, `/runs…`; docs/reference/rest.md),
 * the time ranges they offer, and how numbers are shown.
 */

/** Statistics of a set of runs, as `include_stats` and `POST /sessions/stats` answer them. */
export interface RunStats {
  run_count: number;
  /** 0 to 1; null without runs. */
  error_rate: number | null;
  /** Seconds; null when no run finished. */
  latency_p50: number | null;
  latency_p99: number | null;
  total_tokens: number;
  total_cost: number;
  last_run_start_time: string | null;
}

export interface Project extends Partial<RunStats> {
  id: string;
  name: string;
  description: string | null;
  start_time: string;
}

export interface ProjectStats {
  start_time: string;
  end_time: string;
  bucket_seconds: number;
  projects: { session_id: string; stats: RunStats; buckets: { start_time: string; stats: RunStats }[] }[];
}

/** A run as `POST /runs/query` answers it: only the fields selected (and `id`). */
export interface Run {
  id: string;
  trace_id?: string;
  name?: string;
  run_type?: string;
  status?: string;
  start_time?: string;
  end_time?: string | null;
  total_tokens?: number | null;
  total_cost?: number | null;
  tags?: string[];
  error?: string | null;
  extra?: { metadata?: Record<string, unknown> };
}

export interface RunPage {
  runs: Run[];
  cursors: { next: string | null };
}

/** The 422 of `POST /runs/filter/validate` and `POST /runs/query`: where the filter stops making sense. */
export interface FilterProblem {
  detail: { loc: (string | number)[]; msg: string; ctx?: { position?: number; expected?: string; found?: string } }[];
}

/** The ranges the projects page offers; `custom` takes `from` and `to`. */
export const RANGES = { '1h': 3_600_000, '24h': 86_400_000, '7d': 7 * 86_400_000, '30d': 30 * 86_400_000 } as const;
export type RangeName = keyof typeof RANGES | 'custom';
export const RANGE_LABELS: Record<RangeName, string> = {
  '1h': 'Last hour',
  '24h': 'Last 24 hours',
  '7d': 'Last 7 days',
  '30d': 'Last 30 days',
  custom: 'Custom',
};

/** An ISO time from a search param, or undefined when it is not one. */
export function isoParam(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length > 40) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
}
