/**
 * The agent-runtime's environment (GRPC_HOST, GRPC_PORT, LOG_LEVEL): the only place it reads process.env.
 */
import { parseGrpcServerEnv } from '@berth/config';
import type { AgentRuntimeConfig } from './index.js';

export function loadAgentRuntimeConfig(env: Record<string, string | undefined> = process.env): AgentRuntimeConfig {
  return parseGrpcServerEnv(env);
}
