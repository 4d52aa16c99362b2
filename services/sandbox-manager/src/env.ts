/**
 * The sandbox-manager's environment (GRPC_HOST, GRPC_PORT, LOG_LEVEL, BERTH_INTERNAL_TOKEN): the only place it reads process.env.
 */
import { parseGrpcServerEnv } from '@berth/config';
import type { SandboxManagerConfig } from './index.js';

export function loadSandboxManagerConfig(env: Record<string, string | undefined> = process.env): SandboxManagerConfig {
  return parseGrpcServerEnv(env);
}
