/**
 * The gateway's gRPC clients of the export-worker (`berth.exportworker.v1`). One channel per
 * process, shared by every route; without an address, calls answer 503 with Retry-After.
 */
import { UnavailableError } from '@berth/errors';
import { BulkExportService, TraceService } from '@berth/proto';
import { createRpcClient, type RpcClient, type RpcClientOptions } from '@berth/rpc';

/**
 * Largest gRPC message between the gateway and the export-worker: runs (and pages of runs) carry
 * whole inputs and outputs (gRPC's default is 4 MiB). The export-worker takes as much.
 */
export const EXPORT_WORKER_MESSAGE_BYTES = 64 * 1024 * 1024;

export class ExportWorkerClients {
  private traceClient: RpcClient<typeof TraceService> | undefined;
  private bulkExportClient: RpcClient<typeof BulkExportService> | undefined;

  private readonly options: RpcClientOptions;

  /**
   * @param address `host:port` of the export-worker's gRPC server; without one, calls answer 503.
   * @param internalToken sent on every call (`BERTH_INTERNAL_TOKEN`).
   */
  constructor(
    private readonly address: string | undefined,
    internalToken?: string,
  ) {
    this.options = {
      internalToken,
      channelOptions: { 'grpc.max_receive_message_length': EXPORT_WORKER_MESSAGE_BYTES, 'grpc.max_send_message_length': EXPORT_WORKER_MESSAGE_BYTES },
    };
  }

  /** Whether an export-worker is configured (without one, nothing is traced through this gateway). */
  get configured(): boolean {
    return this.address !== undefined;
  }

  /** The trace store: runs and tracing projects. Throws UnavailableError when no export-worker is configured. */
  get traces(): RpcClient<typeof TraceService> {
    this.traceClient ??= createRpcClient(TraceService, this.requireAddress(), this.options);
    return this.traceClient;
  }

  /** Export destinations, exports and their runs. Throws UnavailableError when no export-worker is configured. */
  get bulkExports(): RpcClient<typeof BulkExportService> {
    this.bulkExportClient ??= createRpcClient(BulkExportService, this.requireAddress(), this.options);
    return this.bulkExportClient;
  }

  close(): void {
    this.traceClient?.close();
    this.traceClient = undefined;
    this.bulkExportClient?.close();
    this.bulkExportClient = undefined;
  }

  private requireAddress(): string {
    if (!this.address) throw new UnavailableError('The export-worker is not configured (EXPORT_WORKER_GRPC_ADDRESS)');
    return this.address;
  }
}
