/**
 * Sandbox manager: templates and sandboxes (its API arrives with the sandboxes issue).
 * For now it serves the standard gRPC health service, which the gateway's /readyz checks.
 */
import type { GrpcServerConfig } from '@berth/config';
import { createLogger, type Logger } from '@berth/log';
import { startGrpcService, type RunningGrpcService } from '@berth/rpc';

export { loadSandboxManagerConfig } from './env.js';

/** gRPC package whose health status this service reports. */
export const SERVICE_NAME = 'berth.sandboxmanager.v1';

export type SandboxManagerConfig = GrpcServerConfig;

export async function start(
  config: SandboxManagerConfig,
  logger: Logger = createLogger({ name: 'sandbox-manager', level: config.logLevel }),
): Promise<RunningGrpcService> {
  return startGrpcService({ name: SERVICE_NAME, host: config.grpcHost, port: config.grpcPort, logger, internalToken: config.internalToken });
}
