/**
 * The streaming split of ingest bodies: the parts of a multipart body come out whole and exact
 * (payloads with look-alikes of the boundary, empty parts, parts without headers) however the body
 * is cut into network reads; a body without a delimiter or cut short is a 422.
 */
import { describe, expect, it } from '@jest/globals';
import { RequestValidationError } from '@berth/errors';
import { readParts } from './multipart.js';

const boundary = '----LangSmithFormBoundaryq1w2e3';

const parts = [
  { name: 'post.1', contentType: 'application/json', data: Buffer.from('{"id":"1","name":"agent"}') },
  { name: 'post.1.inputs', contentType: 'application/json', data: Buffer.from(`{"q":"\r\n--${boundary.slice(0, 10)} not the end"}`) },
  { name: 'patch.2', contentType: 'application/json', data: Buffer.alloc(0) },
  { name: 'attachment.1.file', contentType: 'application/octet-stream', data: Buffer.from([0, 13, 10, 45, 45, 255]) },
];

function body(close = true): Buffer {
  const pieces = parts.map((p) =>
    Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"\r\nContent-Type: ${p.contentType}\r\n\r\n`),
      p.data,
      Buffer.from('\r\n'),
    ]),
  );
  return Buffer.concat([Buffer.from('preamble\r\n'), ...pieces, Buffer.from(close ? `--${boundary}--\r\n` : '')]);
}

async function* split(data: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let at = 0; at < data.length; at += size) yield data.subarray(at, at + size);
}

describe('readParts', () => {
  it.each([1, 2, 7, 41, 100_000])('gives every part whole and exact in reads of %i bytes', async (size) => {
    expect(await readParts(split(body(), size), boundary)).toEqual(parts);
  });

  it('a part without a name is refused', async () => {
    const data = Buffer.from(`--${boundary}\r\n\r\nx\r\n--${boundary}--`);
    await expect(readParts(split(data, 3), boundary)).rejects.toThrow(/no name/);
  });

  it('refuses a body cut short or without the boundary', async () => {
    await expect(readParts(split(body(false), 5), boundary)).rejects.toThrow(RequestValidationError);
    await expect(readParts(split(body(false), 5), boundary)).rejects.toThrow(/truncated/);
    await expect(readParts(split(Buffer.from('{"post": []}'), 5), boundary)).rejects.toThrow(/no part with the boundary/);
  });
});
