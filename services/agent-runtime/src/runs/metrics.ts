/**
 * The agent server's run metrics (see docs/operate/monitor.md). Labels are a run's status only: a
 * graph, thread or run id would make a series per tenant-chosen value.
 */
import { DURATION_BUCKETS, counter, gauge, histogram } from '@berth/metrics';
import type { EventBroker } from '@berth/broker';
import type { Logger } from '@berth/log';
import type { RunStore } from '../storage/runs.js';

export const runsFinished = counter<'status'>({
  name: 'berth_agent_runs_finished_total',
  help: 'Runs that ended on this server, by final status (success, error, timeout, interrupted)',
  labelNames: ['status'],
});

export const runDuration = histogram<'status'>({
  name: 'berth_agent_run_duration_seconds',
  help: "Runs' time from their start on a worker to their recorded end, by final status",
  labelNames: ['status'],
  buckets: DURATION_BUCKETS,
});

export const runFirstEvent = histogram({
  name: 'berth_agent_run_first_event_seconds',
  help: "Runs' time from their start on a worker to their graph's first streamed chunk",
});

const runsQueued = gauge<'status'>({
  name: 'berth_agent_runs',
  help: 'Unfinished runs of the deployment, by status: pending (the queue depth) and running',
  labelNames: ['status'],
});

const oldestPending = gauge({
  name: 'berth_agent_oldest_pending_run_age_seconds',
  help: 'How long the oldest pending run of the deployment has waited (0 when none waits)',
});

const subscribers = gauge({
  name: 'berth_agent_stream_subscribers',
  help: "Clients following runs' event streams on this server",
});

/** Registers what a running server reads at each scrape; returns the function removing it. */
export function watchRuns(runs: RunStore, broker: EventBroker, log: Logger): () => void {
  // One query per scrape, shared by both gauges; failing, both are left out of that scrape.
  let reading: Promise<Awaited<ReturnType<RunStore['queueStats']>>> | undefined;
  const stats = () => {
    reading ??= runs
      .queueStats()
      .catch((error: unknown) => {
        log.warn({ err: error }, 'could not read the run queue for the metrics');
        throw error;
      })
      .finally(() => setImmediate(() => (reading = undefined)));
    return reading;
  };
  const removers = [
    runsQueued.source(async () => {
      const { pending, running } = await stats();
      return [
        { labels: { status: 'pending' }, value: pending },
        { labels: { status: 'running' }, value: running },
      ];
    }),
    oldestPending.source(async () => [{ value: (await stats()).oldestPendingSeconds }]),
    subscribers.source(() => [{ value: broker.subscriberCount() }]),
  ];
  return () => removers.forEach((remove) => remove());
}
