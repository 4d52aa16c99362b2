/**
 * The gateway's gRPC clients of the sandbox-manager (`berth.sandboxmanager.v1`): the control plane
 * (templates, snapshots, registries, volumes, pools, sandboxes) and the data plane (commands and
 * files). One channel per process, shared by every route; without an address, calls answer 503
 * with Retry-After and a message saying how to enable sandboxes.
 */
import { UnavailableError } from '@berth/errors';
import { SandboxDataService, SandboxService } from '@berth/proto';
import { createRpcClient, type RpcClient, type RpcClientOptions } from '@berth/rpc';

/**
 * Largest gRPC message between the gateway and the sandbox-manager: file chunks are at most
 * 1 MiB and command output arrives in small pieces, so the default 4 MiB leaves room; listings of
 * many sandboxes are the largest messages.
 */
export const SANDBOX_MANAGER_MESSAGE_BYTES = 16 * 1024 * 1024;

export class SandboxManagerClients {
  private sandboxClient: RpcClient<typeof SandboxService> | undefined;
  private dataClient: RpcClient<typeof SandboxDataService> | undefined;

  private readonly options: RpcClientOptions;

  /**
   * @param address `host:port` of the sandbox-manager's gRPC server; without one, calls answer 503.
   * @param internalToken sent on every call (`BERTH_INTERNAL_TOKEN`).
   */
  constructor(
    private readonly address: string | undefined,
    internalToken?: string,
  ) {
    this.options = {
      internalToken,
      channelOptions: { 'grpc.max_receive_message_length': SANDBOX_MANAGER_MESSAGE_BYTES, 'grpc.max_send_message_length': SANDBOX_MANAGER_MESSAGE_BYTES },
    };
  }

  /** Templates, snapshots, registries, volumes, pools and sandboxes. Throws UnavailableError without a sandbox-manager. */
  get sandboxes(): RpcClient<typeof SandboxService> {
    this.sandboxClient ??= createRpcClient(SandboxService, this.requireAddress(), this.options);
    return this.sandboxClient;
  }

  /** Commands and files of a sandbox. Throws UnavailableError without a sandbox-manager. */
  get data(): RpcClient<typeof SandboxDataService> {
    this.dataClient ??= createRpcClient(SandboxDataService, this.requireAddress(), this.options);
    return this.dataClient;
  }

  close(): void {
    this.sandboxClient?.close();
    this.sandboxClient = undefined;
    this.dataClient?.close();
    this.dataClient = undefined;
  }

  private requireAddress(): string {
    if (!this.address) {
      throw new UnavailableError('Sandboxes are not enabled on this platform: run the sandbox-manager and give the gateway its address (SANDBOX_MANAGER_GRPC_ADDRESS)');
    }
    return this.address;
  }
}
