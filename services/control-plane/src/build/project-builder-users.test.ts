/**
 * `ProjectBuilder` with `users` (real npm, real processes; these machines run tests as root, as
 * `berth up` does there): install scripts and graph modules run as the deployment's own OS user,
 * and what the build leaves (the artifact and the shared dependency cache) is root's and read-only
 * to that user, also when a later build reuses it.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync } from 'node:fs';
import { chmod, lstat, mkdir, mkdtemp, readFile, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { testEnv } from '@berth/testing';
import { asUser as asDeploymentUser } from '../__tests__/as-user.js';
import { OsUsers, type DeploymentUser } from '../deployers/local/os-users.js';
import { rawTar } from './__tests__/tarballs.js';
import { handOver, takeBack } from './ownership.js';
import { ProjectBuilder } from './project-builder.js';

let root: string;
let artifacts: string;
let rootOnly: string;
let users: OsUsers;
let builder: ProjectBuilder;
let user: DeploymentUser;

const lockfile = {
  name: 'p',
  lockfileVersion: 3,
  requires: true,
  packages: {
    '': { name: 'p', dependencies: { ms: '2.1.3' } },
    'node_modules/ms': {
      version: '2.1.3',
      integrity: 'sha512-6FlzubTLZG3J2a/NVCAleEhjzq5oxgHyaCU9yYXvcLsvoVaHJq/s5xXI6/XXP6tz7R9xAOtHnSO/tXtF3WRTlA==',
      license: 'MIT',
    },
  },
};

/** A project with one registry dependency whose postinstall and graph module report who they run as. */
function project(): Buffer {
  const postinstall = `id -u > postinstall-uid.txt; if cat ${rootOnly} > /dev/null 2>&1; then echo read; else echo denied; fi > postinstall-read.txt`;
  const graph = [
    "import { writeFileSync } from 'node:fs';",
    "import ms from 'ms';",
    'console.log(`graph loaded as uid ${process.getuid()}, ms("1s") = ${ms("1s")}`);',
    "try { writeFileSync('src/graph.ts', ''); console.log('graph rewrote itself'); } catch (e) { console.log(`graph cannot write: ${e.code}`); }",
    'const noop = () => undefined;',
    'export const graph = { invoke: noop, streamEvents: noop, getGraphAsync: noop };',
  ].join('\n');
  const files = {
    'package.json': JSON.stringify({ name: 'p', type: 'module', dependencies: { ms: '2.1.3' }, scripts: { postinstall } }),
    'package-lock.json': JSON.stringify(lockfile),
    'langgraph.json': '{"graphs":{"agent":"./src/graph.ts:graph"}}',
    'src/graph.ts': graph,
  };
  return rawTar(Object.entries(files).map(([path, body]) => ({ path, body })));
}

async function build(revisionId: string) {
  const lines: string[] = [];
  const artifact = await builder.build({ tarball: project(), deploymentId: 'dep-u', revisionId }, (line) => lines.push(line));
  return { artifact, log: lines.join('\n') };
}

/** Every entry under `dir` (itself included). */
async function walk(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return [dir, ...entries.map((e) => join(e.parentPath ?? e.path, e.name))];
}

/** Paths under `dir` that are not root's, or that someone besides root may write. */
async function notRootsAlone(dir: string): Promise<string[]> {
  const bad: string[] = [];
  for (const path of await walk(dir)) {
    const info = await lstat(path);
    if (info.uid !== 0 || info.gid !== 0 || (!info.isSymbolicLink() && info.mode & 0o022)) bad.push(path);
  }
  return bad;
}

const asUser = (code: string) => asDeploymentUser(user, code);

