/**
 * Packing a project directory for `berth deploy`: a gzipped tar of the files git would commit,
 * written to a temporary file (memory stays bounded whatever the project's size).
 *
 * What goes in: every file under the directory except what a `.gitignore` (the project's own,
 * or one in a subfolder) ignores, and except what never belongs in an upload — dependencies
 * (`node_modules/`, installed again by the control plane from the lockfile), VCS and local state
 * (`.git/`, `.berth/`, `.langgraph_api/`) and `.env` / `.env.*` files (the CLI sends env values
 * separately, as encrypted deployment secrets). Symbolic links are stored as links when they
 * point inside the project, and left out when they point outside it: following them could
 * upload a user's whole home directory.
 */
import { createWriteStream } from 'node:fs';
import { lstat, mkdtemp, readFile, readdir, readlink, realpath, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform, type TransformCallback } from 'node:stream';
import ignore, { type Ignore } from 'ignore';
import { create as createTar } from 'tar';
import { CliError } from '../client.js';

/** Default upper bound of the gzipped tarball: 200 MB, the limit of LangGraph's upload URLs. */
export const DEFAULT_MAX_PACK_BYTES = 200 * 1024 * 1024;

/** Directory names never packed, at any depth. */
const ALWAYS_EXCLUDED_DIRS = new Set(['node_modules', '.git', '.berth', '.langgraph_api']);

/** `.env` and `.env.<anything>`, at any depth. */
const ENV_FILE = /^\.env(\..*)?$/;

/** Packing could not produce a tarball. */
export class PackError extends CliError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PackError';
  }
}

/** The gzipped tarball grew past `maxBytes`. */
export class PackTooLargeError extends PackError {
  constructor(
    readonly limitBytes: number,
    readonly fileCount: number,
  ) {
    super(
      `the packed project is larger than ${formatBytes(limitBytes)} (after ${fileCount} files); ` +
        'add large files that are not needed to run the graphs (data sets, build output, media) to .gitignore',
    );
    this.name = 'PackTooLargeError';
  }
}

/** Progress of `packProject`, reported as it goes. */
export interface PackProgress {
  /** Files (and links) written to the tarball so far. */
  files: number;
  /** Files that will be packed in all. */
  totalFiles: number;
  /** Bytes of the gzipped tarball written so far. */
  bytes: number;
}

export interface PackOptions {
  /**
   * Largest gzipped tarball accepted, in bytes; packing stops with `PackTooLargeError` beyond it.
   * @default 209715200 (200 MB)
   */
  maxBytes?: number;
  /** Called as files are packed (at most once per file, and once at the end). */
  onProgress?: (progress: PackProgress) => void;
  /**
   * Where the temporary tarball is written (in a fresh folder of its own).
   * @default os.tmpdir()
   */
  tempDir?: string;
  /** Aborting stops packing and removes the partial tarball. */
  signal?: AbortSignal;
}

/** A path left out for a reason the user may want to know (not for being ignored). */
export interface SkippedPath {
  /** Relative to the project, `/`-separated. */
  path: string;
  reason: string;
}

/** The packed project: a temporary `.tgz` file, removed by `dispose()`. */
export interface PackedProject {
  /** Absolute path of the gzipped tarball. */
  file: string;
  /** Size of `file` in bytes. */
  bytes: number;
  /** Files and links in the tarball. */
  fileCount: number;
  /** Their paths, relative to the project, `/`-separated, in tarball order. */
  files: string[];
  /** Symbolic links left out (they point outside the project, or are absolute). */
  skipped: SkippedPath[];
  /** Removes the tarball and its temporary folder. */
  dispose(): Promise<void>;
}

/** One `.gitignore`, with the folder its patterns are relative to. */
interface IgnoreLayer {
  /** Folder of the `.gitignore`, relative to the project (`''` for the root), `/`-separated. */
  base: string;
  rules: Ignore;
}

