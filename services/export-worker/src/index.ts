/**
 * Export worker: the trace store (tracing projects and their runs) and bulk exports to S3.
 * `start(config)` migrates its schema and serves its gRPC services (and the standard health
 * service, which the gateway's /readyz checks).
 */
import { fileURLToPath } from 'node:url';
import { systemClock } from '@berth/clock';
import { createDatabase, migrate } from '@berth/db';
import { createLogger, type Logger } from '@berth/log';
import { startGrpcService, type RunningGrpcService } from '@berth/rpc';
import { SecretBox } from '@berth/secret-box';
import type { ExportWorkerConfig } from './config.js';
import { Destinations } from './destinations/destinations.js';
import { Exports } from './exports/exports.js';
import { bulkExportHandlers } from './exports/rpc.js';
import { ExportRunner } from './exports/runner.js';
import { ExportScheduler } from './exports/scheduler.js';
import { ExportStore } from './exports/store.js';
import type { BulkExportTables } from './exports/tables.js';
import { TRACE_STORE_SCHEMA, TraceStore, type TraceTables } from './traces/trace-store.js';
import { BulkExportService, FeedbackService, TraceService } from '@berth/proto';
import { attachingPendingFeedback, feedbackHandlers } from './traces/feedback-rpc.js';
import { FeedbackStore } from './traces/feedback-store.js';
import { TraceIngest } from './traces/ingest.js';
import { DEFAULT_PENDING_PATCH_MAX_AGE_HOURS, PendingPatchSweeper } from './traces/patch-sweeper.js';
import { RetentionPolicy, RetentionSweeper } from './traces/retention.js';
import { traceHandlers } from './traces/rpc.js';
import { TraceShares } from './traces/trace-shares.js';
import { ingestBatchesInFlight, pendingRunPatches } from './metrics.js';

