/**
 * The streaming reader of upload bodies: the `file` part's bytes come out exactly (binary, with
 * look-alikes of the boundary inside), in chunks no larger than asked, however the body is split
 * into network reads; bodies without the part, with it twice or cut short are 422s.
 */
import { describe, expect, it } from '@jest/globals';
import { RequestValidationError } from '@berth/errors';
import { filePart } from './file-part.js';

const boundary = 'XyZ123';

function body(parts: { name: string; data: Buffer }[], { preamble = '', close = true } = {}): Buffer {
  const pieces: Buffer[] = [Buffer.from(preamble)];
  for (const p of parts) {
    pieces.push(
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"; filename="file"\r\nContent-Type: application/octet-stream\r\n\r\n`),
      p.data,
      Buffer.from('\r\n'),
    );
  }
  if (close) pieces.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(pieces);
}

async function* split(data: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let at = 0; at < data.length; at += size) yield data.subarray(at, at + size);
}

async function read(data: Buffer, readSize: number, chunkBytes = 7): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const chunk of filePart(split(data, readSize), boundary, 'file', chunkBytes)) out.push(Buffer.from(chunk));
  return out;
}

const content = Buffer.concat([Buffer.from([0, 255, 13, 10, 45, 45]), Buffer.from(`\r\n--${boundary.slice(0, 4)}`), Buffer.from('tail\r\n-')]);

describe('filePart', () => {
  it('yields the file part exactly, in chunks of at most chunkBytes, whatever the read sizes', async () => {
    const data = body(
      [
        { name: 'meta', data: Buffer.from('{"a":1}') },
        { name: 'file', data: content },
      ],
      { preamble: 'ignored preamble\r\n' },
    );
    for (let readSize = 1; readSize <= data.length; readSize++) {
      const chunks = await read(data, readSize);
      expect({ readSize, bytes: Buffer.concat(chunks).toString('hex') }).toEqual({ readSize, bytes: content.toString('hex') });
      expect(chunks.every((c) => c.length <= 7 && c.length > 0)).toBe(true);
    }
  });

  it('yields nothing for an empty file', async () => {
    expect(await read(body([{ name: 'file', data: Buffer.alloc(0) }]), 5)).toEqual([]);
  });

  it('refuses a body without the part, with it twice, or cut short', async () => {
    const problems: [Buffer, (string | number)[]][] = [
      [body([{ name: 'other', data: content }]), ['body', 'file']],
      [
        body([
          { name: 'file', data: content },
          { name: 'file', data: content },
        ]),
        ['body'],
      ],
      [body([{ name: 'file', data: content }], { close: false }), ['body']],
      [Buffer.from('no multipart here'), ['body']],
    ];
    for (const [data, loc] of problems) {
      const error = await read(data, 3).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RequestValidationError);
      expect((error as RequestValidationError).issues[0]!.loc).toEqual(loc);
    }
  });
});
