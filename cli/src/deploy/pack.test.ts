/**
 * `packProject`: what ends up in the tarball a deploy uploads.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { list as listTar, extract } from 'tar';
import { listProjectFiles, packProject, PackTooLargeError, type PackProgress } from './pack.js';

let work: string;
let project: string;

async function put(rel: string, content: string | Buffer = rel): Promise<void> {
  const file = join(project, rel);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, content);
}

async function entriesOf(file: string): Promise<string[]> {
  const paths: string[] = [];
  await listTar({ file, onReadEntry: (entry) => paths.push(entry.path) });
  return paths;
}

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'berth-pack-test-'));
  project = join(work, 'project');
  await mkdir(project);
});
afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

describe('packProject', () => {
  it('packs exactly the files git would commit, minus dependencies, local state and .env files', async () => {
    await put('langgraph.json', '{"graphs":{"a":"./src/a.ts:graph"}}');
    await put('package.json', '{"type":"module"}');
    await put('src/a.ts', 'export const graph = 1;');
    await put('.gitignore', 'dist/\n*.log\n!keep.log\n/secret.txt\n');
    await put('dist/out.js');
    await put('debug.log');
    await put('keep.log');
    await put('secret.txt');
    await put('src/secret.txt'); // `/secret.txt` is anchored to the root
    await put('node_modules/x/index.js');
    await put('src/node_modules/y/index.js');
    await put('.git/HEAD');
    await put('.berth/state');
    await put('.langgraph_api/store.json');
    await put('.env', 'OPENAI_API_KEY=sk-1');
    await put('.env.local', 'X=1');
    await put('src/.env.production', 'X=1');
    await put('.envrc', 'not a dotenv file of the project'); // only .env and .env.*
    // A nested .gitignore adds patterns relative to its folder and re-includes a parent's.
    await put('src/data/.gitignore', '*.csv\n!*.log\n');
    await put('src/data/big.csv');
    await put('src/data/notes.log');
    await put('src/data/small.json');
    await put('other/big.csv'); // the nested pattern does not apply outside its folder

    const packed = await packProject(project);
    try {
      const expected = [
        '.envrc',
        '.gitignore',
        'keep.log',
        'langgraph.json',
        'other/big.csv',
        'package.json',
        'src/a.ts',
        'src/data/.gitignore',
        'src/data/notes.log',
        'src/data/small.json',
        'src/secret.txt',
      ];
      expect(packed.files).toEqual(expected);
      expect(packed.fileCount).toBe(expected.length);
      expect(packed.bytes).toBe((await stat(packed.file)).size);
      expect(await entriesOf(packed.file)).toEqual(expected);

      // Unpacked, it is the same files with the same content.
      const out = join(work, 'out');
      await mkdir(out);
      await extract({ file: packed.file, cwd: out });
      expect((await listProjectFiles(out)).files).toEqual(expected);
      expect(await readFile(join(out, 'src/a.ts'), 'utf8')).toBe('export const graph = 1;');
      expect(await readFile(join(out, 'src/data/notes.log'), 'utf8')).toBe('src/data/notes.log');
    } finally {
      await packed.dispose();
    }
    await expect(stat(packed.file)).rejects.toThrow();
  });

  it('cannot re-include a file inside an ignored folder, as in git', async () => {
    await put('.gitignore', 'build/\n!build/keep.txt\n');
    await put('build/keep.txt');
    await put('a.ts');
    const packed = await packProject(project);
    await packed.dispose();
    expect(packed.files).toEqual(['.gitignore', 'a.ts']);
  });

  it('stores links inside the project as links and leaves out links that lead outside', async () => {
    await put('src/real.ts', 'export const x = 1;');
    await put('shared/util.ts');
    await writeFile(join(work, 'outside.txt'), 'private');
    await mkdir(join(work, 'outside-dir'));
    await writeFile(join(work, 'outside-dir', 'id_rsa'), 'private');
    await symlink('real.ts', join(project, 'src/alias.ts'));
    await symlink('../shared', join(project, 'src/shared'));
    await symlink('../outside.txt', join(project, 'up.txt'));
    await symlink(join(work, 'outside-dir'), join(project, 'abs-dir'));
    // Inside by name, outside through another link.
    await symlink('up.txt', join(project, 'sneaky.txt'));

    const packed = await packProject(project);
    try {
      expect(packed.files).toEqual(['shared/util.ts', 'src/alias.ts', 'src/real.ts', 'src/shared']);
      expect(packed.skipped.map((s) => s.path)).toEqual(['abs-dir', 'sneaky.txt', 'up.txt']);
      expect(packed.skipped[0]!.reason).toMatch(/absolute/);
      expect(packed.skipped[2]!.reason).toMatch(/outside the project/);

      const out = join(work, 'out');
      await mkdir(out);
      await extract({ file: packed.file, cwd: out });
      expect(await readlink(join(out, 'src/alias.ts'))).toBe('real.ts');
      expect(await readFile(join(out, 'src/alias.ts'), 'utf8')).toBe('export const x = 1;');
      expect(await readlink(join(out, 'src/shared'))).toBe('../shared');
      await expect(stat(join(out, 'up.txt'))).rejects.toThrow();
    } finally {
      await packed.dispose();
    }
  });

  it('refuses a tarball over the limit, removing what it wrote, and reports progress', async () => {
    // Random bytes do not compress, so the tarball is at least this large.
    for (let i = 0; i < 4; i += 1) await put(`data/blob-${i}.bin`, randomBytes(64 * 1024));
    const tempDir = join(work, 'tmp');
    await mkdir(tempDir);
    const progress: PackProgress[] = [];
    const error = await packProject(project, { maxBytes: 100 * 1024, tempDir, onProgress: (p) => progress.push(p) }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PackTooLargeError);
    expect((error as Error).message).toMatch(/larger than 100 KB/);
    expect((error as Error).message).toMatch(/\.gitignore/);
    expect(await import('node:fs/promises').then((fs) => fs.readdir(tempDir))).toEqual([]);

    progress.length = 0;
    const packed = await packProject(project, { tempDir, onProgress: (p) => progress.push(p) });
    await packed.dispose();
    expect(progress.at(-1)).toEqual({ files: 4, totalFiles: 4, bytes: packed.bytes });
    expect(packed.bytes).toBeGreaterThan(256 * 1024);
    // Monotonic: files and bytes never go back.
    for (let i = 1; i < progress.length; i += 1) {
      expect(progress[i]!.files).toBeGreaterThanOrEqual(progress[i - 1]!.files);
      expect(progress[i]!.bytes).toBeGreaterThanOrEqual(progress[i - 1]!.bytes);
    }
  });

  it('packs the same project into the same order every time', async () => {
    for (const name of ['b.ts', 'a.ts', 'B.ts', 'z/1.ts', 'a/2.ts', 'a-b.ts']) await put(name);
    const first = await packProject(project);
    const second = await packProject(project);
    await first.dispose();
    await second.dispose();
    expect(first.files).toEqual(['B.ts', 'a/2.ts', 'a-b.ts', 'a.ts', 'b.ts', 'z/1.ts']);
    expect(second.files).toEqual(first.files);
  });

  it('says so when there is nothing to pack or no directory', async () => {
    await put('.gitignore', '*\n');
    await expect(packProject(project)).rejects.toThrow(/nothing to pack/);
    await expect(packProject(join(work, 'missing'))).rejects.toThrow(/cannot pack .*missing: ENOENT/);
  });
});
