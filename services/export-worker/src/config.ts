import type { GrpcServerConfig } from '@berth/config';

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
}
