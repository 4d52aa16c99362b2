import type { Clock } from '@berth/clock';
import type { GrpcServerConfig } from '@berth/config';
import type { FeedbackLimits } from './traces/feedback-store.js';
import type { ModelPrice } from './traces/model-prices.js';
import type { RetentionConfig } from './traces/retention.js';

export interface ExportWorkerConfig extends GrpcServerConfig {
  /** Postgres holding the trace store and the export records (schema `berth_export`). */
  databaseUrl: string;
  /** 32 bytes, base64 (`BERTH_SECRET_KEY`): encrypts export destination credentials at rest. */
  secretKey: string;
  /**
   * Apply the export-worker's migrations at start (under a lock, so many replicas may do it).
   * @default true
   */
  migrate?: boolean;
  /**
   * How long a run patch waits for its run's create before it is deleted, in hours
   * (`TRACE_PENDING_PATCH_MAX_AGE_HOURS`): a client that lost the create never sends it.
   * @default 24
   */
  pendingPatchMaxAgeHours?: number;
  /**
   * Run batches this process writes at once (`TRACE_INGEST_MAX_BATCHES_IN_FLIGHT`); more are
   * answered "busy, retry" (HTTP 503 with Retry-After at the gateway).
   * @default 20
   */
  traceIngestMaxBatchesInFlight?: number;
  /**
   * Prices of llm runs that report tokens without costs, first match wins (`TRACE_MODEL_PRICES_FILE`
   * names a JSON file of them; see traces/model-prices.ts).
   * @default DEFAULT_MODEL_PRICES
   */
  modelPrices?: readonly ModelPrice[];
  /**
   * How long traces are kept: days of the base ('shortlived') and extended ('longlived') tiers,
   * the tier of new projects, and per-tenant overrides (see RetentionSettings for each default).
   */
  retention?: RetentionConfig & {
    /**
     * How often expired runs are swept.
     * @default 3600000
     */
    sweepIntervalMs?: number;
    /**
     * The clock deciding what has expired, and of the sweeps.
     * @default the bulk exports' clock
     */
    clock?: Clock;
  };
  /** Limits of feedback on runs (see FeedbackLimits for each default). */
  feedbackLimits?: Partial<FeedbackLimits>;
  /** Limits of bulk exports. */
  bulkExports?: BulkExportSettings;
}

/** Bulk-export limits of one export-worker (every field optional). */
export interface BulkExportSettings {
  /**
   * Exports of one tenant that run at once, across all replicas; the rest wait as CREATED.
   * @default 3
   */
  tenantConcurrency?: number;
  /**
   * Export runs (day partitions) this process executes at once.
   * @default 1 (each has its own encoder thread: ~130 MiB more at peak per run)
   */
  workerConcurrency?: number;
  /**
   * An export not finished this long after it was created becomes TIMEDOUT.
   * @default 259200000 (72 h)
   */
  timeoutMs?: number;
  /**
   * Retries of an export run after transient storage failures before it, and its export, fail.
   * @default 20
   */
  maxRetries?: number;
  /**
   * A worker's claim on a run lasts this long unless renewed; a killed worker's runs are taken over after it.
   * @default 60000
   */
  leaseMs?: number;
  /**
   * Let destinations write to endpoints at loopback or private addresses (a local MinIO, an
   * in-cluster object store). Off, a tenant cannot point the export-worker at the platform's own
   * services or a cloud metadata endpoint.
   * @default false
   */
  allowPrivateEndpoints?: boolean;
  /**
   * Rows per Parquet file (the writer's default when unset).
   */
  fileRows?: number;
  /**
   * How often each replica looks for due intervals of scheduled exports.
   * @default 30000
   */
  scheduleIntervalMs?: number;
  /**
   * How often an idle worker looks for export work unprompted (its safety poll: new exports and
   * ended ones notify it, and it wakes itself when a retry or a lease falls due).
   * @default 30000
   */
  pollMs?: number;
  /**
   * Run the export runner and the scheduler in this process (tests drive them by hand instead).
   * @default true
   */
  background?: boolean;
  /**
   * The one clock of bulk exports: their created and finished times, the scheduler's passes and
   * due intervals, the runner's leases, retries, timeouts and polls (a test moves all of it); also
   * "now", the default end of a trace statistics range.
   * @default systemClock
   */
  clock?: Clock;
}
