/**
 * The gateway's gRPC clients of the sandbox-manager (`berth.sandboxmanager.v1`): the control plane
 * (templates, snapshots, registries, volumes, pools, sandboxes) and the data plane (commands and
 * files). One channel per process, shared by every route; without an address, calls answer 503
 * with Retry-After and a message saying how to enable sandboxes.
 */
import { SandboxDataService, SandboxService } from '@berth/proto';
import type { RpcClient } from '@berth/rpc';
import { ServiceClients } from './service-clients.js';

/**
 * Largest gRPC message between the gateway and the sandbox-manager: file chunks are at most
 * 1 MiB and command output arrives in small pieces, so the default 4 MiB leaves room; listings of
 * many sandboxes are the largest messages.
 */
export const SANDBOX_MANAGER_MESSAGE_BYTES = 16 * 1024 * 1024;

export class SandboxManagerClients extends ServiceClients {
  /**
   * @param address `host:port` of the sandbox-manager's gRPC server; without one, calls answer 503.
   * @param internalToken sent on every call (`BERTH_INTERNAL_TOKEN`).
   */
  constructor(address: string | undefined, internalToken?: string) {
    super(
      address,
      internalToken,
      SANDBOX_MANAGER_MESSAGE_BYTES,
      'Sandboxes are not enabled on this platform: run the sandbox-manager and give the gateway its address (SANDBOX_MANAGER_GRPC_ADDRESS)',
    );
  }

  /** Templates, snapshots, registries, volumes, pools and sandboxes. Throws UnavailableError without a sandbox-manager. */
  get sandboxes(): RpcClient<typeof SandboxService> {
    return this.client(SandboxService);
  }

  /** Commands and files of a sandbox. Throws UnavailableError without a sandbox-manager. */
  get data(): RpcClient<typeof SandboxDataService> {
    return this.client(SandboxDataService);
  }
}
