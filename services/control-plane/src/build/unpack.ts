/**
 * Unpacking an uploaded project tarball into a fresh folder, refusing anything that could write
 * or point outside it: absolute paths, `..` segments, links leading out, device files and FIFOs,
 * and archives beyond the entry and size limits (a zip bomb must not fill the disk).
 *
 * Every entry is checked before anything is written (tar's own checks stay on as a further layer,
 * in strict mode so its warnings fail too); the first bad entry stops the whole unpack.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, isAbsolute, posix } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Parser, Unpack, type ReadEntry } from 'tar';
import { UnsafeTarballError } from './errors.js';

/** A project tarball: in memory, a stream, or a file on this machine. */
export type TarballSource = Buffer | Uint8Array | NodeJS.ReadableStream | { path: string };

export interface UnpackLimits {
  /**
   * Most entries (files, folders, links) accepted.
   * @default 100000
   */
  maxEntries?: number;
  /**
   * Most bytes of file content accepted once unpacked.
   * @default 1073741824 (1 GiB)
   */
  maxBytes?: number;
}

export interface UnpackResult {
  entries: number;
  /** Bytes of file content written. */
  bytes: number;
}

const DEFAULT_MAX_ENTRIES = 100_000;
const DEFAULT_MAX_BYTES = 1024 * 1024 * 1024;

const ALLOWED_TYPES = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link']);

/** Why this archive path is unsafe, or `undefined`. Paths in tarballs are `/`-separated. */
function pathProblem(path: string): string | undefined {
  if (path.includes('\0')) return 'contains a NUL byte';
  if (path.startsWith('/') || isAbsolute(path) || /^[A-Za-z]:/.test(path)) return 'is an absolute path';
  if (path.split(/[\\/]/).includes('..')) return 'contains ".."';
  return undefined;
}

/** True when `target` (already `posix.normalize`d, relative to the root) stays inside. */
function staysInside(target: string): boolean {
  return target !== '..' && !target.startsWith('../') && !posix.isAbsolute(target);
}

/** Why this entry must not be unpacked, or `undefined`. */
function entryProblem(entry: ReadEntry): string | undefined {
  const { path, type } = entry;
  if (!ALLOWED_TYPES.has(type)) return `is a ${type} entry; only files, folders and links can be deployed`;
  const problem = pathProblem(path);
  if (problem) return problem;
  if (type === 'SymbolicLink' || type === 'Link') {
    const link = String(entry.linkpath ?? '');
    if (!link) return 'is a link without a target';
    if (link.includes('\0')) return 'links to a path with a NUL byte';
    if (link.startsWith('/') || isAbsolute(link) || /^[A-Za-z]:/.test(link)) return `links to an absolute path (${link})`;
    // A symlink's target is relative to the link's folder; a hard link's to the archive root.
    const target = type === 'SymbolicLink' ? posix.normalize(posix.join(posix.dirname(path), link)) : posix.normalize(link);
    if (!staysInside(target)) return `links outside the project (${link})`;
  }
  return undefined;
}

type Reopenable = Buffer | Uint8Array | { path: string };

function open(source: Reopenable): NodeJS.ReadableStream {
  return source instanceof Uint8Array ? Readable.from([source]) : createReadStream(source.path);
}

function isStream(source: TarballSource): source is NodeJS.ReadableStream {
  return typeof (source as NodeJS.ReadableStream).pipe === 'function';
}

/** Reads the whole archive without writing anything; throws on the first bad entry or limit. */
async function check(source: Reopenable, maxEntries: number, maxBytes: number): Promise<UnpackResult> {
  let entries = 0;
  let bytes = 0;
  let refused: UnsafeTarballError | undefined;
  const parser: Parser = new Parser({
    strict: true,
    onReadEntry: (entry) => {
      entry.resume();
      if (refused) return;
      const problem = entryProblem(entry);
      entries += 1;
      bytes += entry.size ?? 0;
      if (problem) refused = new UnsafeTarballError(`the project tarball is unsafe: entry "${entry.path}" ${problem}`);
      else if (entries > maxEntries) refused = new UnsafeTarballError(`the project tarball has more than ${maxEntries} entries`);
      else if (bytes > maxBytes) {
        refused = new UnsafeTarballError(`the project tarball unpacks to more than ${Math.round(maxBytes / 1024 / 1024)} MB`);
      }
      if (refused) parser.abort(refused);
    },
  });
  try {
    await pipeline(open(source), parser);
  } catch (error) {
    if (refused) throw refused;
    if ((error as { code?: string }).code === 'TAR_BAD_ARCHIVE') {
      throw new UnsafeTarballError('the project tarball is not a tar archive (gzipped or plain)', { cause: error });
    }
    throw new UnsafeTarballError(`the project tarball cannot be unpacked: ${(error as Error).message}`, { cause: error });
  }
  if (refused) throw refused;
  if (entries === 0) throw new UnsafeTarballError('the project tarball is empty');
  return { entries, bytes };
}

/**
 * Unpacks a (gzipped or plain) tarball into `dest`, which is created if needed. The archive is
 * read twice: once to check every entry and the limits, writing nothing, then to extract (a
 * stream is first saved beside `dest`, as `<dest>.upload`, and removed afterwards). Refusing
 * before writing means a bad tarball leaves no files behind, not even briefly.
 * @throws UnsafeTarballError naming the first offending entry, or when a limit is exceeded or
 *   the data is not a tarball.
 */
export async function unpackTarball(source: TarballSource, dest: string, limits: UnpackLimits = {}): Promise<UnpackResult> {
  const maxEntries = limits.maxEntries ?? DEFAULT_MAX_ENTRIES;
  const maxBytes = limits.maxBytes ?? DEFAULT_MAX_BYTES;
  let spooled: string | undefined;
  try {
    let reopenable: Reopenable;
    if (isStream(source)) {
      spooled = `${dest}.upload`;
      await mkdir(dirname(spooled), { recursive: true });
      await pipeline(source, createWriteStream(spooled));
      reopenable = { path: spooled };
    } else {
      reopenable = source;
    }
    const result = await check(reopenable, maxEntries, maxBytes);
    await mkdir(dest, { recursive: true });
    // Every entry passed; the filter stays as a second line of defence (tar's own checks, in
    // strict mode, are a third).
    const unpack = new Unpack({
      cwd: dest,
      strict: true,
      // Never take owners from the archive (the control plane may run as root).
      preserveOwner: false,
      filter: (_path, entry) => entryProblem(entry as ReadEntry) === undefined,
    });
    try {
      await pipeline(open(reopenable), unpack);
    } catch (error) {
      throw new UnsafeTarballError(`the project tarball cannot be unpacked: ${(error as Error).message}`, { cause: error });
    }
    return result;
  } finally {
    if (spooled) await rm(spooled, { force: true });
  }
}
