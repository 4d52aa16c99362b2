/**
 * Export worker: trace store and bulk exports to S3 (its API arrives with the bulk-export issue).
 * For now it serves the standard gRPC health service, which the gateway's /readyz checks.
 */
import { fileURLToPath } from 'node:url';
import type { GrpcServerConfig } from '@berth/config';
import { createLogger, type Logger } from '@berth/log';
import { startGrpcService, type RunningGrpcService } from '@berth/rpc';

export { loadExportWorkerConfig } from './env.js';
export { TRACE_STORE_SCHEMA, TraceStore, partitionName, runScanQuery } from './traces/trace-store.js';
export type { RunRow, RunScan, SessionCreate, SessionRow, TraceTables, UpsertResult } from './traces/trace-store.js';
export type { RunFields, RunWrite } from './traces/run-fields.js';
export { FILTER_FIELDS, FilterSyntaxError, parseFilter } from './filter/parse.js';
export type { Comparator, FilterField, FilterNode, Literal } from './filter/parse.js';
export { compileFilter } from './filter/compile.js';

/** Numbered SQL migrations of the trace store (`NNNN_description.sql`). */
export const exportWorkerMigrationsDir = fileURLToPath(new URL('../migrations', import.meta.url));

/** gRPC package whose health status this service reports. */
export const SERVICE_NAME = 'berth.exportworker.v1';

export type ExportWorkerConfig = GrpcServerConfig;

export async function start(
  config: ExportWorkerConfig,
  logger: Logger = createLogger({ name: 'export-worker', level: config.logLevel }),
): Promise<RunningGrpcService> {
  return startGrpcService({ name: SERVICE_NAME, host: config.grpcHost, port: config.grpcPort, logger, internalToken: config.internalToken });
}
