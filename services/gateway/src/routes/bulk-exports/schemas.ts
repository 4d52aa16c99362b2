/**
 * Request and response schemas of the bulk-export API (`/api/v1/bulk-exports…`, area D of the
 * platform interface). Requests are strict (an unknown field is a 422); the rules between fields
 * (end_time or interval_hours, the export fields, the filter) are the export-worker's, answered as
 * 422s with the same loc.
 */
import { wireEnum } from '@berth/lifecycle';
import { ExportRunStatus, ExportStatus } from '@berth/proto';
import { z } from 'zod';
import { Uuid } from '@berth/ids';
import { intQuery } from '../../deployment-schemas.js';

const timestamp = z.iso.datetime({ offset: true });

/** Statuses spelt as the names of the export-worker's enums (a newer worker's unknown value: UNKNOWN). */
export const exportStatuses = wireEnum(ExportStatus);
export const exportRunStatuses = wireEnum(ExportRunStatus);

export const DestinationConfigIn = z.strictObject({
  bucket_name: z.string().min(3).max(255),
  prefix: z.string().max(2048).default('').describe('Root folder in the bucket'),
  region: z.string().min(1).max(64).optional().describe('AWS region (AWS S3)'),
  endpoint_url: z.string().min(1).max(2048).optional().describe('Endpoint of an S3-compatible provider (MinIO, GCS, ...), addressed path-style'),
});

export const CredentialsIn = z.strictObject({
  access_key_id: z.string().min(1).max(255),
  secret_access_key: z.string().min(1).max(2048),
  session_token: z.string().min(1).max(8192).optional(),
});

export const CreateDestinationBody = z.strictObject({
  destination_type: z.literal('s3'),
  display_name: z
    .string()
    .min(1)
    .max(255)
    .regex(/^[a-zA-Z0-9\-_ ']+$/, { error: "Use letters, digits, spaces and - _ '" }),
  config: DestinationConfigIn,
  credentials: CredentialsIn,
});

export const UpdateDestinationBody = z.strictObject({
  display_name: CreateDestinationBody.shape.display_name.optional(),
  credentials: CredentialsIn.optional(),
});

export const DestinationOut = z.object({
  id: z.string(),
  tenant_id: z.string(),
  destination_type: z.string(),
  display_name: z.string(),
  config: z.object({ bucket_name: z.string(), prefix: z.string(), region: z.string().nullable(), endpoint_url: z.string().nullable() }),
  credentials_keys: z.array(z.string()).describe('Names of the stored credentials; their values are never returned'),
  created_at: z.string(),
  updated_at: z.string(),
});

export const DestinationPath = z.strictObject({ destination_id: z.string() });
export const ExportPath = z.strictObject({ export_id: z.string() });

export const CreateExportBody = z.strictObject({
  bulk_export_destination_id: Uuid,
  session_id: Uuid.describe('The tracing project whose runs are exported'),
  start_time: timestamp.describe('Inclusive bound on run start_time'),
  end_time: timestamp.optional().describe('Exclusive bound on run start_time; required for a one-time export, left out for a scheduled one'),
  format_version: z.string().default('v2_beta').describe('v2_beta'),
  filter: z.string().max(20_000).optional().describe('Filter query language expression; left out: every run'),
  export_fields: z.array(z.string().max(64)).max(64).optional().describe('The run fields to export, in order; left out: all 29'),
  interval_hours: z.int().optional().describe('1 to 168: a scheduled export, spawning one export per interval'),
});

export const ExportOut = z.object({
  id: z.string(),
  tenant_id: z.string(),
  bulk_export_destination_id: z.string(),
  session_id: z.string(),
  start_time: z.string(),
  end_time: z.string().nullable(),
  format_version: z.string(),
  filter: z.string().nullable(),
  export_fields: z.array(z.string()).nullable(),
  interval_hours: z.number().nullable(),
  status: z.string().describe('CREATED, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEDOUT; SCHEDULED for a schedule'),
  status_message: z.string().nullable(),
  source_bulk_export_id: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  finished_at: z.string().nullable(),
});

export const ListExportsQuery = z.strictObject({
  limit: intQuery(1, 1000, 100, 'Page size, 1 to 1000'),
  offset: intQuery(0, Number.MAX_SAFE_INTEGER, 0, 'Exports to skip'),
});
export const ListDestinationsQuery = ListExportsQuery;

export const CancelExportBody = z.strictObject({
  status: z.literal('CANCELLED').describe('The only change an export takes'),
});

export const ExportRunOut = z.object({
  id: z.string(),
  bulk_export_id: z.string(),
  status: z.string(),
  start_time: z.string(),
  end_time: z.string(),
  retry_number: z.number(),
  errors: z.record(z.string(), z.string()).describe('retry_<n>: what went wrong on attempt n'),
  rows_written: z.number(),
  exported_files: z.array(z.string()),
  created_at: z.string(),
  updated_at: z.string(),
  finished_at: z.string().nullable(),
});
