/**
 * Streaming Parquet encoding with parquet-wasm: record batches go in one at a time and the file's
 * bytes come out as each row group closes, so a file is never held whole in memory — only the row
 * group being encoded (bounded by {@link ParquetOptions.rowGroupRows}/`rowGroupBytes`) and the page
 * being converted.
 */
import { Table as ArrowTable, tableToIPC, type RecordBatch } from 'apache-arrow';
import { Compression, Table as WasmTable, WriterPropertiesBuilder, transformParquetStream } from 'parquet-wasm';

export interface ParquetOptions {
  /** Rows per row group. @default 20000 */
  rowGroupRows?: number;
  /** Bytes per row group (before the row count is reached). @default 64 MiB */
  rowGroupBytes?: number;
}

/**
 * Encodes `batches` (all of one schema) as one zstd-compressed Parquet file, handing its bytes to
 * `sink` in order; `sink` is awaited before more input is read, so a slow upload slows the reading.
 */
export async function encodeParquet(batches: AsyncIterable<RecordBatch>, sink: (bytes: Uint8Array) => Promise<void>, options: ParquetOptions = {}): Promise<void> {
  const source = batches[Symbol.asyncIterator]();
  // An error of the input (a failed query, an abort) reaches us through the encoder, which may wrap
  // it: keep the original to throw.
  let inputError: unknown;
  const input = new ReadableStream<unknown>(
    {
      async pull(controller) {
        const next = await source.next().catch((error: unknown) => {
          inputError = error;
          throw error;
        });
        if (next.done) {
          controller.close();
          return;
        }
        // Arrow JS and the wasm module do not share memory: the batch crosses as Arrow IPC. The
        // table is freed here; the batches it hands over are freed by the encoder.
        const table = WasmTable.fromIPCStream(tableToIPC(new ArrowTable(next.value), 'stream'));
        try {
          for (const batch of table.recordBatches()) controller.enqueue(batch);
        } finally {
          table.free();
        }
      },
      async cancel() {
        await source.return?.();
      },
    },
    { highWaterMark: 0 },
  );
  const properties = new WriterPropertiesBuilder()
    .setCompression(Compression.ZSTD)
    .setMaxRowGroupSize(options.rowGroupRows ?? 20_000)
    .setMaxRowGroupBytes(options.rowGroupBytes ?? 64 * 1024 * 1024)
    .setCreatedBy('berth export-worker')
    .build();
  const output = (await transformParquetStream(input, properties)) as ReadableStream<Uint8Array>;
  const reader = output.getReader();
  try {
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) return;
      await sink(chunk.value);
    }
  } catch (error) {
    // Stop the encoder (and with it the reading) before the error goes up; the cancel's own failure
    // says nothing new.
    await reader.cancel(error).catch(() => undefined);
    throw inputError ?? error;
  }
}
