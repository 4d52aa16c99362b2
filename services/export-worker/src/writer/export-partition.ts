/**
 * Writes one export partition (one project's runs of one day, within the export's range) as Parquet
 * files to S3, resumably.
 *
 * Runs are read in keyset pages in (start_time, id) order and streamed into a file until it holds
 * `fileRows` rows; its bytes go to S3 as they are encoded, so memory stays bounded whatever the
 * export's size. Files are named after their position in the partition (`part-00000.parquet`, …),
 * so a file rewritten after a crash replaces the same object.
 *
 * Exactly once, whenever the worker dies: a file's object only appears when its upload completes
 * (PutObject, or CompleteMultipartUpload — parts uploaded before are invisible), and the
 * checkpoint records it as `pending_upload` (key, last run, row count) before that step and as
 * committed (cursor moved, file listed) after it. On resume a pending upload whose object exists is
 * committed as is; one whose object is missing is written again from the cursor.
 */
import type { S3Client } from '@aws-sdk/client-s3';
import { InvalidArgumentError } from '@berth/errors';
import type { FilterNode } from '../filter/parse.js';
import { exportBytesWritten, exportRowsWritten } from '../metrics.js';
import type { RunRow, TraceStore } from '../traces/trace-store.js';
import { runsToColumns, selectFields, type ExportField } from './columns.js';
import { ObjectUpload, objectExists } from './object-upload.js';
import { ParquetEncoder, type ParquetOptions } from './parquet-stream.js';

export { EXPORT_FIELDS, type ExportField } from './columns.js';

/** Where a partition's files go. */
export interface ExportTarget {
  client: S3Client;
  bucket: string;
  /** Key prefix of the partition folder (see {@link partitionFolder}), no trailing slash. */
  folder: string;
}

export interface RunCursor {
  start_time: string;
  id: string;
}

/** Progress of one partition, saved by the caller (in the export run's record) and given back on resume. */
export interface PartitionCheckpoint {
  /** The last exported run (keyset position); null before the first file. */
  cursor: RunCursor | null;
  rows_written: number;
  /** Object keys, in order. */
  exported_files: string[];
  /** Recorded BEFORE an upload completes; cleared (and cursor moved) after it completed. */
  pending_upload: { file_path: string; target_cursor: RunCursor; rows_count: number } | null;
}

export interface ExportPartitionOptions {
  traces: TraceStore;
  tenantId: string;
  sessionId: string;
  /** [start, end) on run start_time: the partition's day intersected with the export's range. */
  start: Date;
  end: Date;
  filter?: FilterNode;
  /** Columns to write, in order (a subset of EXPORT_FIELDS); default all. */
  fields?: readonly ExportField[];
  target: ExportTarget;
  checkpoint: PartitionCheckpoint;
  /** Persist progress; the writer awaits it before moving on (pending_upload first, then the moved cursor). */
  save(checkpoint: PartitionCheckpoint): Promise<void>;
  signal?: AbortSignal;
  /** Rows read per page from Postgres. @default 1000 */
  pageRows?: number;
  /** A file is closed after this many rows. @default 100000 */
  fileRows?: number;
}

/** Tuning below the interface: row groups and S3 part size (tests and the benchmark). */
export interface ExportTuning extends ParquetOptions {
  partBytes?: number;
}

export function emptyCheckpoint(): PartitionCheckpoint {
  return { cursor: null, rows_written: 0, exported_files: [], pending_upload: null };
}

/** `<prefix>/export_id=<id>/tenant_id=<t>/session_id=<s>/runs/year=<yyyy>/month=<mm>/day=<dd>` (no leading slash for an empty prefix). */
export function partitionFolder(p: { prefix: string; exportId: string; tenantId: string; sessionId: string; day: string }): string {
  const day = /^(\d{4})-(\d{2})-(\d{2})$/.exec(p.day);
  if (!day) throw new InvalidArgumentError(`partition day must be YYYY-MM-DD, got ${JSON.stringify(p.day)}`);
  const prefix = p.prefix.replace(/\/+$/, '');
  const folder = `export_id=${p.exportId}/tenant_id=${p.tenantId}/session_id=${p.sessionId}/runs/year=${day[1]}/month=${day[2]}/day=${day[3]}`;
  return prefix === '' ? folder : `${prefix}/${folder}`;
}

/** The key of the partition's file at `position` (0-based). */
export function partitionFileKey(folder: string, position: number): string {
  return `${folder}/part-${String(position).padStart(5, '0')}.parquet`;
}

