/**
 * Which package manager installs a project, with what command, and when installs are reused.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DependencyCache } from './dependency-cache.js';
import { installCommand, planInstall } from './package-manager.js';

let root: string;

async function put(rel: string, content = '{}'): Promise<void> {
  await mkdir(dirname(join(root, rel)), { recursive: true });
  await writeFile(join(root, rel), content);
}

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'berth-pm-test-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('planInstall', () => {
  it('picks the manager of the lockfile next to langgraph.json', async () => {
    for (const [file, manager] of [
      ['package-lock.json', 'npm'],
      ['pnpm-lock.yaml', 'pnpm'],
      ['yarn.lock', 'yarn'],
      ['bun.lock', 'bun'],
      ['bun.lockb', 'bun'],
    ] as const) {
      await rm(root, { recursive: true, force: true });
      await put('package.json');
      await put(file, '');
      expect(planInstall(root, root)).toEqual({ manager, dir: root, lockfile: file });
    }
  });

  it('finds a monorepo lockfile above langgraph.json, never above the project', async () => {
    await put('package.json');
    await put('yarn.lock', '');
    await put('apps/agent/package.json');
    expect(planInstall(root, join(root, 'apps/agent'))).toEqual({ manager: 'yarn', dir: root, lockfile: 'yarn.lock' });
    const inner = join(root, 'apps');
    expect(planInstall(inner, join(inner, 'agent'))).toEqual({ manager: 'npm', dir: join(inner, 'agent'), lockfile: undefined });
    await rm(join(root, 'apps/agent/package.json'));
    expect(planInstall(inner, join(inner, 'agent'))).toBeUndefined();
  });
});

describe('installCommand', () => {
  const env = { PATH: '/nowhere' };

  it('installs npm projects exactly and quickly from a warm cache', async () => {
    const bin = join(root, 'bin');
    await mkdir(bin);
    await writeFile(join(bin, 'npm'), '#!/bin/sh\n', { mode: 0o755 });
    await put('package-lock.json');
    const plan = planInstall(root, root)!;
    expect(installCommand(root, plan, { ignoreScripts: false, env: { PATH: bin } })).toMatchObject({
      file: join(bin, 'npm'),
      args: ['ci', '--no-audit', '--no-fund', '--prefer-offline', '--no-update-notifier'],
      label: 'npm ci',
    });
    await rm(join(root, 'package-lock.json'));
    await put('package.json');
    const loose = installCommand(root, planInstall(root, root)!, { ignoreScripts: true, env: { PATH: bin } });
    expect(loose.args).toEqual(['install', '--no-audit', '--no-fund', '--prefer-offline', '--no-update-notifier', '--ignore-scripts']);
  });

  it('falls back to corepack for yarn and pnpm, and tells yarn 1 from berry', async () => {
    const bin = join(root, 'bin');
    await mkdir(bin);
    await writeFile(join(bin, 'corepack'), '#!/bin/sh\n', { mode: 0o755 });
    await put('yarn.lock', '__metadata:\n  version: 8\n');
    const berry = installCommand(root, planInstall(root, root)!, { ignoreScripts: false, env: { PATH: bin } });
    expect(berry).toMatchObject({ file: join(bin, 'corepack'), args: ['yarn', 'install', '--immutable'], label: 'yarn install' });
    expect(berry.env.COREPACK_ENABLE_DOWNLOAD_PROMPT).toBe('0');
    await put('yarn.lock', '# yarn lockfile v1\n');
    expect(installCommand(root, planInstall(root, root)!, { ignoreScripts: false, env: { PATH: bin } }).args).toContain('--frozen-lockfile');
  });

  it('says what is missing when the binary is not there', async () => {
    await put('bun.lock', '');
    expect(() => installCommand(root, planInstall(root, root)!, { ignoreScripts: false, env })).toThrow(
      'the project has bun.lock, so it is installed with bun, but bun is not installed on the control plane: install bun there (or commit a package-lock.json instead)',
    );
  });
});

describe('DependencyCache', () => {
  it('reuses an install only for the same lockfile and package.json, and never for workspaces', async () => {
    const cache = new DependencyCache({ dir: join(root, 'cache') });
    const project = (name: string) => join(root, name);
    for (const name of ['a', 'b', 'c']) {
      await put(`${name}/package.json`, '{"dependencies":{"x":"1.0.0"}}');
      await put(`${name}/package-lock.json`, '{"lockfileVersion":3}');
    }
    await put('c/package-lock.json', '{"lockfileVersion":3,"changed":true}');
    const key = (name: string) => cache.key(project(name), planInstall(project(name), project(name))!, false);
    expect(key('a')).toBe(key('b'));
    expect(key('c')).not.toBe(key('a'));
    expect(cache.key(project('a'), planInstall(project('a'), project('a'))!, true)).not.toBe(key('a'));

    await put('a/node_modules/x/index.js', 'module.exports = 1;');
    await cache.store(key('a')!, project('a'));
    expect(await cache.restore(key('b')!, project('b'))).toBe(1);
    expect(await cache.restore(key('c')!, project('c'))).toBeUndefined();

    await put('w/package.json', '{"workspaces":["packages/*"]}');
    await put('w/package-lock.json');
    expect(cache.key(project('w'), planInstall(project('w'), project('w'))!, false)).toBeUndefined();
  });
});
