/**
 * The Parquet encoder's thread (started by {@link ParquetEncoder}): turns the pages of column
 * buffers it is sent into zstd Parquet with parquet-wasm and posts the file's bytes back as each row
 * group closes. Encoding here lets the export's main thread read and convert the next pages from
 * Postgres meanwhile — on one thread, reading and encoding took turns.
 *
 * Messages in: `page` (a {@link ColumnPage}), `end` (the file is complete). Out: `taken` (a page was
 * handed to the encoder: room for another), `chunk` (file bytes, in order), `done` (the file's
 * last bytes were sent), `failed` (the encoder's error, as text: the file is abandoned).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Table as ArrowTable, tableToIPC } from 'apache-arrow';
import { Compression, Table as WasmTable, WriterPropertiesBuilder, transformParquetStream } from 'parquet-wasm';
import { columnsToBatch, exportSchema, type ColumnPage, type ExportField } from './columns.js';

export interface EncoderSetup {
  fields: readonly ExportField[];
  rowGroupRows: number;
  rowGroupBytes: number;
}

export type ToEncoder = { type: 'page'; page: ColumnPage } | { type: 'end' } | { type: 'file' };
export type FromEncoder = { type: 'taken' } | { type: 'chunk'; bytes: Uint8Array } | { type: 'done' } | { type: 'failed'; message: string };

const port = parentPort!;
const setup = workerData as EncoderSetup;
const schema = exportSchema(setup.fields);
const properties = () =>
  new WriterPropertiesBuilder()
    .setCompression(Compression.ZSTD)
    .setMaxRowGroupSize(setup.rowGroupRows)
    .setMaxRowGroupBytes(setup.rowGroupBytes)
    .setCreatedBy('berth export-worker')
    .build();

// Messages wait here until the encoder pulls them; `file` starts the next file.
const inbox: ToEncoder[] = [];
let wake: (() => void) | undefined;
port.on('message', (message: ToEncoder) => {
  inbox.push(message);
  wake?.();
});
async function receive(): Promise<ToEncoder> {
  while (inbox.length === 0) await new Promise<void>((resolve) => (wake = resolve));
  wake = undefined;
  return inbox.shift()!;
}
const post = (message: FromEncoder) => port.postMessage(message);

async function encodeFile(): Promise<void> {
  const input = new ReadableStream<unknown>(
    {
      async pull(controller) {
        const message = await receive();
        if (message.type !== 'page') {
          controller.close();
          return;
        }
        post({ type: 'taken' });
        // Arrow JS and the wasm module do not share memory: the batch crosses as Arrow IPC. The
        // table is freed here; the batches it hands over are freed by the encoder.
        const table = WasmTable.fromIPCStream(tableToIPC(new ArrowTable(columnsToBatch(schema, message.page)), 'stream'));
        try {
          for (const batch of table.recordBatches()) controller.enqueue(batch);
        } finally {
          table.free();
        }
      },
    },
    { highWaterMark: 0 },
  );
  const output = (await transformParquetStream(input, properties())) as ReadableStream<Uint8Array>;
  for (const reader = output.getReader(); ;) {
    const chunk = await reader.read();
    if (chunk.done) break;
    const bytes = chunk.value;
    // Moved rather than copied when the chunk is the whole of its buffer.
    const owned = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
    port.postMessage({ type: 'chunk', bytes } satisfies FromEncoder, owned ? [bytes.buffer as ArrayBuffer] : []);
  }
  post({ type: 'done' });
}

for (;;) {
  const message = await receive();
  if (message.type !== 'file') continue;
  try {
    await encodeFile();
  } catch (error) {
    // The main thread abandons the file and ends this thread; nothing here is worth keeping.
    post({ type: 'failed', message: error instanceof Error ? error.message : String(error) });
    break;
  }
}
