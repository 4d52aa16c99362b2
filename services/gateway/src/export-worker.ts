/**
 * The gateway's gRPC clients of the export-worker (`berth.exportworker.v1`). One channel per
 * process, shared by every route; without an address, calls answer 503 with Retry-After.
 */
import { BulkExportService, FeedbackService, TraceService } from '@berth/proto';
import type { RpcClient } from '@berth/rpc';
import { ServiceClients } from './service-clients.js';

/**
 * Largest gRPC message between the gateway and the export-worker: runs (and pages of runs) carry
 * whole inputs and outputs (gRPC's default is 4 MiB). The export-worker takes as much.
 */
export const EXPORT_WORKER_MESSAGE_BYTES = 64 * 1024 * 1024;

export class ExportWorkerClients extends ServiceClients {
  /**
   * @param address `host:port` of the export-worker's gRPC server; without one, calls answer 503.
   * @param internalToken sent on every call (`BERTH_INTERNAL_TOKEN`).
   */
  constructor(address: string | undefined, internalToken?: string) {
    super(address, internalToken, EXPORT_WORKER_MESSAGE_BYTES, 'The export-worker is not configured (EXPORT_WORKER_GRPC_ADDRESS)');
  }

  /** The trace store: runs and tracing projects. Throws UnavailableError when no export-worker is configured. */
  get traces(): RpcClient<typeof TraceService> {
    return this.client(TraceService);
  }

  /** Feedback on runs of the trace store. Throws UnavailableError when no export-worker is configured. */
  get feedback(): RpcClient<typeof FeedbackService> {
    return this.client(FeedbackService);
  }

  /** Export destinations, exports and their runs. Throws UnavailableError when no export-worker is configured. */
  get bulkExports(): RpcClient<typeof BulkExportService> {
    return this.client(BulkExportService);
  }
}
