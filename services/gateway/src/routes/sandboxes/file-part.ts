/**
 * The `file` part of a `multipart/form-data` upload (what the client's `write` sends), read as the
 * body arrives, in chunks of at most `chunkBytes`: a file of any size passes through the gateway
 * without being held in memory. The boundary comes from the same parsing as trace ingest
 * (`boundaryOf`); this is the streaming counterpart of its `parseMultipart`.
 */
import { RequestValidationError } from '@berth/errors';

/** Largest header block of one part: a Content-Disposition and a Content-Type are a few hundred bytes. */
const MAX_HEADER_BYTES = 16 * 1024;

function malformed(msg: string, loc: (string | number)[] = ['body']): RequestValidationError {
  return new RequestValidationError([{ loc, msg, type: 'value_error.multipart' }]);
}

type State = 'preamble' | 'headers' | 'data' | 'skip' | 'done';

/**
 * Yields the bytes of the part named `field`; other parts are skipped. Throws
 * RequestValidationError (422) for a body without that part, with it twice, or cut short.
 */
export async function* filePart(body: AsyncIterable<Buffer>, boundary: string, field: string, chunkBytes: number): AsyncGenerator<Buffer, void, undefined> {
  // Every delimiter but the first follows a CRLF; a CRLF put in front makes the first one alike.
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  let buffer: Buffer = Buffer.from('\r\n');
  let state = 'preamble' as State;
  let seen = false;

  /** Splits data into chunks of at most chunkBytes. */
  function* pieces(data: Buffer): Generator<Buffer> {
    for (let at = 0; at < data.length; at += chunkBytes) yield data.subarray(at, Math.min(at + chunkBytes, data.length));
  }

  /** Consumes what the buffer holds; yields file bytes; returns when it needs more input or the body is complete. */
  const step = function* (): Generator<Buffer, void> {
    for (;;) {
      if (state === 'done') return;
      if (state === 'preamble' || state === 'data' || state === 'skip') {
        const at = buffer.indexOf(delimiter);
        if (at < 0) {
          // Keep what could be the start of a delimiter; pass the rest on.
          const keep = Math.min(buffer.length, delimiter.length - 1);
          if (state === 'data') yield* pieces(buffer.subarray(0, buffer.length - keep));
          buffer = buffer.subarray(buffer.length - keep);
          return;
        }
        if (state === 'data') yield* pieces(buffer.subarray(0, at));
        buffer = buffer.subarray(at + delimiter.length);
        state = 'headers';
      }
      // Right after a delimiter: `--` ends the body, else the rest of the line, then the part's headers.
      if (buffer.length < 2) return;
      if (buffer[0] === 0x2d && buffer[1] === 0x2d) {
        state = 'done';
        return;
      }
      const lineEnd = buffer.indexOf('\r\n');
      const headersEnd = lineEnd < 0 ? -1 : buffer.indexOf('\r\n\r\n', lineEnd);
      const emptyHeaders = lineEnd >= 0 && buffer.subarray(lineEnd + 2, lineEnd + 4).toString('latin1') === '\r\n';
      if (lineEnd < 0 || (headersEnd < 0 && !emptyHeaders)) {
        if (buffer.length > MAX_HEADER_BYTES) throw malformed(`A multipart part has more than ${MAX_HEADER_BYTES} bytes of headers`);
        return;
      }
      const end = emptyHeaders ? lineEnd : headersEnd;
      const headers = buffer.subarray(lineEnd + 2, end).toString('utf8');
      buffer = buffer.subarray(end + 4);
      const name = /^content-disposition:.*?\bname="([^"]*)"/im.exec(headers)?.[1];
      if (name === field) {
        if (seen) throw malformed(`The body has more than one part named ${field}`);
        seen = true;
        state = 'data';
      } else {
        state = 'skip';
      }
    }
  };

  for await (const chunk of body) {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    yield* step();
    if (state === 'done') break;
  }
  if (state !== 'done') throw malformed('The multipart body ended before its closing boundary (truncated body?)');
  if (!seen) throw malformed(`Send the file as a multipart part named ${field}`, ['body', field]);
}
