/**
 * Sandboxes by status (see docs/operate/monitor.md), read at each scrape. How long creating one
 * and running a command take is in the gRPC metrics of CreateSandbox and Execute
 * (`berth_grpc_server_handling_seconds`); no sandbox or tenant id is a label.
 */
import { gauge, readingsOf } from '@berth/metrics';
import type { Logger } from '@berth/log';
import type { SandboxStore } from './store.js';

const sandboxes = gauge<'status'>({
  name: 'berth_sandboxes',
  help: 'Sandboxes not deleted, by status',
  labelNames: ['status'],
});

/** Reports the sandboxes by status at each scrape; returns the function that stops it. */
export function watchSandboxes(store: SandboxStore, log: Logger): () => void {
  return sandboxes.source(async () => readingsOf('status', await store.countByStatus()), log);
}
