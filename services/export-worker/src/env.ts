/**
 * The export-worker environment: the only place its settings are read from process.env.
 */
import { envLogLevel, envPort, parseEnv } from '@berth/config';
import { z } from 'zod';
import type { ExportWorkerConfig } from './index.js';

const schema = z.object({
  /** Interface the gRPC server listens on. */
  GRPC_HOST: z.string().default('127.0.0.1'),
  /** gRPC port; 0 picks a free one. */
  GRPC_PORT: envPort.default(50051),
  LOG_LEVEL: envLogLevel.default('info'),
});

export function loadExportWorkerConfig(env: Record<string, string | undefined> = process.env): ExportWorkerConfig {
  const e = parseEnv(schema, env);
  return { grpcHost: e.GRPC_HOST, grpcPort: e.GRPC_PORT, logLevel: e.LOG_LEVEL };
}
