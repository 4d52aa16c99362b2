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

/** The ingest backlog (read at each scrape): batches being written, and patches waiting for their run. */
export const ingestBatchesInFlight = gauge({
  name: 'berth_trace_ingest_batches_in_flight',
  help: 'Run batches this process is writing now; at TRACE_INGEST_MAX_BATCHES_IN_FLIGHT more are refused (503, retried by clients)',
});
export const pendingRunPatches = gauge({
  name: 'berth_trace_pending_run_patches',
  help: 'Run patches stored while they wait for their run to arrive (counted up to 100000)',
});

/** Export runs executing in this process (read at each scrape). */
export const exportsRunning = gauge({
  name: 'berth_exports_running',
  help: 'Export runs executing in this process',
});

/**
 * Export run attempts by how they ended. `cause` of a failure: `destination` — the tenant's bucket or
 * credentials refused it, or the destination was deleted (the tenant's to fix) —, `storage` — the
 * storage kept failing until the last retry —, or `error` (anything else: the operator's to look at).
 */
export const exportRunAttempts = counter<'outcome' | 'cause'>({
  name: 'berth_export_run_attempts_total',
  help: 'Export run attempts by outcome (completed, retrying, failed) and, for the others, cause (destination, storage, error)',
  labelNames: ['outcome', 'cause'],
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
