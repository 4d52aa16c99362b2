/**
 * The control plane's metrics (see docs/operate/monitor.md): revisions by status, and how long their
 * build and deploy steps take; the platform's Redis, which it manages users on (agent-redis.ts). No
 * deployment or revision id in a label.
 */
import { DURATION_BUCKETS, gauge, histogram, readingsOf } from '@berth/metrics';
import type { Logger } from '@berth/log';
import type { DeploymentStore } from './store.js';

export const revisionStepDuration = histogram<'step'>({
  name: 'berth_revision_step_duration_seconds',
  help: "Revisions' build and deploy steps, from their start to their end (however they ended), by step",
  labelNames: ['step'],
  buckets: DURATION_BUCKETS,
});

const revisions = gauge<'status'>({
  name: 'berth_revisions',
  help: 'Revisions of every deployment, by status (QUEUED … DEPLOYED, the *_FAILED ones, INTERRUPTED)',
  labelNames: ['status'],
});

/** Reports the revisions by status at each scrape; returns the function that stops it. */
export function watchRevisions(store: DeploymentStore, log: Logger): () => void {
  return revisions.source(async () => readingsOf('status', await store.revisionsByStatus()), log);
}

/** The platform's Redis as its INFO says, read at each scrape (every control plane reports the same server). */
const redisGauges = {
  used_memory: gauge({ name: 'berth_redis_memory_used_bytes', help: "Memory the platform's Redis uses (INFO used_memory)" }),
  maxmemory: gauge({ name: 'berth_redis_memory_max_bytes', help: "The platform's Redis memory limit (INFO maxmemory; 0: none)" }),
  connected_clients: gauge({ name: 'berth_redis_connected_clients', help: "Connections to the platform's Redis, agent servers' included" }),
};

/** Reports the platform's Redis usage from `info()` (its INFO text) at each scrape; returns the function that stops it. */
export function watchRedis(info: () => Promise<string>, log: Logger): () => void {
  // A scrape collects the gauges together: they share one INFO call.
  let reading: Promise<string> | undefined;
  const read = () => (reading ??= info().finally(() => (reading = undefined)));
  const stops = Object.entries(redisGauges).map(([field, metric]) =>
    metric.source(async () => {
      const value = new RegExp(`^${field}:(\\d+)`, 'm').exec(await read())?.[1];
      return value === undefined ? [] : [{ value: Number(value) }];
    }, log),
  );
  return () => stops.forEach((stop) => stop());
}
