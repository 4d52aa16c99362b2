/**
 * The export-worker's metrics (see docs/operate/monitor.md): trace ingest and bulk exports. No
 * tenant, project, export or run id in a label. Answers the gateway gives under load (429, 503 with
 * Retry-After) are in the HTTP metrics of the ingest routes (`berth_http_request_duration_seconds`).
 */
import { counter, gauge } from '@berth/metrics';

const ingestBatches = counter({
  name: 'berth_trace_ingest_batches_total',
  help: 'Batches of run operations (IngestRuns calls) the trace store took',
});

const ingestRuns = counter<'result'>({
  name: 'berth_trace_ingest_runs_total',
  help: 'Run operations ingested, by result: stored, pending (a patch waiting for its run) or refused',
  labelNames: ['result'],
});

/** Records one ingested batch by what became of its operations. */
export function recordIngest(result: { stored: unknown[]; pending: unknown[]; rejected: unknown[] }): void {
  ingestBatches.inc();
  ingestRuns.inc({ result: 'stored' }, result.stored.length);
  ingestRuns.inc({ result: 'pending' }, result.pending.length);
  ingestRuns.inc({ result: 'refused' }, result.rejected.length);
}

/** Export runs executing in this process (read at each scrape). */
export const exportsRunning = gauge({
  name: 'berth_exports_running',
  help: 'Export runs executing in this process',
});

/** Rows and bytes of each Parquet file once it is uploaded and committed. */
export const exportRowsWritten = counter({
  name: 'berth_export_rows_written_total',
  help: 'Runs written to export destinations (counted as each Parquet file is committed)',
});
export const exportBytesWritten = counter({
  name: 'berth_export_bytes_written_total',
  help: 'Bytes of Parquet written to export destinations (counted as each file is committed)',
});
