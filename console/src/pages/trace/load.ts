/**
 * Loading a trace's runs with `POST /runs/query` (`trace` = the trace, only the fields the tree and
 * the waterfall show): the first page at once, then the rest in windows of start time side by side.
 */
import { call } from '../../api';
import { TRACE_RUN_FIELDS, type TraceRun } from './tree';

/** Runs loaded at most: a trace bigger than this shows its first ones and says so. */
export const MAX_TRACE_RUNS = 20_000;
const PAGE = 100;

interface RunsPage {
  runs: TraceRun[];
  cursors: { next: string | null };
}

/** Windows of start time a big trace is loaded in, side by side (a browser opens 6 connections to a host). */
const WINDOWS = 6;

/** The page of the trace's runs asked for (100, the API's largest, in start order unless told). */
const runsQuery =
  (projectId: string, traceId: string, signal: AbortSignal) =>
  (extra: Record<string, unknown>): Promise<RunsPage> =>
    call<RunsPage>('/runs/query', {
      method: 'POST',
      body: { session: [projectId], trace: traceId, select: TRACE_RUN_FIELDS, order: 'asc', limit: PAGE, ...extra },
      signal,
    });

export interface TraceHead {
  /** The first runs in start order: a tree of its own (a parent starts before its children). */
  first: RunsPage;
  /** The run that started last. */
  latest: TraceRun | undefined;
}

/** The trace's first page of runs, and the run that started last (where the rest ends). */
export async function traceHead(projectId: string, traceId: string, signal: AbortSignal): Promise<TraceHead> {
  const query = runsQuery(projectId, traceId, signal);
  const [first, latest] = await Promise.all([query({}), query({ order: 'desc', limit: 1 })]);
  return { first, latest: latest.runs[0] };
}

export interface LoadedRuns {
  runs: TraceRun[];
  /** More than MAX_TRACE_RUNS: the first ones only. */
  truncated: boolean;
}

/**
 * Every run of the trace, given its head. Pages follow each other by cursor, so a trace of 5,000
 * runs would be 50 calls in a row: past the first page, the rest of the trace's time is cut into
 * windows (`start_time` ≤ a run's start < `end_time`: each run in exactly one) paged side by side.
 */
export async function traceRest(projectId: string, traceId: string, head: TraceHead, signal: AbortSignal): Promise<LoadedRuns> {
  const query = runsQuery(projectId, traceId, signal);
  const { first, latest } = head;
  const lastStart = latest?.start_time;
  const from = first.runs.at(-1)?.start_time;
  if (!first.cursors.next || !from || !lastStart) return { runs: first.runs, truncated: false };
  // The first page's runs before its last start; the windows take it from there (times are whole ms).
  const lo = Date.parse(from);
  const hi = Date.parse(lastStart);
  const runs = first.runs.filter((r) => r.start_time && Date.parse(r.start_time) < lo);
  const bounds = Array.from({ length: WINDOWS + 1 }, (_, i) => Math.floor(lo + ((hi - lo) * i) / WINDOWS));
  let truncated = false;
  const starts = [...new Set(bounds.slice(0, -1))];
  const windows = starts.map(async (start, i) => {
    const end = starts[i + 1];
    let cursor: string | null = null;
    do {
      const page: RunsPage = await query({
        start_time: new Date(start).toISOString(),
        ...(end !== undefined ? { end_time: new Date(end).toISOString() } : {}),
        ...(cursor ? { cursor } : {}),
      });
      runs.push(...page.runs);
      cursor = page.cursors.next;
    } while (cursor && runs.length < MAX_TRACE_RUNS);
    if (cursor) truncated = true;
  });
  await Promise.all(windows);
  return { runs, truncated };
}
