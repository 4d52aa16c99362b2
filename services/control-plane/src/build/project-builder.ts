/**
 * Building a revision from an uploaded project tarball, without a container engine:
 *
 *   a. unpack it safely into `<artifactsDir>/<deploymentId>/<revisionId>/`;
 *   b. check that `langgraph.json` is there and parses;
 *   c. install dependencies with the lockfile's package manager;
 *   d. load the project in a child process with the agent server's own loader, so that broken
 *      project code fails the build (with the reason) instead of the deploy, and can never crash
 *      the control plane;
 *   e. return the artifact the deployer runs.
 *
 * With `users`, project code (c's install scripts, d's graph modules) runs as the deployment's own
 * OS user, never as the control plane's.
 *
 * Every step logs line by line through the build's `log`. On any failure the folder is removed:
 * an artifact folder exists only for a revision that built.
 */
import { readFile, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { basename, delimiter, dirname, isAbsolute, join, posix, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { OsUsers } from '../deployers/local/os-users.js';
import { DependencyCache } from './dependency-cache.js';
import { BuildCancelledError, BuildFailedError } from './errors.js';
import { takeBack, whileOwnedBy } from './ownership.js';
import { installCommand, planInstall, type PackageManagerName } from './package-manager.js';
import { runCommand, type BuildLog } from './run-command.js';
import { unpackTarball, type TarballSource, type UnpackLimits } from './unpack.js';
import { ValidationProcess } from './validate.js';

export type { BuildLog } from './run-command.js';

/** Where to copy every build log line besides the build's own `log` (e.g. the service logger). */
export type BuildLogSink = (line: string, level: 'info' | 'warn' | 'error', revision: { deploymentId: string; revisionId: string }) => void;

export interface ProjectBuilderOptions {
  /** Folder holding the artifacts: each revision builds into `<artifactsDir>/<deploymentId>/<revisionId>/`. */
  artifactsDir: string;
  /**
   * The whole environment of installers and of the validation process; nothing is inherited
   * from the control plane (pass `PATH`, `HOME`, registry settings such as `npm_config_registry`).
   * @default { PATH: the folder of this Node.js binary, then /usr/local/bin:/usr/bin:/bin }
   */
  env?: Record<string, string>;
  /** Receives every build log line too. */
  logSink?: BuildLogSink;
  /**
   * Longest a dependency install may run.
   * @default 600000 (10 minutes)
   */
  installTimeoutMs?: number;
  /**
   * Longest loading the project's graphs may take.
   * @default 60000 (1 minute)
   */
  validateTimeoutMs?: number;
  /**
   * Install without running packages' install scripts (safer on a shared control plane, but
   * packages with native builds will not work).
   * @default false
   */
  ignoreScripts?: boolean;
  /**
   * Give a revision whose lockfile and `package.json` match an earlier successful build that
   * build's `node_modules` as hard links instead of installing (see `dependency-cache.ts`).
   * Cached trees live in `<artifactsDir>/.cache/dependencies/`.
   * @default true
   */
  reuseDependencies?: boolean;
  /** Limits of the unpacked tarball (defaults: 100 000 entries, 1 GiB). */
  unpackLimits?: UnpackLimits;
  /**
   * Run project code (install scripts, graph modules' top level) as the deployment's own OS user
   * instead of the control plane's (root). The revision folder is that user's only while its
   * dependencies install; then it is root's again (0:0, not writable by others), so neither the
   * agent server nor project code can change a built revision or the dependency cache it links
   * into. The validation process runs as the user too, on the finished, read-only tree. HOME,
   * TMPDIR and npm's cache are in the user's private home.
   * @default undefined (everything runs as the control plane's user)
   */
  users?: OsUsers;
}

export interface BuildInput {
  /** The project tarball (gzipped or plain tar): bytes, a stream, or `{ path }` of a file. */
  tarball: TarballSource;
  /**
   * Path of `langgraph.json` inside the tarball (`/`-separated, relative).
   * @default 'langgraph.json'
   */
  configPath?: string;
  deploymentId: string;
  revisionId: string;
  /** Variables project code sees while it is validated: the deployment's secrets. */
  env?: Record<string, string>;
}

export interface BuildArtifact {
  /** Absolute path of the built project (dependencies installed). */
  path: string;
  /** `langgraph.json`, relative to `path`. */
  configPath: string;
  /** Graph ids, in `langgraph.json` order. */
  graphs: string[];
  /** The package manager that installed the dependencies; `null` when there was nothing to install. */
  packageManager: PackageManagerName | null;
  /** Non-fatal findings (unknown `langgraph.json` keys, graphs whose schemas cannot be derived). */
  warnings: string[];
}

const DEFAULT_INSTALL_TIMEOUT_MS = 600_000;
const DEFAULT_VALIDATE_TIMEOUT_MS = 60_000;
/** Ids become folder names; anything else could reach outside `artifactsDir`. */
const SAFE_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

function defaultEnv(): Record<string, string> {
  return { PATH: [dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'].join(delimiter) };
}

function elapsed(since: number): string {
  const ms = Date.now() - since;
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** A relative, `/`-separated path that stays inside the project, or `undefined`. */
function normalizeConfigPath(path: string): string | undefined {
  if (!path || path.includes('\0') || path.startsWith('/') || /^[A-Za-z]:/.test(path)) return undefined;
  const normalized = posix.normalize(path.replace(/\\/g, '/'));
  if (normalized === '..' || normalized.startsWith('../') || normalized === '.') return undefined;
  return normalized;
}

/** Builds revisions into artifact folders; one instance serves any number of concurrent builds. */
export class ProjectBuilder {
  readonly #options: ProjectBuilderOptions;
  readonly #cache: DependencyCache | undefined;

  constructor(options: ProjectBuilderOptions) {
    this.#options = options;
    if (options.reuseDependencies ?? true) this.#cache = new DependencyCache({ dir: join(options.artifactsDir, '.cache', 'dependencies') });
  }

  /**
   * How a revision row keeps its build's folder: relative to the artifacts folder, so that a state
   * folder restored from a backup (`berth restore`) or moved elsewhere still finds its builds.
   */
  storedPath(artifactPath: string): string {
    return relative(this.#options.artifactsDir, artifactPath);
  }

  /**
   * The folder of a build as a revision row keeps it. Rows written before builds were kept relative
   * hold the absolute path of their day; their last two parts (`<deploymentId>/<folder>`) are the
   * same under today's artifacts folder.
   */
  folderOf(stored: string): string {
    return join(this.#options.artifactsDir, isAbsolute(stored) ? join(basename(dirname(stored)), basename(stored)) : stored);
  }

  /**
   * Builds one revision.
   * @param log - receives the build log, line by line (the revision's build log).
   * @param signal - aborting stops the build (the installer and validation process are killed).
   * @throws BuildFailedError saying what is wrong (its `logTail` holds the last lines);
   *   `UnsafeTarballError` for a tarball that is unsafe or too large; `BuildCancelledError` on
   *   abort. Nothing is left in the artifact folder then.
   */
  async build(input: BuildInput, log: BuildLog = () => undefined, signal?: AbortSignal): Promise<BuildArtifact> {
    const { deploymentId, revisionId } = input;
    const sink = this.#options.logSink;
    const emit: BuildLog = (line, level = 'info') => {
      log(line, level);
      sink?.(line, level, { deploymentId, revisionId });
    };
    const refuse = (message: string): never => {
      emit(message, 'error');
      emit('Build failed after 0 ms', 'error');
      throw new BuildFailedError(message);
    };
    if (!SAFE_ID.test(deploymentId) || !SAFE_ID.test(revisionId)) {
      refuse(`invalid deployment or revision id: "${deploymentId}", "${revisionId}"`);
    }
    const configPath =
      normalizeConfigPath(input.configPath ?? 'langgraph.json') ??
      refuse(`the langgraph.json path must be relative to the project and stay inside it, got "${input.configPath}"`);
    const dir = join(this.#options.artifactsDir, deploymentId, revisionId);
    const started = Date.now();
    let validator: ValidationProcess | undefined;
    try {
      // A revision is built once; whatever an interrupted earlier attempt left is discarded
      // (taken back first: root must not walk a tree the user can still change).
      if (this.#options.users && existsSync(dir)) await takeBack(dir);
      await rm(dir, { recursive: true, force: true });
      const artifact = await this.#steps(input, configPath, dir, emit, signal, (v) => {
        validator = v;
      });
      emit(`Build finished in ${elapsed(started)}: graphs ${artifact.graphs.join(', ')}`);
      return artifact;
    } catch (error) {
      validator?.kill();
      await validator?.closed();
      await rm(dir, { recursive: true, force: true, maxRetries: 5 }).catch(() => undefined);
      const failure =
        error instanceof BuildFailedError
          ? error
          : signal?.aborted
            ? new BuildCancelledError(undefined, { cause: error })
            : new BuildFailedError(`the build failed unexpectedly: ${(error as Error)?.message ?? String(error)}`, { cause: error });
      for (const line of failure.message.split('\n')) emit(line, 'error');
      emit(`Build failed after ${elapsed(started)}`, 'error');
      throw failure;
    }
  }

  async #steps(
    input: BuildInput,
    configPath: string,
    dir: string,
    log: BuildLog,
    signal: AbortSignal | undefined,
    started: (validator: ValidationProcess) => void,
  ): Promise<BuildArtifact> {
    const cancelled = () => {
      if (signal?.aborted) throw new BuildCancelledError();
    };
    const env = this.#options.env ?? defaultEnv();
    // Messages name files as the user knows them, not by their place on the control plane.
    const prefixes = [pathToFileURL(dir).href + '/', dir + '/'];
    const clean = (text: string) => prefixes.reduce((t, prefix) => t.split(prefix).join(''), text);

    // a. unpack
    cancelled();
    let t = Date.now();
    log('Unpacking the project');
    const unpacked = await unpackTarball(input.tarball, dir, this.#options.unpackLimits);
    log(`Unpacked ${unpacked.entries} entries (${Math.round(unpacked.bytes / 1024)} KB) in ${elapsed(t)}`);

    // b. langgraph.json
    cancelled();
    const configFile = join(dir, ...configPath.split('/'));
    if (!existsSync(configFile)) {
      throw new BuildFailedError(
        `${configPath} not found in the uploaded project${configPath === 'langgraph.json' ? '' : ' (the langgraph.json path given with the deployment)'}: ` +
          'deploy from the folder that holds langgraph.json, or pass the path of the config',
      );
    }
    try {
      JSON.parse(await readFile(configFile, 'utf8'));
    } catch (error) {
      throw new BuildFailedError(`${configPath} is not valid JSON: ${(error as Error).message}`, { cause: error });
    }
    const projectDir = dirname(configFile);

    const user = this.#options.users && (await this.#options.users.userFor(input.deploymentId));
    // Closed to other deployments' users before any project code runs.
    if (user) await this.#options.users!.grantArtifacts(input.deploymentId, user);
    const codeEnv = user ? { ...env, HOME: user.home, TMPDIR: user.home, npm_config_cache: join(user.home, '.npm') } : env;
    const as = user ? { user } : {};

    // Imports of the loader overlap the install; it waits for `validate`.
    const validator = new ValidationProcess({ cwd: projectDir, env: codeEnv, log, clean, ...as });
    started(validator);

    // c. dependencies
    const plan = planInstall(dir, projectDir);
    let packageManager: PackageManagerName | null = null;
    const ignoreScripts = this.#options.ignoreScripts ?? false;
    const cacheKey = plan && this.#cache?.key(dir, plan, ignoreScripts);
    if (!plan) {
      log('No package.json or lockfile: no dependencies to install', 'warn');
    } else {
      cancelled();
      packageManager = plan.manager;
      t = Date.now();
      const where = plan.dir === dir ? '' : ` in ${clean(plan.dir + '/')}`;
      const reused = cacheKey ? await this.#cache!.restore(cacheKey, plan.dir) : undefined;
      if (reused !== undefined) {
        log(`Reusing the dependencies of an earlier build with the same ${plan.lockfile}${where}: linked ${reused} files in ${elapsed(t)}`);
      } else {
        const command = installCommand(dir, plan, { ignoreScripts, env: codeEnv });
        log(`Installing dependencies: ${command.label}${where} (${plan.lockfile ? `from ${plan.lockfile}` : 'no lockfile'})`);
        const install = () =>
          runCommand(command.file, command.args, {
            cwd: plan.dir,
            env: { ...codeEnv, CI: 'true', ...command.env },
            log,
            timeoutMs: this.#options.installTimeoutMs ?? DEFAULT_INSTALL_TIMEOUT_MS,
            label: command.label,
            ...(signal ? { signal } : {}),
            ...as,
          });
        // A cache hit is never handed over: its files are hard links to the shared entries.
        await (user ? whileOwnedBy(dir, user, install) : install());
        log(`Installed dependencies in ${elapsed(t)}`);
      }
    }

    // d. load every graph, apart from this process
    cancelled();
    t = Date.now();
    log(`Loading ${configPath} and its graphs`);
    const result = await validator.validate(configFile, input.env ?? {}, this.#options.validateTimeoutMs ?? DEFAULT_VALIDATE_TIMEOUT_MS, signal);
    await validator.closed();
    for (const warning of result.warnings) log(warning, 'warn');
    for (const graph of result.graphs) log(`Graph "${graph.id}" loads (${graph.kind === 'compiled' ? 'compiled graph' : graph.kind})`);
    log(`Loaded ${result.graphs.length} graph(s) in ${elapsed(t)}`);

    // Only a tree that loaded is offered to later builds.
    if (plan && cacheKey) await this.#cache!.store(cacheKey, plan.dir);

    return { path: dir, configPath, graphs: result.graphs.map((g) => g.id), packageManager, warnings: result.warnings };
  }
}
