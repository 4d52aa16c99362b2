/**
 * Export worker: the trace store (tracing projects and their runs) and bulk exports to S3.
 * `start(config)` migrates its schema and serves its gRPC services (and the standard health
 * service, which the gateway's /readyz checks).
 */
import { fileURLToPath } from 'node:url';
import { createDatabase, migrate } from '@berth/db';
import { createLogger, type Logger } from '@berth/log';
import { startGrpcService, type RunningGrpcService } from '@berth/rpc';
import type { ExportWorkerConfig } from './config.js';
import { TRACE_STORE_SCHEMA, TraceStore, type TraceTables } from './traces/trace-store.js';
import { TraceService } from '@berth/proto';
import { TraceIngest } from './traces/ingest.js';
import { DEFAULT_PENDING_PATCH_MAX_AGE_HOURS, PendingPatchSweeper } from './traces/patch-sweeper.js';
import { traceHandlers } from './traces/rpc.js';

export type { ExportWorkerConfig } from './config.js';
export { loadExportWorkerConfig } from './env.js';
export { TRACE_STORE_SCHEMA, TraceStore, partitionName, runScanQuery } from './traces/trace-store.js';
export type { RunRow, RunScan, SessionCreate, SessionRow, TraceTables, UpsertResult } from './traces/trace-store.js';
export type { RunFields, RunWrite } from './traces/run-fields.js';
export { FILTER_FIELDS, FilterSyntaxError, parseFilter } from './filter/parse.js';
export type { Comparator, FilterField, FilterNode, Literal } from './filter/parse.js';
export { compileFilter } from './filter/compile.js';
export { EXPORT_FIELDS, emptyCheckpoint, exportPartition, partitionFileKey, partitionFolder } from './writer/export-partition.js';
export type { ExportField, ExportPartitionOptions, ExportTarget, ExportTuning, PartitionCheckpoint, RunCursor } from './writer/export-partition.js';
export { PendingPatchSweeper } from './traces/patch-sweeper.js';

/**
 * Largest gRPC message the export-worker takes: an ingest call carries whole runs, whose inputs
 * and outputs can be megabytes (gRPC's default is 4 MiB).
 */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/** Numbered SQL migrations of the export-worker's schema (`NNNN_description.sql`). */
export const exportWorkerMigrationsDir = fileURLToPath(new URL('../migrations', import.meta.url));

/** gRPC package whose health status this service reports. */
export const SERVICE_NAME = 'berth.exportworker.v1';

export interface RunningExportWorker extends RunningGrpcService {
  traces: TraceStore;
  sweeper: PendingPatchSweeper;
}

/** Applies the export-worker's migrations (safe to call from many processes at once). */
export async function migrateExportWorker(databaseUrl: string): Promise<void> {
  await migrate({ connectionString: databaseUrl, schema: TRACE_STORE_SCHEMA, directory: exportWorkerMigrationsDir });
}

export async function start(
  config: ExportWorkerConfig,
  logger: Logger = createLogger({ name: 'export-worker', level: config.logLevel }),
): Promise<RunningExportWorker> {
  if (config.migrate !== false) await migrateExportWorker(config.databaseUrl);
  const database = createDatabase<TraceTables>({ connectionString: config.databaseUrl, schema: TRACE_STORE_SCHEMA });
  const traces = new TraceStore(database);
  const sweeper = new PendingPatchSweeper(traces, logger, (config.pendingPatchMaxAgeHours ?? DEFAULT_PENDING_PATCH_MAX_AGE_HOURS) * 3_600_000);
  let service: RunningGrpcService;
  try {
    service = await startGrpcService({
      name: SERVICE_NAME,
      host: config.grpcHost,
      port: config.grpcPort,
      logger,
      internalToken: config.internalToken,
      grpcOptions: { 'grpc.max_receive_message_length': MAX_MESSAGE_BYTES },
      setup: (server) => {
        server.add(TraceService, traceHandlers(traces, new TraceIngest(traces, logger)));
      },
    });
  } catch (error) {
    await database.close();
    throw error;
  }
  const grpc = service;
  sweeper.start();
  return {
    ...grpc,
    traces,
    sweeper,
    close: async () => {
      await sweeper.stop();
      await grpc.close();
      await database.close();
    },
  };
}
