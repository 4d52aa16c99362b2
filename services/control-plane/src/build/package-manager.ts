/**
 * Installing a project's dependencies with the package manager its lockfile belongs to, the way
 * the LangGraph CLI's images do: `package-lock.json` → `npm ci`, `yarn.lock` → yarn,
 * `pnpm-lock.yaml` → `pnpm install --frozen-lockfile`, `bun.lock(b)` → bun, no lockfile →
 * `npm install`. A lockfile is always installed exactly (frozen), so a revision runs what the
 * developer tested.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { BuildFailedError } from './errors.js';
import { findExecutable } from './run-command.js';

export type PackageManagerName = 'npm' | 'yarn' | 'pnpm' | 'bun';

/** Lockfiles in order of preference when a folder has more than one. */
const LOCKFILES: [file: string, manager: PackageManagerName][] = [
  ['package-lock.json', 'npm'],
  ['npm-shrinkwrap.json', 'npm'],
  ['pnpm-lock.yaml', 'pnpm'],
  ['yarn.lock', 'yarn'],
  ['bun.lock', 'bun'],
  ['bun.lockb', 'bun'],
];

/** What to install and where. */
export interface InstallPlan {
  manager: PackageManagerName;
  /** Absolute folder the installer runs in (where the lockfile or `package.json` is). */
  dir: string;
  /** The lockfile, relative to the project root; `undefined` for a plain `npm install`. */
  lockfile: string | undefined;
}

/** A resolved command line. */
export interface InstallCommand {
  file: string;
  args: string[];
  /** e.g. `npm ci`, for messages. */
  label: string;
  /** Extra environment for this manager. */
  env: Record<string, string>;
}

/**
 * Finds the lockfile nearest to `langgraph.json`, looking in its folder and then its parents up
 * to the project root (a monorepo keeps one lockfile at the top). Without a lockfile, the nearest
 * `package.json` is installed with `npm install`; without either, there is nothing to install.
 */
export function planInstall(root: string, configDir: string): InstallPlan | undefined {
  const dirs: string[] = [];
  for (let dir = configDir; ; dir = dirname(dir)) {
    dirs.push(dir);
    if (dir === root || !`${dir}${sep}`.startsWith(`${root}${sep}`) || dirname(dir) === dir) break;
  }
  for (const dir of dirs) {
    for (const [file, manager] of LOCKFILES) {
      if (existsSync(join(dir, file))) return { manager, dir, lockfile: relative(root, join(dir, file)) };
    }
  }
  for (const dir of dirs) {
    if (existsSync(join(dir, 'package.json'))) return { manager: 'npm', dir, lockfile: undefined };
  }
  return undefined;
}

/** Yarn 2+ ("berry") lockfiles start with a `__metadata:` block; yarn 1 ones do not. */
function isYarnBerry(lockfile: string): boolean {
  try {
    return readFileSync(lockfile, 'utf8').slice(0, 4096).includes('__metadata:');
  } catch {
    return false;
  }
}

export interface CommandOptions {
  /** Runs no install scripts (`--ignore-scripts`). */
  ignoreScripts: boolean;
  /** The installer's environment (its `PATH` is searched for the binaries). */
  env: Record<string, string>;
}

/**
 * The command line installing `plan`. npm gets `--prefer-offline` (a warm cache answers without
 * asking the registry whether each package changed) and `--no-audit --no-fund` (two registry
 * round trips and noise nobody reads in a build log).
 * @throws BuildFailedError when the manager's binary is missing (and, for yarn and pnpm,
 *   `corepack` cannot provide it either).
 */
export function installCommand(root: string, plan: InstallPlan, options: CommandOptions): InstallCommand {
  const scripts = options.ignoreScripts ? ['--ignore-scripts'] : [];
  const { manager } = plan;
  let args: string[];
  let env: Record<string, string> = {};
  switch (manager) {
    case 'npm':
      args = [plan.lockfile ? 'ci' : 'install', '--no-audit', '--no-fund', '--prefer-offline', '--no-update-notifier', ...scripts];
      break;
    case 'pnpm':
      args = ['install', '--frozen-lockfile', '--prefer-offline', ...scripts];
      break;
    case 'yarn':
      args = isYarnBerry(join(root, plan.lockfile!))
        ? ['install', '--immutable', ...(options.ignoreScripts ? ['--mode=skip-build'] : [])]
        : ['install', '--frozen-lockfile', '--non-interactive', '--prefer-offline', ...scripts];
      // Yarn 1 asks nothing with --non-interactive; berry reads this instead.
      env = { YARN_ENABLE_INTERACTIVE: '0', YARN_ENABLE_TELEMETRY: '0' };
      break;
    case 'bun':
      args = ['install', '--frozen-lockfile', ...scripts];
      break;
  }
  const label = `${manager} ${args[0]}`;
  const binary = findExecutable(manager, options.env);
  if (binary) return { file: binary, args, label, env };
  if (manager === 'yarn' || manager === 'pnpm') {
    const corepack = findExecutable('corepack', options.env);
    // corepack fetches the version named by package.json's `packageManager` (or a default).
    if (corepack) {
      return { file: corepack, args: [manager, ...args], label, env: { ...env, COREPACK_ENABLE_DOWNLOAD_PROMPT: '0' } };
    }
  }
  const lock = plan.lockfile ? `the project has ${plan.lockfile}, so it is installed with ${manager}, but` : '';
  const alternative = manager === 'npm' ? '' : ' (or commit a package-lock.json instead)';
  throw new BuildFailedError(
    `${lock}${lock ? ' ' : ''}${manager} is not installed on the control plane${
      manager === 'yarn' || manager === 'pnpm' ? ' and corepack is not available to provide it' : ''
    }: install ${manager} there${alternative}`,
  );
}
