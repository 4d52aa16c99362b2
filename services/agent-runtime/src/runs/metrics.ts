/**
 * The agent server's run metrics (see docs/operate/monitor.md). Labels are a run's status only: a
 * graph, thread or run id would make a series per tenant-chosen value.
 */
import { DURATION_BUCKETS, counter, gauge, histogram, readingsOf } from '@berth/metrics';
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

export const checkpointWrite = histogram({
  name: 'berth_agent_checkpoint_write_seconds',
  help: "Statements writing runs' checkpoints (a batch of checkpoints, blobs and writes each), from sending to commit",
});

export const webhookAttempts = counter<'result'>({
  name: 'berth_agent_webhook_attempts_total',
  help: "Attempts to deliver runs' webhooks, by result: delivered, retrying (to be tried again) or failed (given up: not delivered)",
  labelNames: ['result'],
});

export const traceRequests = counter<'result'>({
  name: 'berth_agent_trace_requests_total',
  help: "Requests carrying runs' traces to the trace store, by result: sent or dropped (after their retries, or with the buffer full)",
  labelNames: ['result'],
});

export const traceRunsDropped = counter({
  name: 'berth_agent_trace_runs_dropped_total',
  help: 'Runs whose traces were dropped because the trace store could not take them',
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
  // One query per scrape, shared by both gauges.
  let reading: Promise<Awaited<ReturnType<RunStore['queueStats']>>> | undefined;
  const stats = () => {
    reading ??= runs.queueStats().finally(() => setImmediate(() => (reading = undefined)));
    return reading;
  };
  const removers = [
    runsQueued.source(async () => {
      const { pending, running } = await stats();
      return readingsOf('status', { pending, running });
    }, log),
    oldestPending.source(async () => [{ value: (await stats()).oldestPendingSeconds }], log),
    subscribers.source(() => [{ value: broker.subscriberCount() }]),
  ];
  return () => removers.forEach((remove) => remove());
}
