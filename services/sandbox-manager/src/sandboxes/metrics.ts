/**
 * Sandboxes and warm-pool members by status (see docs/operate/monitor.md), read at each scrape. How long creating one
 * and running a command take is in the gRPC metrics of CreateSandbox and Execute
 * (`berth_grpc_server_handling_seconds`); no sandbox or tenant id is a label.
 */
import { gauge, readingsOf } from '@berth/metrics';
import type { Logger } from '@berth/log';
import type { Pools } from '../pools/pools.js';
import type { SandboxStore } from './store.js';

const sandboxes = gauge<'status'>({
  name: 'berth_sandboxes',
  help: 'Sandboxes not deleted, by status',
  labelNames: ['status'],
});

const poolMembers = gauge<'status'>({
  name: 'berth_sandbox_pool_members',
  help: 'Members of every warm pool, by status (creating, ready, failed)',
  labelNames: ['status'],
});

/** Reports the sandboxes and warm-pool members by status at each scrape; returns the function that stops it. */
export function watchSandboxes(store: SandboxStore, pools: Pools, log: Logger): () => void {
  const removers = [
    sandboxes.source(async () => readingsOf('status', await store.countByStatus()), log),
    poolMembers.source(async () => readingsOf('status', await pools.membersByStatus()), log),
  ];
  return () => removers.forEach((remove) => remove());
}
