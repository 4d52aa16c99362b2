/**
 * The body of `POST /runs/multipart`: read whole up to a bound (the langsmith client sends at
 * most about `size_limit_bytes` per request, plus one run), gzip-decoded when the client
 * compressed it, and split into its parts. Parts are named `post.<run_id>`,
 * `patch.<run_id>`, `post.<run_id>.<field>` (inputs, outputs, events, ...),
 * `attachment.<run_id>.<name>` and `feedback.<id>`.
 */
import { promisify } from 'node:util';
import { gunzip, inflate } from 'node:zlib';
import { InvalidArgumentError, RequestValidationError } from '@berth/errors';
import type { Request } from 'express';

const gunzipAsync = promisify(gunzip);
const inflateAsync = promisify(inflate);

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

/** Reads the request body, at most `maxBytes` as sent and `maxBytes` decoded. */
export async function readBody(req: Request, maxBytes: number): Promise<Buffer> {
  if (Number(req.get('content-length') ?? 0) > maxBytes) throw new TraceBodyError(413, `The request body is larger than ${maxBytes} bytes`);
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes) throw new TraceBodyError(413, `The request body is larger than ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  const raw = Buffer.concat(chunks, total);
  const encoding = (req.get('content-encoding') ?? 'identity').trim().toLowerCase();
  if (encoding === 'identity' || encoding === '') return raw;
  const decode = encoding === 'gzip' || encoding === 'x-gzip' ? gunzipAsync : encoding === 'deflate' ? inflateAsync : undefined;
  if (!decode) throw new TraceBodyError(415, `Content-Encoding ${encoding} is not supported: send gzip (as GET /info advertises) or no encoding`);
  try {
    return await decode(raw, { maxOutputLength: maxBytes });
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE')
      throw new TraceBodyError(413, `The decoded request body is larger than ${maxBytes} bytes`);
    throw new InvalidArgumentError(`The request body could not be decoded as ${encoding}: ${(error as Error).message}`, { cause: error });
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

/** Splits a multipart body (RFC 7578) into its parts. */
export function parseMultipart(body: Buffer, boundary: string): MultipartPart[] {
  const delimiter = Buffer.from(`--${boundary}`);
  const next = Buffer.from(`\r\n--${boundary}`);
  let at = body.indexOf(delimiter);
  if (at < 0) throw malformed('The body has no part with the boundary of its content type');
  const parts: MultipartPart[] = [];
  for (;;) {
    at += delimiter.length;
    if (body[at] === 0x2d && body[at + 1] === 0x2d) return parts; // the closing delimiter
    const lineEnd = body.indexOf('\r\n', at);
    if (lineEnd < 0) throw malformed('The multipart body ends inside a delimiter line');
    const headersStart = lineEnd + 2;
    const headersEnd = body.subarray(headersStart, headersStart + 2).toString('latin1') === '\r\n' ? headersStart : body.indexOf('\r\n\r\n', headersStart);
    if (headersEnd < 0) throw malformed('A multipart part has no end of headers');
    const headers = body.subarray(headersStart, headersEnd).toString('utf8');
    const dataStart = headersEnd === headersStart ? headersStart + 2 : headersEnd + 4;
    const dataEnd = body.indexOf(next, dataStart);
    if (dataEnd < 0) throw malformed('A multipart part is not terminated by the boundary (truncated body?)');
    const name = /^content-disposition:.*?\bname="([^"]*)"/im.exec(headers)?.[1];
    if (name === undefined) throw malformed('A multipart part has no name in its Content-Disposition');
    const contentType = /^content-type:\s*([^\r\n]*)/im.exec(headers)?.[1]?.trim() ?? 'application/octet-stream';
    parts.push({ name, contentType, data: body.subarray(dataStart, dataEnd) });
    at = dataEnd + 2;
  }
}
