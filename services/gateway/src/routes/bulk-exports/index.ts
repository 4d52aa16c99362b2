/**
 * The bulk-export API (`/api/v1/bulk-exports…`, area D of the platform interface): destinations,
 * exports (one-time and scheduled) and their runs, translated to
 * `berth.exportworker.v1.BulkExportService` calls. Every call carries the caller's tenant (the
 * authenticate hook has checked X-Tenant-Id against the key); another tenant's ids are 404s. A
 * path id that is not a UUID is a 404 too, like an unknown one.
 */
import { NotFoundError } from '@berth/errors';
import { pathUuid } from '../../path-ids.js';
import { timestampDate, timestampFromDate, type BulkExport, type BulkExportRun, type Destination } from '@berth/proto';
import { z } from 'zod';
import type { ExportWorkerClients } from '../../export-worker.js';
import {
  CancelExportBody,
  CreateDestinationBody,
  CreateExportBody,
  DestinationOut,
  DestinationPath,
  ExportOut,
  ExportPath,
  ExportRunOut,
  exportRunStatuses,
  exportStatuses,
  ListDestinationsQuery,
  ListExportsQuery,
  UpdateDestinationBody,
} from './schemas.js';
import type { GatewayApi } from '../../access.js';

export interface BulkExportRouteDeps {
  exportWorker: ExportWorkerClients;
}

const UNKNOWN = 'UNKNOWN';
const iso = (t: Parameters<typeof timestampDate>[0] | undefined) => (t ? timestampDate(t).toISOString() : null);

function idOf(id: string, what: string): string {
  return pathUuid(id, `${what} ${id} not found`);
}

function found<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new NotFoundError(`${what} not found`);
  return value;
}

function destinationJson(d: Destination): z.input<typeof DestinationOut> {
  return {
    id: d.id,
    tenant_id: d.tenantId,
    destination_type: d.destinationType,
    display_name: d.displayName,
    config: {
      bucket_name: d.config?.bucketName ?? '',
      prefix: d.config?.prefix ?? '',
      region: d.config?.region ?? null,
      endpoint_url: d.config?.endpointUrl ?? null,
    },
    credentials_keys: d.credentialsKeys,
    created_at: iso(d.createdAt) ?? '',
    updated_at: iso(d.updatedAt) ?? '',
  };
}

function exportJson(e: BulkExport): z.input<typeof ExportOut> {
  return {
    id: e.id,
    tenant_id: e.tenantId,
    bulk_export_destination_id: e.bulkExportDestinationId,
    session_id: e.sessionId,
    start_time: iso(e.startTime) ?? '',
    end_time: iso(e.endTime),
    format_version: e.formatVersion,
    filter: e.filter ?? null,
    export_fields: e.exportFields.length ? e.exportFields : null,
    interval_hours: e.intervalHours ?? null,
    status: exportStatuses.decode(e.status) ?? UNKNOWN,
    status_message: e.statusMessage || null,
    source_bulk_export_id: e.sourceBulkExportId ?? null,
    created_at: iso(e.createdAt) ?? '',
    updated_at: iso(e.updatedAt) ?? '',
    finished_at: iso(e.finishedAt),
  };
}

function runJson(r: BulkExportRun): z.input<typeof ExportRunOut> {
  return {
    id: r.id,
    bulk_export_id: r.bulkExportId,
    status: exportRunStatuses.decode(r.status) ?? UNKNOWN,
    start_time: iso(r.startTime) ?? '',
    end_time: iso(r.endTime) ?? '',
    retry_number: r.retryNumber,
    errors: r.errors,
    rows_written: Number(r.rowsWritten),
    exported_files: r.exportedFiles,
    created_at: iso(r.createdAt) ?? '',
    updated_at: iso(r.updatedAt) ?? '',
    finished_at: iso(r.finishedAt),
  };
}

