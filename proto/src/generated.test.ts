import { describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const protoDir = fileURLToPath(new URL('..', import.meta.url));

/** Every `node_modules/.bin` from the package up to the filesystem root, as npm scripts see them. */
function binDirs(from: string): string[] {
  const dirs: string[] = [];
  for (let dir = from; ; dir = dirname(dir)) {
    const bin = join(dir, 'node_modules', '.bin');
    if (existsSync(bin)) dirs.push(bin);
    if (dirname(dir) === dir) return dirs;
  }
}

async function listFiles(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath, e.name)))
    .sort();
}

describe('generated code in src/gen', () => {
  it('is what `buf generate` produces from the current .proto files', async () => {
    const out = await mkdtemp(join(tmpdir(), 'berth-proto-gen-'));
    try {
      const result = spawnSync('buf', ['generate', '--output', out], {
        cwd: protoDir,
        env: { ...process.env, PATH: [...binDirs(protoDir), process.env.PATH ?? ''].join(delimiter) },
        encoding: 'utf8',
      });
      expect(result.error).toBeUndefined();
      expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: '' });

      const committedDir = join(protoDir, 'src', 'gen');
      const freshDir = join(out, 'src', 'gen');
      const committed = await listFiles(committedDir);
      const fresh = await listFiles(freshDir);
      // A mismatch here means src/gen is stale: run `npm run generate -w @berth/proto`.
      expect(committed).toEqual(fresh);
      for (const file of fresh) {
        const [a, b] = await Promise.all([readFile(join(committedDir, file), 'utf8'), readFile(join(freshDir, file), 'utf8')]);
        expect({ file, content: a }).toEqual({ file, content: b });
      }
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  }, 60_000);

  it('passes `buf lint`', () => {
    const result = spawnSync('buf', ['lint'], {
      cwd: protoDir,
      env: { ...process.env, PATH: [...binDirs(protoDir), process.env.PATH ?? ''].join(delimiter) },
      encoding: 'utf8',
    });
    expect({ status: result.status, stdout: result.stdout, stderr: result.stderr }).toEqual({ status: 0, stdout: '', stderr: '' });
  }, 60_000);
});
