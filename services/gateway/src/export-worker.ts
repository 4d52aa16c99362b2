/**
 * The gateway's gRPC clients of the export-worker. One channel per process, shared by every
 * route; each service of the export-worker (`berth.exportworker.v1`) gets a typed client here.
 */
import { UnavailableError } from '@berth/errors';
import { BulkExportService } from '@berth/proto';
import { createRpcClient, type RpcClient, type RpcClientOptions } from '@berth/rpc';

export class ExportWorkerClients {
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
    this.options = { internalToken };
  }

  /** Export destinations, exports and their runs. Throws UnavailableError when no export-worker is configured. */
  get bulkExports(): RpcClient<typeof BulkExportService> {
    this.bulkExportClient ??= createRpcClient(BulkExportService, this.requireAddress(), this.options);
    return this.bulkExportClient;
  }

  close(): void {
    this.bulkExportClient?.close();
    this.bulkExportClient = undefined;
  }

  private requireAddress(): string {
    if (!this.address) throw new UnavailableError('The export worker is not configured (EXPORT_WORKER_GRPC_ADDRESS)');
    return this.address;
  }
}