export function bulkExportRoutes(api: GatewayApi, deps: BulkExportRouteDeps): void {
  const rpc = () => deps.exportWorker.bulkExports;
  const tags = ['bulk-exports'];

  api
    .route({
      method: 'post',
      path: '/api/v1/bulk-exports/destinations',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Create an export destination (an S3-compatible bucket)',
      description:
        'Checked before it is saved by writing a small object under `<prefix>/tmp/` (removed again when the credentials may ' +
        'delete): a 400 says in words why the write failed (missing bucket, access denied, unreachable endpoint). ' +
        'Credentials are stored encrypted and never returned, only their key names (`credentials_keys`).',
      tags,
      body: CreateDestinationBody,
      response: DestinationOut,
      errors: [400, 503],
      handler: async ({ body, auth }) => {
        const answer = await rpc().createDestination({
          tenantId: auth.tenantId,
          destinationType: body.destination_type,
          displayName: body.display_name,
          config: { bucketName: body.config.bucket_name, prefix: body.config.prefix, region: body.config.region, endpointUrl: body.config.endpoint_url },
          credentials: {
            accessKeyId: body.credentials.access_key_id,
            secretAccessKey: body.credentials.secret_access_key,
            sessionToken: body.credentials.session_token,
          },
        });
        return destinationJson(found(answer.destination, 'Destination'));
      },
    })
    .route({
      method: 'get',
      path: '/api/v1/bulk-exports/destinations',
      access: ['api_key', 'access_token', 'session'],
      summary: 'List export destinations, newest first',
      tags,
      query: ListDestinationsQuery,
      response: z.array(DestinationOut),
      errors: [503],
      handler: async ({ query, auth }) =>
        (await rpc().listDestinations({ tenantId: auth.tenantId, limit: query.limit, offset: query.offset })).destinations.map(destinationJson),
    })
    .route({
      method: 'get',
      path: '/api/v1/bulk-exports/destinations/{destination_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Get an export destination',
      tags,
      params: DestinationPath,
      response: DestinationOut,
      errors: [404, 503],
      handler: async ({ params, auth }) => {
        const answer = await rpc().getDestination({ tenantId: auth.tenantId, destinationId: idOf(params.destination_id, 'destination') });
        return destinationJson(found(answer.destination, 'Destination'));
      },
    })
    .route({
      method: 'patch',
      path: '/api/v1/bulk-exports/destinations/{destination_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Rename a destination or rotate its credentials',
      description: 'New credentials are checked with a test write before they are saved (a 400 when it fails); runs started later use them.',
      tags,
      params: DestinationPath,
      body: UpdateDestinationBody,
      response: DestinationOut,
      errors: [400, 404, 503],
      handler: async ({ params, body, auth }) => {
        const c = body.credentials;
        const answer = await rpc().updateDestination({
          tenantId: auth.tenantId,
          destinationId: idOf(params.destination_id, 'destination'),
          displayName: body.display_name,
          credentials: c ? { accessKeyId: c.access_key_id, secretAccessKey: c.secret_access_key, sessionToken: c.session_token } : undefined,
        });
        return destinationJson(found(answer.destination, 'Destination'));
      },
    })
    .route({
      method: 'delete',
      path: '/api/v1/bulk-exports/destinations/{destination_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Delete an export destination',
      description: 'Refused (409) while an export that has not finished, or a schedule that is not cancelled, writes to it.',
      tags,
      params: DestinationPath,
      errors: [404, 409, 503],
      handler: async ({ params, auth }) => {
        await rpc().deleteDestination({ tenantId: auth.tenantId, destinationId: idOf(params.destination_id, 'destination') });
      },
    })
    .route({
      method: 'post',
      path: '/api/v1/bulk-exports',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Create a bulk export (one-time, or scheduled with interval_hours)',
      description:
        'A one-time export writes the runs of `session_id` whose start_time is in [start_time, end_time) to the destination as ' +
        'Parquet, one export run per UTC day. A scheduled export (interval_hours 1-168, no end_time) spawns export k covering ' +
        '[start_time + k·h, start_time + (k+1)·h) 10 minutes after that interval ends; its status stays SCHEDULED until cancelled. ' +
        'Every broken rule is a 422 naming the field; an unknown destination or project is a 404.',
      tags,
      body: CreateExportBody,
      response: ExportOut,
      errors: [404, 503],
      handler: async ({ body, auth }) => {
        const answer = await rpc().createBulkExport({
          tenantId: auth.tenantId,
          bulkExportDestinationId: body.bulk_export_destination_id,
          sessionId: body.session_id,
          startTime: timestampFromDate(new Date(body.start_time)),
          endTime: body.end_time ? timestampFromDate(new Date(body.end_time)) : undefined,
          formatVersion: body.format_version,
          filter: body.filter,
          exportFields: body.export_fields ? { fields: body.export_fields } : undefined,
          intervalHours: body.interval_hours,
        });
        return exportJson(found(answer.export, 'Bulk export'));
      },
    })
    .route({
      method: 'get',
      path: '/api/v1/bulk-exports',
      access: ['api_key', 'access_token', 'session'],
      summary: 'List bulk exports, newest first',
      description: 'A JSON array; page with `limit` (at most 1000) and `offset`.',
      tags,
      query: ListExportsQuery,
      response: z.array(ExportOut),
      errors: [503],
      handler: async ({ query, auth }) =>
        (await rpc().listBulkExports({ tenantId: auth.tenantId, limit: query.limit, offset: query.offset })).exports.map(exportJson),
    })
    .route({
      method: 'get',
      path: '/api/v1/bulk-exports/{export_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Get a bulk export and its status',
      tags,
      params: ExportPath,
      response: ExportOut,
      errors: [404, 503],
      handler: async ({ params, auth }) => {
        const answer = await rpc().getBulkExport({ tenantId: auth.tenantId, bulkExportId: idOf(params.export_id, 'bulk export') });
        return exportJson(found(answer.export, 'Bulk export'));
      },
    })
    .route({
      method: 'patch',
      path: '/api/v1/bulk-exports/{export_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Cancel a bulk export or a schedule',
      description:
        '`{"status": "CANCELLED"}` is the only change. A running export stops between pages; a cancelled schedule spawns no ' +
        'more exports and leaves the ones it spawned alone. An export that already finished is a 409.',
      tags,
      params: ExportPath,
      body: CancelExportBody,
      response: ExportOut,
      errors: [404, 409, 503],
      handler: async ({ params, auth }) => {
        const answer = await rpc().cancelBulkExport({ tenantId: auth.tenantId, bulkExportId: idOf(params.export_id, 'bulk export') });
        return exportJson(found(answer.export, 'Bulk export'));
      },
    })
    .route({
      method: 'get',
      path: '/api/v1/bulk-exports/{export_id}/runs',
      access: ['api_key', 'access_token', 'session'],
      summary: 'List the runs of a bulk export (one per UTC day)',
      description: 'Each with its status, rows written, files written and the error of each failed attempt (`errors.retry_<n>`).',
      tags,
      params: ExportPath,
      response: z.array(ExportRunOut),
      errors: [404, 503],
      handler: async ({ params, auth }) =>
        (await rpc().listBulkExportRuns({ tenantId: auth.tenantId, bulkExportId: idOf(params.export_id, 'bulk export') })).runs.map(runJson),
    });
}
