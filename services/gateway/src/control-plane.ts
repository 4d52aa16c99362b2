/**
 * The gateway's gRPC clients of the control plane. One channel per process, shared by every
 * route; each service of the control plane (`berth.controlplane.v1`) gets a typed client here.
 */
import { UnavailableError } from '@berth/errors';
import { AuthFlowService, DeploymentService } from '@berth/proto';
import { createRpcClient, type RpcClient, type RpcClientOptions } from '@berth/rpc';

export class ControlPlaneClients {
  private authFlowClient: RpcClient<typeof AuthFlowService> | undefined;
  private deploymentClient: RpcClient<typeof DeploymentService> | undefined;

  private readonly options: RpcClientOptions;

  /**
   * @param address `host:port` of the control plane's gRPC server; without one, calls answer 503.
   * @param internalToken sent on every call (`BERTH_INTERNAL_TOKEN`); a control plane that refuses it answers 503.
   */
  constructor(
    private readonly address: string | undefined,
    internalToken?: string,
  ) {
    this.options = { internalToken };
  }

  /** Login flows (auth-wait). Throws UnavailableError when no control plane is configured. */
  get authFlows(): RpcClient<typeof AuthFlowService> {
    this.authFlowClient ??= createRpcClient(AuthFlowService, this.requireAddress(), this.options);
    return this.authFlowClient;
  }

  /** Deployments, revisions, their logs, source uploads and the proxy's resolve. Throws UnavailableError when no control plane is configured. */
  get deployments(): RpcClient<typeof DeploymentService> {
    this.deploymentClient ??= createRpcClient(DeploymentService, this.requireAddress(), this.options);
    return this.deploymentClient;
  }

  close(): void {
    this.authFlowClient?.close();
    this.authFlowClient = undefined;
    this.deploymentClient?.close();
    this.deploymentClient = undefined;
  }

  private requireAddress(): string {
    if (!this.address) throw new UnavailableError('The control plane is not configured (CONTROL_PLANE_GRPC_ADDRESS)');
    return this.address;
  }
}
