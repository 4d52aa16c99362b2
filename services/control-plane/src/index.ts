/**
 * Control plane: deployments, revisions and auth-wait (its API arrives with the control-plane issue).
 * For now it serves the standard gRPC health service, which the gateway's /readyz checks.
 */
import type { GrpcServerConfig } from '@berth/config';
import { createLogger, type Logger } from '@berth/log';
import { startGrpcService, type RunningGrpcService } from '@berth/rpc';

export { loadControlPlaneConfig } from './env.js';

/** gRPC package whose health status this service reports. */
export const SERVICE_NAME = 'berth.controlplane.v1';

export type ControlPlaneConfig = GrpcServerConfig;

export async function start(
  config: ControlPlaneConfig,
  logger: Logger = createLogger({ name: 'control-plane', level: config.logLevel }),
): Promise<RunningGrpcService> {
  return startGrpcService({ name: SERVICE_NAME, host: config.grpcHost, port: config.grpcPort, logger });
}
