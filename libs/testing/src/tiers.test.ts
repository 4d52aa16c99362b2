/**
 * The test tiers keep their promises: every test file is in exactly one tier (test-tiers.mjs, checked
 * by scripts/test-tiers.mjs, which jest.config.mjs runs), and a file asking for a server its tier
 * does not start fails at once, saying which tier it is in and where to move it.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TEST_ENV, restrictTestEnv } from './env.js';
import { createTestBucket, createTestDatabase, testRedisUrl, testSandbox } from './index.js';

const checker = fileURLToPath(new URL('../../../scripts/test-tiers.mjs', import.meta.url));

describe('a test file in the unit tier', () => {
  it('is refused Postgres, Redis, S3 and the sandbox engine, by name of its tier', async () => {
    const refusal = (what: string) => new RegExp(`in the unit tier \\(test-tiers\\.mjs\\), which does not start ${what}: move it`);
    await expect(createTestDatabase()).rejects.toThrow(refusal('Postgres'));
    expect(() => testRedisUrl()).toThrow(refusal('Redis'));
    await expect(createTestBucket()).rejects.toThrow(refusal('S3'));
    expect(() => testSandbox()).toThrow(refusal('the sandbox engine'));
  });

  it('does not see the servers another tier of the same run started', async () => {
    process.env[TEST_ENV.postgresUrl] = 'postgres://127.0.0.1:5432/postgres';
    process.env[TEST_ENV.redisUrl] = 'redis://127.0.0.1:6379';
    restrictTestEnv('integration', ['postgresUrl']);
    expect(() => testRedisUrl()).toThrow(/in the integration tier .* does not start Redis/);
    restrictTestEnv('unit', []);
    await expect(createTestDatabase()).rejects.toThrow(/in the unit tier .* does not start Postgres/);
  });
});

describe('scripts/test-tiers.mjs', () => {
  let repo: string;
  const put = async (path: string, text = '') => {
    await mkdir(dirname(join(repo, path)), { recursive: true });
    await writeFile(join(repo, path), text);
  };
  const check = (manifest: Record<string, string[]>) =>
    put('test-tiers.mjs', `export default ${JSON.stringify(manifest)};`).then(
      () =>
        new Promise<{ code: number; out: string }>((resolve) =>
          execFile(process.execPath, [join(repo, 'scripts/test-tiers.mjs')], (error, stdout, stderr) =>
            resolve({ code: error ? Number(error.code) : 0, out: stdout + stderr }),
          ),
        ),
    );

  beforeAll(async () => {
    repo = await mkdtemp(join(tmpdir(), 'tiers-'));
    await put('scripts/test-tiers.mjs');
    await copyFile(checker, join(repo, 'scripts/test-tiers.mjs'));
    await put('libs/a/src/a.test.ts');
    await put('services/b/src/deep/b.test.ts');
    // Build output and dependencies hold no tests of ours.
    await put('libs/a/dist/a.test.ts');
    await put('node_modules/x/x.test.ts');
  });
  afterAll(() => rm(repo, { recursive: true, force: true }));

  it("counts each tier's files when every test file is in exactly one", async () => {
    const result = await check({ unit: ['libs/a/src/a.test.ts'], integration: ['services/b/src/deep/b.test.ts'] });
    expect(result).toEqual({ code: 0, out: 'unit         1 files\nintegration  1 files\n' });
  });

  it('fails naming a file in no tier, a file in two, and a listed file that does not exist', async () => {
    const result = await check({ unit: ['libs/a/src/a.test.ts', 'libs/gone.test.ts'], integration: ['libs/a/src/a.test.ts'] });
    expect(result.code).toBe(1);
    expect(result.out).toContain('libs/a/src/a.test.ts is in two tiers (unit and integration): keep one');
    expect(result.out).toContain('services/b/src/deep/b.test.ts is in no tier: add it to one in test-tiers.mjs (unit, integration)');
    expect(result.out).toContain('libs/gone.test.ts is listed in test-tiers.mjs but does not exist: remove it there');
  });
});
