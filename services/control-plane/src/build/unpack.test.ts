/**
 * `unpackTarball`: hostile tarballs never write or point outside the target folder.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { gzipSync } from 'node:zlib';
import { rawTar, type RawEntry } from './__tests__/tarballs.js';
import { mkdir, mkdtemp, readFile, readdir, readlink, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UnsafeTarballError } from './errors.js';
import { unpackTarball } from './unpack.js';

let work: string;
let dest: string;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'berth-unpack-test-'));
  dest = join(work, 'deployments', 'd1', 'r1');
});
afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

async function refusal(entries: RawEntry[], limits = {}): Promise<UnsafeTarballError> {
  const error = await unpackTarball(rawTar(entries), dest, limits).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(UnsafeTarballError);
  return error as UnsafeTarballError;
}

describe('unpackTarball', () => {
  it('unpacks files, folders and links inside the project', async () => {
    const result = await unpackTarball(
      rawTar([
        { path: 'langgraph.json', body: '{}' },
        { path: 'src/', type: 'Directory' },
        { path: 'src/graph.ts', body: 'export const graph = 1;' },
        { path: 'src/alias.ts', type: 'SymbolicLink', linkpath: 'graph.ts' },
        { path: 'copy.ts', type: 'Link', linkpath: 'src/graph.ts' },
      ]),
      dest,
    );
    expect(result).toEqual({ entries: 5, bytes: 25 });
    expect((await readdir(dest)).sort()).toEqual(['copy.ts', 'langgraph.json', 'src']);
    expect(await readlink(join(dest, 'src/alias.ts'))).toBe('graph.ts');
    expect(await readFile(join(dest, 'copy.ts'), 'utf8')).toBe('export const graph = 1;');
  });

  it('accepts a tarball from a file path or a stream', async () => {
    const file = join(work, 'p.tgz');
    await mkdir(work, { recursive: true });
    await import('node:fs/promises').then((fs) => fs.writeFile(file, rawTar([{ path: 'a.txt', body: 'a' }])));
    await unpackTarball({ path: file }, dest);
    await unpackTarball((await import('node:fs')).createReadStream(file), join(work, 'other'));
    expect(await readFile(join(dest, 'a.txt'), 'utf8')).toBe('a');
    expect(await readFile(join(work, 'other', 'a.txt'), 'utf8')).toBe('a');
  });

  it('refuses paths that climb out of the folder, and writes nothing outside', async () => {
    const error = await refusal([
      { path: 'ok.txt', body: 'fine' },
      { path: '../../escaped.txt', body: 'pwned' },
    ]);
    expect(error.message).toBe('the project tarball is unsafe: entry "../../escaped.txt" contains ".."');
    expect(existsSync(join(work, 'deployments', 'escaped.txt'))).toBe(false);
    // Checked before writing: not even the good entry before it was written.
    expect(existsSync(dest)).toBe(false);
    expect((await refusal([{ path: 'src/../../x', body: 'x' }])).message).toMatch(/contains "\.\."/);
  });

  it('refuses absolute paths', async () => {
    const error = await refusal([{ path: '/tmp/berth-abs-test.txt', body: 'x' }]);
    expect(error.message).toMatch(/"\/tmp\/berth-abs-test.txt" is an absolute path/);
  });

  it('refuses links that point outside, absolute or relative, symbolic or hard', async () => {
    expect((await refusal([{ path: 'up', type: 'SymbolicLink', linkpath: '../../..' }])).message).toMatch(
      /entry "up" links outside the project \(\.\.\/\.\.\/\.\.\)/,
    );
    expect((await refusal([{ path: 'a/b/c', type: 'SymbolicLink', linkpath: '../../../etc' }])).message).toMatch(/links outside/);
    expect((await refusal([{ path: 'passwd', type: 'SymbolicLink', linkpath: '/etc/passwd' }])).message).toMatch(/links to an absolute path \(\/etc\/passwd\)/);
    expect((await refusal([{ path: 'h', type: 'Link', linkpath: '../outside' }])).message).toMatch(/links outside/);
    // A link, then a file written "through" it: the link is refused first.
    const error = await refusal([
      { path: 'dir', type: 'SymbolicLink', linkpath: '/tmp' },
      { path: 'dir/planted.txt', body: 'x' },
    ]);
    expect(error.message).toMatch(/"dir" links to an absolute path/);
    expect(existsSync('/tmp/planted.txt')).toBe(false);
  });

  it('refuses device files and FIFOs', async () => {
    expect((await refusal([{ path: 'null', type: 'CharacterDevice' }])).message).toMatch(
      /entry "null" is a CharacterDevice entry; only files, folders and links can be deployed/,
    );
    expect((await refusal([{ path: 'pipe', type: 'FIFO' }])).message).toMatch(/FIFO/);
  });

  it('refuses archives over the entry or size limits', async () => {
    const many = Array.from({ length: 11 }, (_, i) => ({ path: `f${i}.txt`, body: 'x' }));
    expect((await refusal(many, { maxEntries: 10 })).message).toBe('the project tarball has more than 10 entries');
    const big = [{ path: 'big.bin', body: 'x'.repeat(2 * 1024 * 1024) }];
    expect((await refusal(big, { maxBytes: 1024 * 1024 })).message).toBe('the project tarball unpacks to more than 1 MB');
  });

  it('refuses data that is not a tarball', async () => {
    for (const data of [Buffer.from('definitely not a tarball'), gzipSync(Buffer.alloc(1024))]) {
      const error = await unpackTarball(data, dest).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UnsafeTarballError);
      expect((error as Error).message).toBe('the project tarball is not a tar archive (gzipped or plain)');
    }
  });
});
