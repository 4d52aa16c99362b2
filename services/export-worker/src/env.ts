/**
 * The export-worker's environment (DATABASE_URL, BERTH_SECRET_KEY, GRPC_HOST, GRPC_PORT, LOG_LEVEL,
 * BERTH_INTERNAL_TOKEN, TRACE_PENDING_PATCH_MAX_AGE_HOURS, TRACE_INGEST_MAX_BATCHES_IN_FLIGHT, TRACE_MODEL_PRICES_FILE,
 * TRACE_RETENTION_*, BULK_EXPORT_*): the only place it reads process.env.
 */
import { envBoolean, parseEnv, parseGrpcServerEnv } from '@berth/config';
import { z } from 'zod';
import type { BulkExportSettings, ExportWorkerConfig } from './config.js';
import { loadModelPrices } from './traces/model-prices.js';
import { TRACE_TIERS } from './traces/retention.js';

const days = z.number().int().min(1);
const tenantRetention = z.strictObject({ base_days: days.optional(), extended_days: days.optional(), default_tier: z.enum(TRACE_TIERS).optional() });

const schema = z.object({
  /** Postgres holding the berth_export schema (trace store, destinations, exports). */
  DATABASE_URL: z.string().min(1),
  /** 32 bytes, base64: encrypts export destination credentials at rest. */
  BERTH_SECRET_KEY: z.string().min(1),
  /** Hours a run patch waits for its create before it is swept. */
  TRACE_PENDING_PATCH_MAX_AGE_HOURS: z.coerce.number().positive().optional(),
  /** Run batches written at once; more are answered 503 with Retry-After. */
  TRACE_INGEST_MAX_BATCHES_IN_FLIGHT: z.coerce.number().int().min(1).optional(),
  /** A JSON file of model prices replacing the shipped table (docs/guides/tracing.md, "Tokens and costs"). */
  TRACE_MODEL_PRICES_FILE: z.string().min(1).optional(),
  /** Days traces of the base tier ('shortlived') are kept (14 when unset). */
  TRACE_RETENTION_BASE_DAYS: z.coerce.number().int().min(1).optional(),
  /** Days traces of the extended tier ('longlived') are kept (400 when unset). */
  TRACE_RETENTION_EXTENDED_DAYS: z.coerce.number().int().min(1).optional(),
  /** The tier of projects created without one: shortlived (when unset) or longlived. */
  TRACE_RETENTION_DEFAULT_TIER: z.enum(TRACE_TIERS).optional(),
  /** Per tenant, as JSON: {"<tenant id>": {"base_days": 30, "extended_days": 730, "default_tier": "longlived"}} (each field optional). */
  TRACE_RETENTION_TENANTS: z
    .string()
    .transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be JSON' });
        return z.NEVER;
      }
    })
    .pipe(z.record(z.uuid(), tenantRetention))
    .optional(),
  /** Minutes between sweeps of expired traces (60 when unset). */
  TRACE_RETENTION_SWEEP_MINUTES: z.coerce.number().positive().optional(),
  /** Exports of one tenant running at once (all replicas). */
  BULK_EXPORT_TENANT_CONCURRENCY: z.coerce.number().int().min(1).optional(),
  /** Export runs this process executes at once. */
  BULK_EXPORT_WORKER_CONCURRENCY: z.coerce.number().int().min(1).optional(),
  /** Hours after which an unfinished export is TIMEDOUT. */
  BULK_EXPORT_TIMEOUT_HOURS: z.coerce.number().positive().optional(),
  /** Retries of an export run after transient storage failures. */
  BULK_EXPORT_MAX_RETRIES: z.coerce.number().int().min(0).optional(),
  /** Seconds a worker's claim on an export run lasts unless renewed. */
  BULK_EXPORT_LEASE_SECONDS: z.coerce.number().positive().optional(),
  /** Let destinations write to loopback or private addresses (a local MinIO, an in-cluster store). */
  BULK_EXPORT_ALLOW_PRIVATE_ENDPOINTS: envBoolean.default(false),
  /** Rows per Parquet file. */
  BULK_EXPORT_FILE_ROWS: z.coerce.number().int().min(1).optional(),
});

export function loadExportWorkerConfig(env: Record<string, string | undefined> = process.env): ExportWorkerConfig {
  const e = parseEnv(schema, env);
  const bulkExports: BulkExportSettings = {
    ...(e.BULK_EXPORT_TENANT_CONCURRENCY ? { tenantConcurrency: e.BULK_EXPORT_TENANT_CONCURRENCY } : {}),
    ...(e.BULK_EXPORT_WORKER_CONCURRENCY ? { workerConcurrency: e.BULK_EXPORT_WORKER_CONCURRENCY } : {}),
    ...(e.BULK_EXPORT_TIMEOUT_HOURS ? { timeoutMs: e.BULK_EXPORT_TIMEOUT_HOURS * 3_600_000 } : {}),
    ...(e.BULK_EXPORT_MAX_RETRIES !== undefined ? { maxRetries: e.BULK_EXPORT_MAX_RETRIES } : {}),
    ...(e.BULK_EXPORT_LEASE_SECONDS ? { leaseMs: e.BULK_EXPORT_LEASE_SECONDS * 1000 } : {}),
    ...(e.BULK_EXPORT_FILE_ROWS ? { fileRows: e.BULK_EXPORT_FILE_ROWS } : {}),
    allowPrivateEndpoints: e.BULK_EXPORT_ALLOW_PRIVATE_ENDPOINTS,
  };
  return {
    ...parseGrpcServerEnv(env),
    databaseUrl: e.DATABASE_URL,
    secretKey: e.BERTH_SECRET_KEY,
    retention: {
      ...(e.TRACE_RETENTION_BASE_DAYS ? { baseDays: e.TRACE_RETENTION_BASE_DAYS } : {}),
      ...(e.TRACE_RETENTION_EXTENDED_DAYS ? { extendedDays: e.TRACE_RETENTION_EXTENDED_DAYS } : {}),
      ...(e.TRACE_RETENTION_DEFAULT_TIER ? { defaultTier: e.TRACE_RETENTION_DEFAULT_TIER } : {}),
      ...(e.TRACE_RETENTION_SWEEP_MINUTES ? { sweepIntervalMs: e.TRACE_RETENTION_SWEEP_MINUTES * 60_000 } : {}),
      tenants: Object.fromEntries(
        Object.entries(e.TRACE_RETENTION_TENANTS ?? {}).map(([tenant, t]) => [
          tenant,
          {
            ...(t.base_days ? { baseDays: t.base_days } : {}),
            ...(t.extended_days ? { extendedDays: t.extended_days } : {}),
            ...(t.default_tier ? { defaultTier: t.default_tier } : {}),
          },
        ]),
      ),
    },
    ...(e.TRACE_PENDING_PATCH_MAX_AGE_HOURS ? { pendingPatchMaxAgeHours: e.TRACE_PENDING_PATCH_MAX_AGE_HOURS } : {}),
    ...(e.TRACE_INGEST_MAX_BATCHES_IN_FLIGHT ? { traceIngestMaxBatchesInFlight: e.TRACE_INGEST_MAX_BATCHES_IN_FLIGHT } : {}),
    ...(e.TRACE_MODEL_PRICES_FILE ? { modelPrices: loadModelPrices(e.TRACE_MODEL_PRICES_FILE) } : {}),
    bulkExports,
  };
}
