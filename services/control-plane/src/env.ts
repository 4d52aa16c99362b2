/**
 * The control-plane's environment (DATABASE_URL, GRPC_HOST, GRPC_PORT, LOG_LEVEL,
 * AUTH_FLOW_TTL_SECONDS): the only place it reads process.env.
 */
import { parseEnv, parseGrpcServerEnv } from '@berth/config';
import { z } from 'zod';
import type { ControlPlaneConfig } from './config.js';

const schema = z.object({
  /** Postgres holding the control_plane schema. */
  DATABASE_URL: z.string().min(1),
  /** Lifetime of a login flow (berth login), in seconds. */
  AUTH_FLOW_TTL_SECONDS: z.coerce.number().int().min(60).max(3600).default(600),
});

export function loadControlPlaneConfig(env: Record<string, string | undefined> = process.env): ControlPlaneConfig {
  const e = parseEnv(schema, env);
  return { ...parseGrpcServerEnv(env), databaseUrl: e.DATABASE_URL, authFlowTtlSeconds: e.AUTH_FLOW_TTL_SECONDS };
}
