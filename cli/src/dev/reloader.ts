/**
 * What reloads `berth dev`, and the reloads themselves. It reloads for what the project runs: the
 * files its processes loaded — the modules its graphs and its auth, http and ui entry points of
 * langgraph.json import, transitively, within the project (not node_modules), as the loader saw
 * them — and langgraph.json, its env file, the package.json and tsconfig.json that say how its
 * modules load. Not for anything else in the folder: data files the graphs or other tools write
 * (`.langgraph_api/*.json`), scripts nothing imports. While the last reload failed (its code does
 * not load, so what it would import is unknown), any source file may be the fix and reloads too.
 */
import { createRequire } from 'node:module';
import { basename, dirname, join, relative, sep } from 'node:path';
import { loadProjectConfig, onFileLoaded } from '@berth/langgraph-project';
import type { DevServers, SourcesLoaded } from './servers.js';

/** How the project's modules load: their change reloads too. */
const LOADING_FILES = new Set(['package.json', 'tsconfig.json']);
/** Source code, which reloads while the last reload failed. */
const SOURCE_CODE = /\.(?:[cm]?[jt]s|[jt]sx)$/;
/** A forked process reports files loaded after its start in batches this far apart. */
const REPORT_MS = 100;

/** Reloads on changes, one reload at a time; changes made during one reload the next. */
export class Reloader {
  private running: Promise<void> | undefined;
  private queued: string[] = [];
  /** The env file langgraph.json names, relative to the project (`/`-separated). */
  private envFile: string | undefined;
  private readonly configFile: string;
  private readonly projectDir: string;
  private failed = false;

  constructor(
    private readonly servers: DevServers,
    private readonly configPath: string,
    private readonly url: string,
    private readonly print: (line: string) => void,
  ) {
    this.configFile = basename(configPath);
    this.projectDir = dirname(configPath);
  }

  /** Whether a change of this file, or of this folder (made or removed whole), reloads; `/`-separated, relative to the project. */
  matters(path: string, kind: 'file' | 'folder'): boolean {
    const absolute = join(this.projectDir, ...path.split('/'));
    const sources = this.servers.servingSources();
    if (kind === 'folder') return [...sources].some((source) => source.startsWith(absolute + sep));
    if (path === this.configFile || path === this.envFile || LOADING_FILES.has(path) || sources.has(absolute)) return true;
    return this.failed && SOURCE_CODE.test(path);
  }

  /** Learns which env file to watch; a config that does not parse keeps the last one (the reload reports why). */
  async readConfig(): Promise<void> {
    try {
      const { envFile } = loadProjectConfig(this.configPath);
      this.envFile = envFile ? relative(this.projectDir, envFile).split(sep).join('/') : undefined;
    } catch {
      // The processes that load it say what is wrong.
    }
  }

  reload(paths: string[]): void {
    if (this.running) {
      this.queued.push(...paths);
      return;
    }
    this.running = this.run(paths).finally(() => {
      this.running = undefined;
      const next = [...new Set(this.queued.splice(0))];
      if (next.length) this.reload(next);
    });
  }

  private async run(paths: string[]): Promise<void> {
    const shown = paths.length > 3 ? `${paths.slice(0, 3).join(', ')} and ${paths.length - 3} more` : paths.join(', ');
    this.print(`${shown} changed: reloading…`);
    try {
      await this.servers.reload();
      this.failed = false;
      this.print(`reloaded: ${this.url} serves the new code`);
    } catch (error) {
      this.failed = true;
      this.print(`reload failed: ${(error as Error).message} (its error is above); the previous code keeps serving. Save again to retry.`);
    }
    await this.readConfig();
  }
}

/**
 * In a forked process: the project's files it loads, within the project and outside node_modules.
 * `take()` gives those loaded so far (for its ready message); later ones go to the primary as they
 * load (a graph may import a module when it first runs).
 */
export function projectSources(projectDir: string): { take(): Set<string> } {
  const inProject = (path: string) => path.startsWith(projectDir + sep) && !path.split(sep).includes('node_modules');
  const loaded = new Set<string>();
  let reported = false;
  let batch: string[] = [];
  onFileLoaded((path) => {
    if (!inProject(path) || loaded.has(path)) return;
    loaded.add(path);
    if (!reported) return;
    batch.push(path);
    if (batch.length === 1) {
      setTimeout(() => {
        process.send?.({ sources: batch } satisfies SourcesLoaded);
        batch = [];
      }, REPORT_MS).unref();
    }
  });
  return {
    take() {
      reported = true;
      // CommonJS modules (`require` from a `.cjs` or `.js` of a CommonJS project) do not pass the ESM loader.
      for (const path of Object.keys(createRequire(import.meta.url).cache)) if (inProject(path)) loaded.add(path);
      return loaded;
    },
  };
}