beforeAll(async () => {
  // Under the test run's folder, which others may traverse (as Berth's state folder must be).
  root = await mkdtemp(join(testEnv('tmpDir'), 'build-users-'));
  await chmod(root, 0o755);
  artifacts = join(root, 'artifacts');
  rootOnly = join(root, 'root-only');
  await writeFile(rootOnly, 'platform secret', { mode: 0o600 });
  users = new OsUsers({ homesDir: join(root, 'agents'), artifactsDir: artifacts, registryDir: join(root, 'uids') });
  builder = new ProjectBuilder({ artifactsDir: artifacts, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, users });
  user = await users.userFor('dep-u');
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('ProjectBuilder with OS users', () => {
  it('runs install scripts and graph modules as the deployment user, then keeps the build read-only to it', async () => {
    expect(process.getuid?.()).toBe(0);
    expect(user.uid).not.toBe(0);
    const { artifact, log } = await build('rev-1');
    expect(artifact.graphs).toEqual(['agent']);
    expect(log).toMatch(/Installing dependencies: npm ci/);
    const dir = artifact.path;

    // The postinstall script ran as the user and could not read a root-only file.
    expect((await readFile(join(dir, 'postinstall-uid.txt'), 'utf8')).trim()).toBe(String(user.uid));
    expect((await readFile(join(dir, 'postinstall-read.txt'), 'utf8')).trim()).toBe('denied');
    // The graph module loaded as the user, from a tree it can read but no longer change.
    expect(log).toContain(`graph loaded as uid ${user.uid}, ms("1s") = 1000`);
    expect(log).toContain('graph cannot write: EACCES');

    // Everything the build left is root's alone: the artifact and the cache entry its node_modules share.
    expect(await notRootsAlone(dir)).toEqual([]);
    const cache = join(artifacts, '.cache', 'dependencies');
    expect((await stat(cache)).mode & 0o777).toBe(0o700);
    expect(await notRootsAlone(cache)).toEqual([]);
    expect((await stat(join(dir, 'node_modules/ms/index.js'))).nlink).toBe(2);
    const own = await stat(join(artifacts, 'dep-u'));
    expect([own.uid, own.gid, own.mode & 0o777]).toEqual([0, user.gid, 0o750]);

    // The user (e.g. its agent server) reads its build but changes nothing in it.
    const file = (path: string) => JSON.stringify(join(dir, path));
    expect(asUser(`require('fs').readFileSync(${file('node_modules/ms/index.js')})`)).toBe('ok');
    expect(asUser(`require('fs').appendFileSync(${file('node_modules/ms/index.js')}, 'x')`)).toBe('EACCES');
    expect(asUser(`require('fs').writeFileSync(${file('src/new.js')}, 'x')`)).toBe('EACCES');
    expect(asUser(`require('fs').chmodSync(${file('src/graph.ts')}, 0o666)`)).toBe('EPERM');
    expect(asUser(`require('fs').readdirSync(${JSON.stringify(cache)})`)).toBe('EACCES');
  }, 180_000);

  it('builds again from the cached dependencies (hard links, no install)', async () => {
    const { artifact, log } = await build('rev-2');
    expect(artifact.graphs).toEqual(['agent']);
    expect(log).toMatch(/Reusing the dependencies of an earlier build with the same package-lock.json/);
    expect(log).not.toMatch(/Installing dependencies/);
    expect(log).toContain(`graph loaded as uid ${user.uid}, ms("1s") = 1000`);
    expect(existsSync(join(artifact.path, 'postinstall-uid.txt'))).toBe(false);
    expect((await stat(join(artifact.path, 'node_modules/ms/index.js'))).nlink).toBe(3);
    expect(await notRootsAlone(artifact.path)).toEqual([]);
  }, 60_000);
});

describe('taking a build folder back from its user', () => {
  it('makes it root-owned and unwritable by others, without following symlinks or keeping setuid bits', async () => {
    const tree = join(root, 'tree');
    const outside = join(root, 'outside');
    await mkdir(join(tree, 'sub'), { recursive: true });
    await writeFile(outside, '');
    await writeFile(join(tree, 'sub', 'open'), '', { mode: 0o666 });
    await writeFile(join(tree, 'setuid'), '');
    await symlink(outside, join(tree, 'sub', 'link'));
    await handOver(tree, user.uid, user.gid);
    expect(await walk(tree).then((paths) => Promise.all(paths.map(async (p) => (await lstat(p)).uid)))).toEqual(Array(5).fill(user.uid));
    // What an install script could leave behind: a world-writable folder, a setuid file.
    expect(asUser(`require('fs').chmodSync(${JSON.stringify(join(tree, 'sub'))}, 0o777)`)).toBe('ok');
    expect(asUser(`require('fs').chmodSync(${JSON.stringify(join(tree, 'setuid'))}, 0o4755)`)).toBe('ok');
    await chmod(outside, 0o666);

    await takeBack(tree);
    expect(await notRootsAlone(tree)).toEqual([]);
    expect((await stat(join(tree, 'setuid'))).mode & 0o7777).toBe(0o755);
    expect((await stat(join(tree, 'sub', 'open'))).mode & 0o777).toBe(0o644);
    expect((await stat(join(tree, 'sub'))).mode & 0o777).toBe(0o755);
    // The symlink's target, outside the tree, is untouched.
    expect((await stat(outside)).mode & 0o777).toBe(0o666);
  });
});
