/**
 * Project tarballs for upload tests: real ustar archives, gzipped, of any exact compressed size
 * (random content does not compress, and a second gzip member of zeros pads to the byte).
 */
import { randomBytes } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { rawTar } from '../../../control-plane/src/build/__tests__/tarballs.js';

/** An uncompressed tar archive of the given files (the control plane's test archives, unzipped). */
export function tar(files: Record<string, string | Buffer>): Buffer {
  return gunzipSync(rawTar(Object.entries(files).map(([path, content]) => ({ path, body: Buffer.from(content) }))));
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
