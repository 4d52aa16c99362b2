/**
 * The export-worker's environment (GRPC_HOST, GRPC_PORT, LOG_LEVEL, BERTH_INTERNAL_TOKEN): the only place it reads process.env.
 */
import { parseGrpcServerEnv } from '@berth/config';
import type { ExportWorkerConfig } from './index.js';

export function loadExportWorkerConfig(env: Record<string, string | undefined> = process.env): ExportWorkerConfig {
  return parseGrpcServerEnv(env);
}
