/**
 * The control-plane's environment (GRPC_HOST, GRPC_PORT, LOG_LEVEL): the only place it reads process.env.
 */
import { parseGrpcServerEnv } from '@berth/config';
import type { ControlPlaneConfig } from './index.js';

export function loadControlPlaneConfig(env: Record<string, string | undefined> = process.env): ControlPlaneConfig {
  return parseGrpcServerEnv(env);
}
