/**
 * Streaming Parquet encoding on a thread of its own (./parquet-worker.ts): pages of column buffers
 * go in one at a time and the file's bytes come out as each row group closes, so a file is never
 * held whole in memory — only the row group being encoded (bounded by
 * {@link ParquetOptions.rowGroupRows}/`rowGroupBytes`), a few pages in flight and the bytes not yet
 * uploaded. The caller's thread meanwhile reads and converts the next pages.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { ColumnPage, ExportField } from './columns.js';
import type { EncoderSetup, FromEncoder, ToEncoder } from './parquet-worker.js';

export interface ParquetOptions {
  /** Rows per row group. @default 20000 */
  rowGroupRows?: number;
  /** Bytes per row group (before the row count is reached). @default 64 MiB */
  rowGroupBytes?: number;
}

/** The encoder's failure (a wasm error, or its thread died). */
export class ParquetEncodingError extends Error {
  override name = 'ParquetEncodingError';
}

// Built JavaScript, also when this module runs from its TypeScript source (tests): a thread cannot
// load TypeScript. From dist/writer/ and src/writer/ alike this is dist/writer/parquet-worker.js.
const WORKER_SCRIPT = fileURLToPath(new URL('../../dist/writer/parquet-worker.js', import.meta.url));
/** Pages handed to the encoder's thread and not yet taken by it. */
const PAGES_IN_FLIGHT = 2;
/** Encoded bytes not yet taken by the sink before reading stops: a slow upload slows the reading. */
const UNWRITTEN_BYTES = 32 * 1024 * 1024;

/**
 * One encoder thread, for any number of files one after another (one export partition). `close`
 * ends the thread; after a failed file the encoder is unusable.
 */
export class ParquetEncoder {
  private readonly worker: Worker;
  private listener: ((message: FromEncoder) => void) | undefined;
  /** Set once the thread has failed or exited: every later wait throws it. */
  private broken: Error | undefined;
  private notifyBroken: (() => void) | undefined;

  constructor(fields: readonly ExportField[], options: ParquetOptions = {}) {
    if (!existsSync(WORKER_SCRIPT)) throw new ParquetEncodingError(`the export-worker is not built (${WORKER_SCRIPT} is missing): run \`npm run build\``);
    const setup: EncoderSetup = { fields, rowGroupRows: options.rowGroupRows ?? 20_000, rowGroupBytes: options.rowGroupBytes ?? 64 * 1024 * 1024 };
    this.worker = new Worker(WORKER_SCRIPT, { workerData: setup });
    this.worker.on('message', (message: FromEncoder) => this.listener?.(message));
    this.worker.on('error', (error) => this.fail(new ParquetEncodingError(`the Parquet encoder failed: ${error.message}`, { cause: error })));
    this.worker.on('exit', (code) => this.fail(new ParquetEncodingError(`the Parquet encoder's thread exited (code ${code})`)));
  }

  /**
   * Encodes `pages` as one zstd-compressed Parquet file, handing its bytes to `sink` in order. An
   * error of `pages` (a failed query, an abort) or of `sink` is thrown as it is.
   */
  async encode(pages: AsyncIterable<ColumnPage>, sink: (bytes: Uint8Array) => Promise<void>): Promise<void> {
    if (this.broken) throw this.broken;
    let taken = 0;
    let sent = 0;
    let unwritten = 0;
    let writing: Promise<void> = Promise.resolve();
    let sinkError: unknown;
    let finished = false;
    let changed: (() => void) | undefined;
    this.listener = (message) => {
      switch (message.type) {
        case 'taken':
          taken += 1;
          break;
        case 'chunk': {
          const bytes = message.bytes;
          unwritten += bytes.byteLength;
          writing = writing.then(async () => {
            if (sinkError === undefined) await sink(bytes).catch((error: unknown) => void (sinkError ??= error));
            unwritten -= bytes.byteLength;
            changed?.();
          });
          break;
        }
        case 'done':
          finished = true;
          break;
        case 'failed':
          this.fail(new ParquetEncodingError(`Parquet encoding failed: ${message.message}`));
          return;
      }
      changed?.();
    };
    this.notifyBroken = () => changed?.();
    // Waits until `ready()` holds, the sink failed or the thread broke.
    const until = async (ready: () => boolean) => {
      for (;;) {
        if (sinkError !== undefined) throw sinkError;
        if (this.broken) throw this.broken;
        if (ready()) return;
        await new Promise<void>((resolve) => (changed = resolve));
        changed = undefined;
      }
    };

    try {
      this.post({ type: 'file' });
      for await (const page of pages) {
        await until(() => sent - taken < PAGES_IN_FLIGHT && unwritten < UNWRITTEN_BYTES);
        // The page's buffers move to the thread instead of being copied; they are not used here again.
        this.post({ type: 'page', page }, [
          ...new Set(page.columns.flatMap((c) => [c.data, c.valueOffsets, c.nullBitmap].flatMap((a) => (a ? [a.buffer as ArrayBuffer] : [])))),
        ]);
        sent += 1;
      }
      this.post({ type: 'end' });
      await until(() => finished);
      await writing;
      if (sinkError !== undefined) throw sinkError;
    } catch (error) {
      // The file is abandoned: so is this thread (it may still be encoding it).
      if (!this.broken) this.fail(new ParquetEncodingError('the encoder was stopped after a failed file', { cause: error }));
      await writing;
      throw error;
    } finally {
      this.listener = undefined;
      this.notifyBroken = undefined;
    }
  }

  async close(): Promise<void> {
    this.fail(new ParquetEncodingError('the encoder is closed'));
    await this.worker.terminate();
  }

  private post(message: ToEncoder, transfer: ArrayBuffer[] = []): void {
    this.worker.postMessage(message, transfer);
  }

  private fail(error: Error): void {
    if (this.broken) return;
    this.broken = error;
    this.notifyBroken?.();
    void this.worker.terminate();
  }
}
