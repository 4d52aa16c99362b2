/**
 * Tarballs for tests, written header by header so they can hold what no well-behaved tool writes
 * (`..` paths, links leading out, device files).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { Header } from 'tar';

export interface RawEntry {
  path: string;
  type?: 'File' | 'Directory' | 'SymbolicLink' | 'Link' | 'CharacterDevice' | 'FIFO';
  body?: string | Buffer;
  linkpath?: string;
}

/** A gzipped tar archive of `entries`, in order. */
export function rawTar(entries: RawEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    const body = Buffer.from(entry.body ?? '');
    const header = new Header({
      path: entry.path,
      type: entry.type ?? 'File',
      size: entry.type === undefined || entry.type === 'File' ? body.length : 0,
      mode: entry.type === 'Directory' ? 0o755 : 0o644,
      mtime: new Date(0),
      ...(entry.linkpath !== undefined ? { linkpath: entry.linkpath } : {}),
    });
    const block = Buffer.alloc(512);
    header.encode(block, 0);
    blocks.push(block);
    if (body.length) blocks.push(body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(blocks));
}

const echoExample = fileURLToPath(new URL('../../../../../examples/echo-agent/', import.meta.url));

/** examples/echo-agent as an upload (`src/graph.ts` replaced by `graphSource` when given). */
export function echoProject(graphSource?: string): Buffer {
  return rawTar(
    ['package.json', 'package-lock.json', 'langgraph.json', 'src/graph.ts'].map((path) => ({
      path,
      body: path === 'src/graph.ts' && graphSource !== undefined ? graphSource : readFileSync(join(echoExample, path), 'utf8'),
    })),
  );
}
