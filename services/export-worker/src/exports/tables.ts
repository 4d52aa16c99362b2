/** Kysely types of the bulk-export tables (migration 0002_bulk_exports.sql). */
import type { ColumnType } from '@berth/db';
import type { PartitionCheckpoint } from '../writer/export-partition.js';
import type { ExportRunStatus, ExportStatus } from './lifecycle.js';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Json<T> = ColumnType<T, string | undefined, string>;

export interface DestinationConfigJson {
  bucket_name: string;
  prefix: string;
  region?: string;
  endpoint_url?: string;
}

export interface DestinationsTable {
  id: string;
  tenant_id: string;
  destination_type: string;
  display_name: string;
  config: Json<DestinationConfigJson>;
  credentials_sealed: Buffer;
  credentials_keys: string[];
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ExportsTable {
  id: string;
  tenant_id: string;
  destination_id: string;
  session_id: string;
  start_time: Date;
  end_time: Date | null;
  format_version: string;
  filter: string | null;
  export_fields: string[] | null;
  interval_hours: number | null;
  /** Set on insert; changed only by ExportStore.moveExport (checked against the export lifecycle). */
  status: ColumnType<ExportStatus, ExportStatus, never>;
  status_message: ColumnType<string, string | undefined, string>;
  source_bulk_export_id: string | null;
  interval_index: number | null;
  next_interval_index: ColumnType<number, number | undefined, number>;
  created_at: Timestamp;
  updated_at: Timestamp;
  started_at: ColumnType<Date | null, Date | undefined, Date>;
  finished_at: ColumnType<Date | null, Date | undefined, Date>;
  seq: ColumnType<string, never, never>;
}

/** What an export run keeps between attempts (and a worker that takes it over starts from). */
export interface ExportRunMetadata {
  checkpoint?: PartitionCheckpoint;
}

export interface ExportRunsTable {
  id: string;
  export_id: string;
  start_time: Date;
  end_time: Date;
  /** Set on insert; changed only by ExportStore.moveRun (checked against the export-run lifecycle). */
  status: ColumnType<ExportRunStatus, ExportRunStatus, never>;
  retry_number: ColumnType<number, number | undefined, number>;
  errors: Json<Record<string, string>>;
  metadata: Json<ExportRunMetadata>;
  lease_owner: ColumnType<string | null, undefined, string | null>;
  lease_expires_at: ColumnType<Date | null, undefined, Date | null>;
  /** The fencing token: incremented by every claim (migration 0005). */
  lease_token: ColumnType<number, undefined, never>;
  not_before: ColumnType<Date, Date | undefined, Date>;
  created_at: Timestamp;
  updated_at: Timestamp;
  finished_at: ColumnType<Date | null, undefined, Date>;
}

// A type alias (not an interface): Kysely's withTables needs an index signature.
export type BulkExportTables = {
  destinations: DestinationsTable;
  exports: ExportsTable;
  export_runs: ExportRunsTable;
};