/**
 * Exports the partition's runs after `checkpoint` and returns the final checkpoint (also saved).
 * An empty partition (or an already finished one) writes no file: there is nothing to read, and an
 * empty Parquet file would only add a schema-only object; the caller may still mark it done.
 */
export async function exportPartition(options: ExportPartitionOptions, tuning: ExportTuning = {}): Promise<PartitionCheckpoint> {
  const fields = selectFields(options.fields);
  const pageRows = positive(options.pageRows ?? 1000, 'pageRows');
  const fileRows = positive(options.fileRows ?? 100_000, 'fileRows');
  const { target, signal } = options;
  let checkpoint = structuredClone(options.checkpoint);

  const pending = checkpoint.pending_upload;
  if (pending) {
    signal?.throwIfAborted();
    // The upload may have completed without its commit being saved. Committing it is safe either
    // way; rewriting it would duplicate its rows. A missing object is rewritten below: the next
    // file has the same position, hence the same key.
    checkpoint = (await objectExists(target.client, target.bucket, pending.file_path)) ? committed(checkpoint) : { ...checkpoint, pending_upload: null };
    await options.save(checkpoint);
  }

  const readPage = (after: RunCursor | null, limit: number): Promise<RunRow[]> => {
    signal?.throwIfAborted();
    return options.traces.scanRuns(options.tenantId, {
      sessionId: options.sessionId,
      start: options.start,
      end: options.end,
      filter: options.filter,
      after: after ? { start_time: new Date(after.start_time), id: after.id } : undefined,
      limit,
      jsonText: true,
    });
  };

  // Started with the first page to write; one per partition, for all of its files.
  let encoder: ParquetEncoder | undefined;
  try {
    for (;;) {
      const full = await exportFile();
      if (!full) return checkpoint;
    }
  } finally {
    await encoder?.close();
  }

  /** Writes the next file from the cursor; true when it is full (more runs may follow). */
  async function exportFile(): Promise<boolean> {
    let limit = Math.min(pageRows, fileRows);
    const first = await readPage(checkpoint.cursor, limit);
    if (first.length === 0) return false;
    encoder ??= new ParquetEncoder(fields, tuning);
    const key = partitionFileKey(target.folder, checkpoint.exported_files.length);
    const upload = new ObjectUpload(target.client, target.bucket, key, tuning.partBytes);
    let rows = 0;
    let bytes = 0;
    let last = first.at(-1)!;

    // The next page is read while the current one is converted, and pages are encoded on the
    // encoder's thread meanwhile: Postgres, this thread and the encoder work at the same time.
    async function* batches() {
      let page = first;
      for (;;) {
        rows += page.length;
        last = page.at(-1)!;
        const more = page.length === limit && rows < fileRows;
        limit = Math.min(pageRows, fileRows - rows);
        const next = more ? readPage(cursorOf(last), limit) : undefined;
        // Marks a failed read as handled while the encoder works; it is still thrown below.
        next?.catch(() => undefined);
        yield runsToColumns(fields, page);
        if (!next) return;
        page = await next;
        if (page.length === 0) return;
      }
    }

    try {
      await encoder.encode(batches(), (chunk) => {
        bytes += chunk.byteLength;
        return upload.write(chunk);
      });
      signal?.throwIfAborted();
      checkpoint = { ...checkpoint, pending_upload: { file_path: key, target_cursor: cursorOf(last), rows_count: rows } };
      await options.save(checkpoint);
      await upload.complete();
    } catch (error) {
      await upload.abandon();
      throw error;
    }
    checkpoint = committed(checkpoint);
    await options.save(checkpoint);
    exportRowsWritten.inc(rows);
    exportBytesWritten.inc(bytes);
    return rows === fileRows;
  }
}

/** The checkpoint with its pending upload counted as done. */
function committed(checkpoint: PartitionCheckpoint): PartitionCheckpoint {
  const pending = checkpoint.pending_upload!;
  return {
    cursor: pending.target_cursor,
    rows_written: checkpoint.rows_written + pending.rows_count,
    exported_files: [...checkpoint.exported_files, pending.file_path],
    pending_upload: null,
  };
}

function cursorOf(row: RunRow): RunCursor {
  return { start_time: row.start_time.toISOString(), id: row.id };
}

function positive(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1) throw new InvalidArgumentError(`${name} must be a positive integer, got ${value}`);
  return value;
}
