/**
 * Watches a project folder for `berth dev`: every folder but the ignored ones gets an `fs.watch`
 * of its own (inotify on Linux). Not `fs.watch(root, { recursive: true })`: on Linux, Node 20 does
 * that by watching every file, node_modules included — thousands of watches in a real project.
 */
import { watch, type FSWatcher } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';

/** Folders whose changes never reload: dependencies, Berth's state, VCS data, build output. */
const IGNORED_DIRS = new Set(['node_modules', '.berth', '.git', 'dist']);

export interface ProjectWatcherOptions {
  /** Whether a changed file, or a folder made or removed whole (its path relative to the root, `/`-separated), matters. */
  matters(path: string, kind: 'file' | 'folder'): boolean;
  /** Called with the files that changed once a burst of changes has been quiet this long. */
  debounceMs: number;
  onChange(paths: string[]): void;
  /** A folder that could not be watched (its changes are missed). */
  onError(error: Error): void;
}

export class ProjectWatcher {
  private readonly watchers = new Map<string, FSWatcher>();
  private readonly changed = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly root: string,
    private readonly options: ProjectWatcherOptions,
  ) {}

  /** Resolves once every folder present now is watched. */
  async start(): Promise<void> {
    await this.watchTree(this.root);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    for (const watcher of this.watchers.values()) watcher.close();
    this.watchers.clear();
  }

  private async watchTree(dir: string): Promise<void> {
    if (this.closed || this.watchers.has(dir)) return;
    let watcher: FSWatcher;
    try {
      watcher = watch(dir, (_event, name) => void this.changedIn(dir, name));
    } catch (error) {
      // Gone before it could be watched: nothing to watch.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.options.onError(error as Error);
      return;
    }
    watcher.on('error', (error) => {
      this.unwatch(dir);
      // A folder that was removed ends its watch this way: only one still there is a problem.
      void stat(dir).then(
        () => this.options.onError(error),
        () => undefined,
      );
    });
    this.watchers.set(dir, watcher);
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      if (entry.isDirectory() && !IGNORED_DIRS.has(entry.name)) await this.watchTree(join(dir, entry.name));
    }
  }

  private unwatch(dir: string): void {
    for (const [path, watcher] of this.watchers) {
      if (path === dir || path.startsWith(dir + sep)) {
        watcher.close();
        this.watchers.delete(path);
      }
    }
  }

  private async changedIn(dir: string, name: string | Buffer | null): Promise<void> {
    if (this.closed || !name) return;
    const path = join(dir, String(name));
    if (path.split(sep).some((part) => IGNORED_DIRS.has(part))) return;
    const isDir = await stat(path).then(
      (s) => s.isDirectory(),
      () => false,
    );
    const relativePath = relative(this.root, path).split(sep).join('/');
    if (isDir) {
      // A new folder (say, from a git checkout) and the files in it.
      const known = this.watchers.has(path);
      await this.watchTree(path);
      if (!known && this.options.matters(relativePath, 'folder')) this.note(relativePath);
      return;
    }
    // A watched folder that is gone.
    if (this.watchers.has(path)) {
      this.unwatch(path);
      if (this.options.matters(relativePath, 'folder')) this.note(relativePath);
      return;
    }
    if (this.options.matters(relativePath, 'file')) this.note(relativePath);
  }

  private note(path: string): void {
    if (this.closed) return;
    this.changed.add(path);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      const paths = [...this.changed].sort();
      this.changed.clear();
      this.options.onChange(paths);
    }, this.options.debounceMs);
  }
}
