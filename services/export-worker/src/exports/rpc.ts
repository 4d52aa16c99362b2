/**
 * The gRPC face of destinations and exports: `berth.exportworker.v1.BulkExportService`.
 */
import { InvalidArgumentError, NotFoundError } from '@berth/errors';
import { isUuid } from '@berth/ids';
import { BulkExportService, timestampDate, timestampFromDate, type Timestamp } from '@berth/proto';
import type { ServiceImplementation } from '@berth/rpc';
import type { Destinations, DestinationView } from '../destinations/destinations.js';
import type { Exports } from './exports.js';
import { exportRunStatusWire, exportStatusWire } from './lifecycle.js';
import type { ExportRow, ExportRunRow } from './store.js';

function destinationMessage(d: DestinationView) {
  return {
    id: d.id,
    tenantId: d.tenant_id,
    destinationType: d.destination_type,
    displayName: d.display_name,
    config: { bucketName: d.config.bucket_name, prefix: d.config.prefix, region: d.config.region, endpointUrl: d.config.endpoint_url },
    credentialsKeys: d.credentials_keys,
    createdAt: timestampFromDate(d.created_at),
    updatedAt: timestampFromDate(d.updated_at),
  };
}

function exportMessage(e: ExportRow) {
  return {
    id: e.id,
    tenantId: e.tenant_id,
    bulkExportDestinationId: e.destination_id,
    sessionId: e.session_id,
    startTime: timestampFromDate(e.start_time),
    ...(e.end_time ? { endTime: timestampFromDate(e.end_time) } : {}),
    formatVersion: e.format_version,
    ...(e.filter !== null ? { filter: e.filter } : {}),
    exportFields: e.export_fields ?? [],
    ...(e.interval_hours !== null ? { intervalHours: e.interval_hours } : {}),
    status: exportStatusWire.encode(e.status),
    statusMessage: e.status_message,
    ...(e.source_bulk_export_id ? { sourceBulkExportId: e.source_bulk_export_id } : {}),
    createdAt: timestampFromDate(e.created_at),
    updatedAt: timestampFromDate(e.updated_at),
    ...(e.finished_at ? { finishedAt: timestampFromDate(e.finished_at) } : {}),
  };
}

function runMessage(r: ExportRunRow) {
  const checkpoint = r.metadata.checkpoint;
  return {
    id: r.id,
    bulkExportId: r.export_id,
    status: exportRunStatusWire.encode(r.status),
    startTime: timestampFromDate(r.start_time),
    endTime: timestampFromDate(r.end_time),
    retryNumber: r.retry_number,
    errors: r.errors,
    rowsWritten: BigInt(checkpoint?.rows_written ?? 0),
    exportedFiles: checkpoint?.exported_files ?? [],
    createdAt: timestampFromDate(r.created_at),
    updatedAt: timestampFromDate(r.updated_at),
    ...(r.finished_at ? { finishedAt: timestampFromDate(r.finished_at) } : {}),
  };
}

function page(limit: number, offset: number): { limit: number; offset: number } {
  if (limit < 0 || limit > 1000 || offset < 0) throw new InvalidArgumentError('limit must be 0-1000 and offset at least 0');
  return { limit: limit || 100, offset };
}

function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new InvalidArgumentError(`${what} is required`);
  return value;
}

/** An id that cannot exist is not found, like an unknown one (never a database error). */
function idOf(id: string, what: string): string {
  if (!isUuid(id)) throw new NotFoundError(`${what} ${id} not found`);
  return id.toLowerCase();
}

const date = (t: Timestamp | undefined) => (t ? timestampDate(t) : undefined);

export function bulkExportHandlers(destinations: Destinations, exports: Exports): ServiceImplementation<typeof BulkExportService> {
  return {
    createDestination: async (r) => {
      const config = required(r.config, 'config');
      const credentials = required(r.credentials, 'credentials');
      const view = await destinations.create(r.tenantId, {
        destination_type: r.destinationType,
        display_name: r.displayName,
        config: {
          bucket_name: config.bucketName,
          prefix: config.prefix,
          ...(config.region ? { region: config.region } : {}),
          ...(config.endpointUrl ? { endpoint_url: config.endpointUrl } : {}),
        },
        credentials: {
          access_key_id: credentials.accessKeyId,
          secret_access_key: credentials.secretAccessKey,
          ...(credentials.sessionToken ? { session_token: credentials.sessionToken } : {}),
        },
      });
      return { destination: destinationMessage(view) };
    },
    listDestinations: async (r) => ({ destinations: (await destinations.list(r.tenantId, page(r.limit, r.offset))).map(destinationMessage) }),
    getDestination: async (r) => ({ destination: destinationMessage(await destinations.get(r.tenantId, idOf(r.destinationId, 'destination'))) }),
    updateDestination: async (r) => {
      const c = r.credentials;
      const view = await destinations.update(r.tenantId, idOf(r.destinationId, 'destination'), {
        ...(r.displayName !== undefined ? { display_name: r.displayName } : {}),
        ...(c
          ? {
              credentials: { access_key_id: c.accessKeyId, secret_access_key: c.secretAccessKey, ...(c.sessionToken ? { session_token: c.sessionToken } : {}) },
            }
          : {}),
      });
      return { destination: destinationMessage(view) };
    },
    deleteDestination: async (r) => {
      await destinations.delete(r.tenantId, idOf(r.destinationId, 'destination'));
      return {};
    },
    createBulkExport: async (r) => {
      const row = await exports.create(r.tenantId, {
        bulk_export_destination_id: idOf(r.bulkExportDestinationId, 'destination'),
        session_id: idOf(r.sessionId, 'tracing project (session_id)'),
        start_time: required(date(r.startTime), 'start_time'),
        ...(r.endTime ? { end_time: timestampDate(r.endTime) } : {}),
        format_version: r.formatVersion,
        ...(r.filter !== undefined ? { filter: r.filter } : {}),
        ...(r.exportFields ? { export_fields: r.exportFields.fields } : {}),
        ...(r.intervalHours !== undefined ? { interval_hours: r.intervalHours } : {}),
      });
      return { export: exportMessage(row) };
    },
    listBulkExports: async (r) => ({ exports: (await exports.list(r.tenantId, page(r.limit, r.offset))).map(exportMessage) }),
    getBulkExport: async (r) => ({ export: exportMessage(await exports.get(r.tenantId, idOf(r.bulkExportId, 'bulk export'))) }),
    cancelBulkExport: async (r) => ({ export: exportMessage(await exports.cancel(r.tenantId, idOf(r.bulkExportId, 'bulk export'))) }),
    listBulkExportRuns: async (r) => ({ runs: (await exports.runs(r.tenantId, idOf(r.bulkExportId, 'bulk export'))).map(runMessage) }),
  };
}
