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
}
