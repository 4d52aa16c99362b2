/**
 * The body of `POST /runs/multipart`, read as it arrives: gzip-decoded as it streams in when the
 * client compressed it (the langsmith client streams its body through gzip), split into parts as
 * they complete, never held whole as sent or as decoded; at most `maxBytes` as sent and as
 * decoded. Parts are named `post.<run_id>`, `patch.<run_id>`, `post.<run_id>.<field>` (inputs,
 * outputs, events, ...), `attachment.<run_id>.<name>` and `feedback.<id>`. The sandbox file
 * upload reads its bodies with the same {@link multipartEvents}.
 */
import { Readable } from 'node:stream';
import { createGunzip, createInflate } from 'node:zlib';
import { InvalidArgumentError, RequestValidationError } from '@berth/errors';
import type { Request } from 'express';

/**
 * A body refused before it is read (413 too large, 415 an unsupported type or encoding): no
 * BerthError names these, so the route answers them itself, as the upload route does.
 */
export class TraceBodyError extends Error {
  constructor(
    readonly status: 413 | 415,
    message: string,
  ) {
    super(message);
    this.name = 'TraceBodyError';
  }
}

function malformed(msg: string): RequestValidationError {
  return new RequestValidationError([{ loc: ['body'], msg, type: 'value_error.multipart' }]);
}

export interface MultipartPart {
  name: string;
  contentType: string;
  data: Buffer;
}

const tooLarge = (maxBytes: number, what = '') => new TraceBodyError(413, `The ${what}request body is larger than ${maxBytes} bytes`);

/** The chunks of `body`, refusing (413) past `maxBytes` in all. */
async function* bounded(body: AsyncIterable<Buffer>, maxBytes: number, what?: string): AsyncGenerator<Buffer> {
  let total = 0;
  for await (const chunk of body) {
    total += chunk.length;
    if (total > maxBytes) throw tooLarge(maxBytes, what);
    yield chunk;
  }
}

/** Compressed bytes given to the decoder at once, and decoded bytes it answers at once. */
const DECODE_INPUT_BYTES = 64 * 1024;
const DECODE_OUTPUT_BYTES = 256 * 1024;

/** The chunks of `body` joined into pieces of at least `bytes` (but the last). */
async function* coalesced(body: AsyncIterable<Buffer>, bytes: number): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    pending.push(chunk);
    size += chunk.length;
    if (size >= bytes) {
      yield Buffer.concat(pending, size);
      pending = [];
      size = 0;
    }
  }
  if (size > 0) yield Buffer.concat(pending, size);
}

/**
 * The request body as it arrives, decoded, at most `maxBytes` as sent and `maxBytes` decoded. An
 * unsupported encoding (415) or a declared length over the bound (413) is refused before anything
 * is read.
 */
export async function* bodyChunks(req: Request, maxBytes: number): AsyncGenerator<Buffer> {
  if (Number(req.get('content-length') ?? 0) > maxBytes) throw tooLarge(maxBytes);
  const encoding = (req.get('content-encoding') ?? 'identity').trim().toLowerCase();
  const decoder = encoding === 'gzip' || encoding === 'x-gzip' ? createGunzip : encoding === 'deflate' ? createInflate : undefined;
  if (!decoder && encoding !== 'identity' && encoding !== '') {
    throw new TraceBodyError(415, `Content-Encoding ${encoding} is not supported: send gzip (as GET /info advertises) or no encoding`);
  }
  // Not destroyed when reading stops early: the route still answers on this request.
  const sent = bounded(req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>, maxBytes);
  if (!decoder) return yield* sent;
  // zlib's stream costs a round trip to its thread per write and per output chunk: few, large ones
  // keep the decoding's CPU near a one-shot decode (6x less than 16 KiB chunks of small reads).
  const source = Readable.from(coalesced(sent, DECODE_INPUT_BYTES));
  const decoding = source.pipe(decoder({ chunkSize: DECODE_OUTPUT_BYTES }));
  source.once('error', (error) => decoding.destroy(error));
  try {
    yield* bounded(decoding, maxBytes, 'decoded ');
  } catch (error) {
    if (error instanceof TraceBodyError) throw error;
    throw new InvalidArgumentError(`The request body could not be decoded as ${encoding}: ${(error as Error).message}`, { cause: error });
  } finally {
    decoding.destroy();
    source.destroy();
  }
}