export type { BulkExportSettings, ExportWorkerConfig } from './config.js';
export { Destinations, DestinationGoneError } from './destinations/destinations.js';
export { Exports } from './exports/exports.js';
export { ExportRunner } from './exports/runner.js';
export { ExportScheduler, SPAWN_DELAY_MS } from './exports/scheduler.js';
export { ExportStore, RUNS_CHANNEL, dayPartitions } from './exports/store.js';
export type { BulkExportTables } from './exports/tables.js';
export { StorageError, classifyStorageError, storageClient } from './storage/s3.js';
export type { StorageErrorKind, StorageLocation, StorageCredentials } from './storage/s3.js';
export { loadExportWorkerConfig } from './env.js';
export { TRACE_STORE_SCHEMA, TraceStore, partitionName, runScanQuery } from './traces/trace-store.js';
export type { RunRow, RunScan, SessionCreate, SessionRow, TraceStoreOptions, TraceTables, UpsertResult } from './traces/trace-store.js';
export type { RunFields, RunWrite } from './traces/run-fields.js';
export { FILTER_FIELDS, FilterSyntaxError, parseFilter } from './filter/parse.js';
export type { Comparator, FilterField, FilterNode, Literal } from './filter/parse.js';
export { compileFilter } from './filter/compile.js';
export { EXPORT_FIELDS, emptyCheckpoint, exportPartition, partitionFileKey, partitionFolder } from './writer/export-partition.js';
export type { ExportField, ExportPartitionOptions, ExportTarget, ExportTuning, PartitionCheckpoint, RunCursor } from './writer/export-partition.js';
export { PendingPatchSweeper } from './traces/patch-sweeper.js';
export { DEFAULT_RETENTION, RetentionPolicy, RetentionSweeper, TRACE_TIERS } from './traces/retention.js';
export type { RetentionConfig, RetentionSettings, SweepReport, TraceTier } from './traces/retention.js';
export { DEFAULT_FEEDBACK_LIMITS, FeedbackStore } from './traces/feedback-store.js';
export type { FeedbackDocument, FeedbackLimits } from './traces/feedback-store.js';

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
  /** Bulk export parts of this process (tests drive the runner and scheduler with them). */
  bulkExports: { destinations: Destinations; exports: Exports; store: ExportStore; runner: ExportRunner; scheduler: ExportScheduler };
  sweeper: PendingPatchSweeper;
  /** Deletes expired traces (tests sweep with it). */
  retention: RetentionSweeper;
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
  const { sweepIntervalMs, clock: retentionClock, ...retentionConfig } = config.retention ?? {};
  const database = createDatabase<TraceTables>({ connectionString: config.databaseUrl, schema: TRACE_STORE_SCHEMA });
  const policy = new RetentionPolicy(retentionConfig);
  const traces = new TraceStore(database, {
    defaultTier: (tenantId) => policy.settings(tenantId).defaultTier,
    droppableAfterDays: policy.periods()[0],
    ...(config.modelPrices ? { modelPrices: config.modelPrices } : {}),
  });
  await traces.check().catch(async (error: unknown) => {
    await database.close();
    throw error;
  });
  const feedback = new FeedbackStore(database.db, config.feedbackLimits);
  // Feedback waits for its run as long as a patch waits for its create.
  const waiting = { sweepPendingPatches: async (maxAgeMs: number) => (await traces.sweepPendingPatches(maxAgeMs)) + (await feedback.sweepPending(maxAgeMs)) };
  const sweeper = new PendingPatchSweeper(waiting, logger, (config.pendingPatchMaxAgeHours ?? DEFAULT_PENDING_PATCH_MAX_AGE_HOURS) * 3_600_000);
  const settings = config.bulkExports ?? {};
  const exportDb = database.db.withTables<BulkExportTables>();
  const clock = settings.clock ?? systemClock;
  const exportStore = new ExportStore(exportDb);
  const retention = new RetentionSweeper({
    db: database.db,
    policy,
    logger,
    clock: retentionClock ?? clock,
    ...(sweepIntervalMs ? { intervalMs: sweepIntervalMs } : {}),
    onDropped: (days) => traces.forgetPartitions(days),
  });
  const secrets = new SecretBox(config.secretKey);
  const destinations = new Destinations(exportDb, secrets, {
    logger,
    clientOptions: { allowPrivateEndpoints: settings.allowPrivateEndpoints ?? false },
  });
  const exports = new Exports(exportDb, exportStore, traces, { clock, retention: policy });
  const runner = new ExportRunner({
    store: exportStore,
    databaseUrl: config.databaseUrl,
    destinations,
    traces,
    logger,
    clock,
    ...(settings.workerConcurrency ? { concurrency: settings.workerConcurrency } : {}),
    ...(settings.tenantConcurrency ? { tenantConcurrency: settings.tenantConcurrency } : {}),
    ...(settings.leaseMs ? { leaseMs: settings.leaseMs } : {}),
    ...(settings.pollMs ? { pollMs: settings.pollMs } : {}),
    ...(settings.maxRetries !== undefined ? { maxRetries: settings.maxRetries } : {}),
    ...(settings.timeoutMs ? { timeoutMs: settings.timeoutMs } : {}),
    ...(settings.fileRows ? { fileRows: settings.fileRows } : {}),
  });
  const scheduler = new ExportScheduler({
    store: exportStore,
    logger,
    clock,
    ...(settings.scheduleIntervalMs ? { intervalMs: settings.scheduleIntervalMs } : {}),
  });
  const ingest = new TraceIngest(traces, logger, {
    ...(config.traceIngestMaxBatchesInFlight ? { maxBatchesInFlight: config.traceIngestMaxBatchesInFlight } : {}),
  });
  const unwatch = [
    ingestBatchesInFlight.source(() => [{ value: ingest.batchesInFlight }]),
    pendingRunPatches.source(async () => [{ value: await traces.countPendingPatches() }], logger),
  ];
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
        server.add(
          TraceService,
          attachingPendingFeedback(traceHandlers(traces, ingest, new TraceShares(database.db, secrets), clock, policy), feedback, logger),
        );
        server.add(BulkExportService, bulkExportHandlers(destinations, exports));
        server.add(FeedbackService, feedbackHandlers(feedback));
      },
    });
  } catch (error) {
    for (const stop of unwatch) stop();
    await database.close();
    throw error;
  }
  const grpc = service;
  sweeper.start();
  retention.start();
  if (settings.background !== false) {
    await runner.start();
    scheduler.start();
  }
  return {
    ...grpc,
    traces,
    sweeper,
    retention,
    bulkExports: { destinations, exports, store: exportStore, runner, scheduler },
    close: async () => {
      await sweeper.stop();
      await retention.stop();
      await scheduler.stop();
      await runner.stop();
      await grpc.close();
      for (const stop of unwatch) stop();
      await database.close();
    },
  };
}
