/**
 * Project tarballs for upload tests: real ustar archives, gzipped, of any exact compressed size
 * (random content does not compress, and a second gzip member of zeros pads to the byte).
 */
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';

/** One ustar entry: a 512-byte header (checksum included) and the content padded to 512. */
function entry(name: string, content: Buffer): Buffer {
  const header = Buffer.alloc(512);
  header.write(name, 0, 100, 'utf8');
  header.write('0000644\0', 100, 'latin1'); // mode
  header.write('0000000\0', 108, 'latin1'); // uid
  header.write('0000000\0', 116, 'latin1'); // gid
  header.write(`${content.length.toString(8).padStart(11, '0')}\0`, 124, 'latin1');
  header.write(`${Math.floor(Date.now() / 1000).toString(8).padStart(11, '0')}\0`, 136, 'latin1');
  header.write('        ', 148, 'latin1'); // checksum, counted as spaces
  header.write('0', 156, 'latin1'); // a regular file
  header.write('ustar\u000000', 257, 'latin1');
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  const padding = Buffer.alloc((512 - (content.length % 512)) % 512);
  return Buffer.concat([header, content, padding]);
}

/** An uncompressed tar archive of the given files, with its two closing zero blocks. */
export function tar(files: Record<string, string | Buffer>): Buffer {
  const entries = Object.entries(files).map(([name, content]) => entry(name, Buffer.from(content)));
  return Buffer.concat([...entries, Buffer.alloc(1024)]);
}

/** A small project, gzipped. */
export function tarGz(files: Record<string, string | Buffer> = { 'langgraph.json': '{"graphs":{}}' }): Buffer {
  return gzipSync(tar(files));
}

/** A valid .tar.gz of exactly `size` bytes (at least about 2 KiB). */
export function tarGzOfSize(size: number): Buffer {
  for (let content = Math.max(0, size - 4096); ; content += 1) {
    const archive = gzipSync(tar({ 'langgraph.json': '{}', 'blob.bin': randomBytes(content) }));
    // Zeros after the archive's end read as more end blocks; a stored gzip member sizes them to the byte.
    for (let zeros = Math.max(0, size - archive.length - 64); archive.length + 20 + zeros <= size; zeros += 1) {
      const pad = gzipSync(Buffer.alloc(zeros), { level: 0 });
      if (archive.length + pad.length === size) return Buffer.concat([archive, pad]);
      if (archive.length + pad.length > size) break;
    }
    if (archive.length > size) throw new Error(`no tarball of exactly ${size} bytes`);
  }
}