function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB`;
  if (bytes >= 1024) return `${Math.round((bytes / 1024) * 10) / 10} KB`;
  return `${bytes} B`;
}

/**
 * Git's rule: the deepest `.gitignore` with a matching pattern decides (a deeper `!pattern` can
 * re-include what a shallower file ignores); within one file the last matching pattern wins,
 * which the `ignore` package applies.
 */
function isIgnored(layers: IgnoreLayer[], path: string, isDir: boolean): boolean {
  let ignored = false;
  for (const layer of layers) {
    const local = layer.base ? path.slice(layer.base.length + 1) : path;
    const result = layer.rules.test(isDir ? `${local}/` : local);
    if (result.ignored) ignored = true;
    else if (result.unignored) ignored = false;
  }
  return ignored;
}

/** Inside `root` (or `root` itself), comparing resolved absolute paths. */
function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/**
 * The files `packProject` would pack, without packing them: paths relative to `dir`,
 * `/`-separated, sorted by code unit within each folder (so the order never depends on the file
 * system), folders' contents where the folder name sorts.
 */
export async function listProjectFiles(dir: string): Promise<{ files: string[]; skipped: SkippedPath[] }> {
  const root = await realpath(resolve(dir));
  const files: string[] = [];
  const skipped: SkippedPath[] = [];

  const walk = async (rel: string, layers: IgnoreLayer[]): Promise<void> => {
    const abs = rel ? join(root, ...rel.split('/')) : root;
    const names = (await readdir(abs)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    if (names.includes('.gitignore')) {
      const text = await readFile(join(abs, '.gitignore'), 'utf8').catch(() => undefined);
      if (text !== undefined) layers = [...layers, { base: rel, rules: ignore().add(text) }];
    }
    for (const name of names) {
      const path = rel ? `${rel}/${name}` : name;
      const full = join(abs, name);
      const info = await lstat(full);
      if (info.isDirectory()) {
        if (ALWAYS_EXCLUDED_DIRS.has(name) || isIgnored(layers, path, true)) continue;
        await walk(path, layers);
      } else if (info.isFile()) {
        if (ENV_FILE.test(name) || isIgnored(layers, path, false)) continue;
        files.push(path);
      } else if (info.isSymbolicLink()) {
        if (ENV_FILE.test(name) || ALWAYS_EXCLUDED_DIRS.has(name) || isIgnored(layers, path, false)) continue;
        const reason = await symlinkProblem(root, full);
        if (reason) skipped.push({ path, reason });
        else files.push(path);
      }
      // Sockets, FIFOs and devices have no content to deploy.
    }
  };

  await walk('', []);
  return { files, skipped };
}

/** Why a symlink must not be packed, or `undefined` when it may be stored as a link. */
async function symlinkProblem(root: string, full: string): Promise<string | undefined> {
  const target = await readlink(full);
  // An absolute link would point somewhere else once unpacked on the control plane.
  if (isAbsolute(target)) return `symbolic link to an absolute path (${target}); make it relative`;
  if (!isInside(root, resolve(dirname(full), target))) return `symbolic link to ${target}, outside the project`;
  // The target may itself lead out through another link; a dangling link is harmless as a link.
  const real = await realpath(full).catch(() => undefined);
  if (real !== undefined && !isInside(root, real)) return `symbolic link to ${target}, which resolves outside the project`;
  return undefined;
}

/** Counts bytes passing through and fails once they exceed `limit`. */
class ByteLimit extends Transform {
  bytes = 0;

  constructor(
    private readonly limit: number,
    private readonly onBytes: (bytes: number) => void,
    private readonly tooLarge: () => Error,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.limit) {
      done(this.tooLarge());
      return;
    }
    this.onBytes(this.bytes);
    done(null, chunk);
  }
}

/**
 * Packs a project directory into a gzipped tarball in a temporary folder.
 * @param dir - the project directory (usually the folder of `langgraph.json`).
 * @throws PackTooLargeError when the tarball exceeds `maxBytes`; PackError when `dir` is not a
 *   readable directory or contains nothing to pack. The temporary folder is removed on failure.
 */
export async function packProject(dir: string, options: PackOptions = {}): Promise<PackedProject> {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_PACK_BYTES;
  const root = resolve(dir);
  const info = await stat(root).catch((error: unknown) => {
    throw new PackError(`cannot pack ${root}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, { cause: error });
  });
  if (!info.isDirectory()) throw new PackError(`cannot pack ${root}: not a directory`);
  const { files, skipped } = await listProjectFiles(root).catch((error: unknown) => {
    throw new PackError(`cannot pack ${root}: ${(error as Error).message}`, { cause: error });
  });
  if (files.length === 0) throw new PackError(`nothing to pack in ${root}: every file is ignored`);

  const tempFolder = await mkdtemp(join(options.tempDir ?? tmpdir(), 'berth-pack-'));
  const file = join(tempFolder, 'project.tgz');
  const dispose = () => rm(tempFolder, { recursive: true, force: true });
  let packed = 0;
  let written = 0;
  const report = () => options.onProgress?.({ files: packed, totalFiles: files.length, bytes: written });
  try {
    options.signal?.throwIfAborted();
    const tar = createTar(
      {
        gzip: true,
        cwd: await realpath(root),
        // Only the listed paths: no recursion into listed folders, links stored as links.
        noDirRecurse: true,
        follow: false,
        // No owner names or ids of the user's machine in the upload.
        portable: true,
        onWriteEntry: () => {
          packed += 1;
          report();
        },
      },
      files,
    );
    const limit = new ByteLimit(
      maxBytes,
      (bytes) => {
        written = bytes;
      },
      () => new PackTooLargeError(maxBytes, packed),
    );
    await pipeline(tar, limit, createWriteStream(file), { signal: options.signal ?? new AbortController().signal });
    written = limit.bytes;
    report();
    return { file, bytes: written, fileCount: files.length, files, skipped, dispose };
  } catch (error) {
    await dispose();
    if (error instanceof PackError) throw error;
    if (options.signal?.aborted) throw new PackError('packing was cancelled', { cause: error });
    throw new PackError(`cannot pack ${root}: ${(error as Error).message}`, { cause: error });
  }
}
