/**
 * The deployment's queue (`POST /runs/search`, a Berth extension of the agent server the SDK has no
 * method for): called with the SDK client's base URL and headers, as the SDK would call it.
 */
import type { Run } from '@langchain/langgraph-sdk';
import { detailText } from '../../api';
import type { StudioTarget } from '../context';

/** Most runs the queue view shows (the route's page limit). */
export const QUEUE_PAGE = 100;

/** The agent server's answer when it is no success; `status` as the SDK's errors carry it (no retry of a 4xx). */
export class QueueError extends Error {
  override name = 'QueueError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface Queue {
  /** Oldest first: running and pending runs of every thread. */
  runs: Run[];
  /** How many there are (more than `runs` holds when over a page). */
  total: number;
}

export async function searchQueue(target: StudioTarget, signal?: AbortSignal): Promise<Queue> {
  const res = await fetch(`${target.apiUrl}/runs/search`, {
    method: 'POST',
    headers: { ...target.headers, 'Content-Type': 'application/json', Accept: 'application/json' },
    body: JSON.stringify({ status: ['pending', 'running'], limit: QUEUE_PAGE }),
    ...(signal ? { signal } : {}),
  });
  const body: unknown = await res.json().catch(() => undefined);
  if (!res.ok) throw new QueueError(res.status, detailText(body) ?? `${res.status} ${res.statusText}`);
  const runs = body as Run[];
  return { runs, total: Number(res.headers.get('X-Pagination-Total') ?? runs.length) };
}
