/**
 * The export-worker's environment (DATABASE_URL, BERTH_SECRET_KEY, GRPC_HOST, GRPC_PORT, LOG_LEVEL,
 * BERTH_INTERNAL_TOKEN, TRACE_PENDING_PATCH_MAX_AGE_HOURS): the only place it reads process.env.
 */
import { parseEnv, parseGrpcServerEnv } from '@berth/config';
import { z } from 'zod';
import type { ExportWorkerConfig } from './config.js';

const schema = z.object({
  /** Postgres holding the berth_export schema (trace store, destinations, exports). */
  DATABASE_URL: z.string().min(1),
  /** 32 bytes, base64: encrypts export destination credentials at rest. */
  BERTH_SECRET_KEY: z.string().min(1),
  /** Hours a run patch waits for its create before it is swept. */
  TRACE_PENDING_PATCH_MAX_AGE_HOURS: z.coerce.number().positive().optional(),
});

export function loadExportWorkerConfig(env: Record<string, string | undefined> = process.env): ExportWorkerConfig {
  const e = parseEnv(schema, env);
  return {
    ...parseGrpcServerEnv(env),
    databaseUrl: e.DATABASE_URL,
    secretKey: e.BERTH_SECRET_KEY,
    ...(e.TRACE_PENDING_PATCH_MAX_AGE_HOURS ? { pendingPatchMaxAgeHours: e.TRACE_PENDING_PATCH_MAX_AGE_HOURS } : {}),
  };
}