/** The boundary of a `multipart/form-data` content type; `what` the body carries, for the 415's message. */
export function boundaryOf(contentType: string | undefined, what = 'runs'): string {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'multipart/form-data') throw new TraceBodyError(415, `Send ${what} as multipart/form-data, not ${type || 'no content type'}`);
  const match = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType!);
  const boundary = match?.[1] ?? match?.[2];
  if (!boundary || boundary.length > 200) throw new InvalidArgumentError('The multipart content type has no usable boundary');
  return boundary;
}

/** Largest header block of one part: a Content-Disposition and a Content-Type are a few hundred bytes. */
const MAX_HEADER_BYTES = 16 * 1024;

/** A multipart body as it arrives: each part's headers, then its data in pieces (none, one or more). */
export type MultipartEvent = { kind: 'part'; name: string | undefined; contentType: string } | { kind: 'data'; data: Buffer };

type State = 'preamble' | 'headers' | 'data' | 'done';

/**
 * Splits a multipart body (RFC 7578) as it arrives, however it is cut into reads, holding at most
 * one read and a delimiter's length of it. Throws RequestValidationError (422) for a body without
 * a delimiter, or cut short.
 */
export async function* multipartEvents(body: AsyncIterable<Buffer>, boundary: string): AsyncGenerator<MultipartEvent, void, undefined> {
  // Every delimiter but the first follows a CRLF; a CRLF put in front makes the first one alike.
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  let buffer: Buffer = Buffer.from('\r\n');
  let state = 'preamble' as State;

  /** Consumes what the buffer holds; returns when it needs more input or the body is complete. */
  const step = function* (): Generator<MultipartEvent, void> {
    for (;;) {
      if (state === 'done') return;
      if (state === 'preamble' || state === 'data') {
        const at = buffer.indexOf(delimiter);
        if (at < 0) {
          // Keep what could be the start of a delimiter; pass the rest on.
          const keep = Math.min(buffer.length, delimiter.length - 1);
          if (state === 'data' && buffer.length > keep) yield { kind: 'data', data: buffer.subarray(0, buffer.length - keep) };
          buffer = buffer.subarray(buffer.length - keep);
          return;
        }
        if (state === 'data' && at > 0) yield { kind: 'data', data: buffer.subarray(0, at) };
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
      const emptyHeaders = lineEnd >= 0 && buffer[lineEnd + 2] === 0x0d && buffer[lineEnd + 3] === 0x0a;
      if (lineEnd < 0 || (headersEnd < 0 && !emptyHeaders)) {
        if (buffer.length > MAX_HEADER_BYTES) throw malformed(`A multipart part has more than ${MAX_HEADER_BYTES} bytes of headers`);
        return;
      }
      const end = emptyHeaders ? lineEnd : headersEnd;
      const headers = buffer.subarray(lineEnd + 2, end).toString('utf8');
      buffer = buffer.subarray(end + 4);
      const name = /^content-disposition:.*?\bname="([^"]*)"/im.exec(headers)?.[1];
      const contentType = /^content-type:\s*([^\r\n]*)/im.exec(headers)?.[1]?.trim() ?? 'application/octet-stream';
      yield { kind: 'part', name, contentType };
      state = 'data';
    }
  };

  for await (const chunk of body) {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    yield* step();
    if (state === 'done') return;
  }
  if (state === 'preamble') throw malformed('The body has no part with the boundary of its content type');
  throw malformed('The multipart body ended before its closing boundary (truncated body?)');
}

/** The parts of a multipart body, each whole, read as the body arrives. */
export async function readParts(body: AsyncIterable<Buffer>, boundary: string): Promise<MultipartPart[]> {
  const parts: MultipartPart[] = [];
  let pieces: Buffer[] = [];
  const finish = () => {
    const part = parts.at(-1);
    if (part) part.data = pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
    pieces = [];
  };
  for await (const event of multipartEvents(body, boundary)) {
    if (event.kind === 'data') {
      pieces.push(event.data);
      continue;
    }
    finish();
    if (event.name === undefined) throw malformed('A multipart part has no name in its Content-Disposition');
    parts.push({ name: event.name, contentType: event.contentType, data: Buffer.alloc(0) });
  }
  finish();
  return parts;
}
