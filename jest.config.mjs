// Jest runs TypeScript sources directly (swc), as native ESM. Workspace packages resolve to their
// `src/index.ts`, so tests never need a build of the packages they import.
//
// One jest project per test tier (test-tiers.mjs lists each test file's tier; loading this file
// fails while a file is in no tier or in two). A tier's global setup starts what it needs
// (libs/testing/src/tiers.ts); jest runs it only when a file of that tier is selected.
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { readTiers } from './scripts/test-tiers.mjs';

const root = new URL('.', import.meta.url).pathname;
const workspaceDirs = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).workspaces.flatMap((pattern) =>
  pattern.endsWith('/*') ? readdirSync(join(root, pattern.slice(0, -2))).map((d) => join(pattern.slice(0, -2), d)) : [pattern],
);
const packageMap = {};
for (const dir of workspaceDirs) {
  const manifest = join(root, dir, 'package.json');
  // A workspace without src/index.ts (the console: a browser app) resolves as installed.
  if (!existsSync(manifest) || !existsSync(join(root, dir, 'src/index.ts'))) continue;
  const { name } = JSON.parse(readFileSync(manifest, 'utf8'));
  packageMap[`^${name.replace('/', '\\/')}$`] = `<rootDir>/${dir}/src/index.ts`;
}

const project = {
  rootDir: root,
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      {
        jsc: { parser: { syntax: 'typescript' }, target: 'es2022', keepClassNames: true },
        module: { type: 'es6' },
        sourceMaps: 'inline',
      },
    ],
  },
  moduleNameMapper: {
    ...packageMap,
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  // Hides from each file the servers its tier does not start (started for another tier of the run).
  setupFiles: ['<rootDir>/libs/testing/src/tier-guard.ts'],
};

export default {
  projects: Object.entries(readTiers()).map(([tier, files]) => ({
    ...project,
    displayName: tier,
    testMatch: files.map((file) => `<rootDir>/${file}`),
    globals: { berthTestTier: tier },
    // The unit tier starts nothing. One teardown (jest runs it once) stops what every tier started.
    ...(tier === 'unit'
      ? {}
      : {
          globalSetup: `<rootDir>/libs/testing/src/jest-setup/${tier}.mjs`,
          globalTeardown: '<rootDir>/libs/testing/src/jest-global-teardown.mjs',
        }),
  })),
  testTimeout: 30000,
  maxWorkers: 2,
  // A worker whose heap grew past this after a test file is replaced: memory a file leaves behind
  // (the graph-output tests' 50 MB values, in-process servers) does not accumulate into an
  // out-of-memory crash of a later file in the same worker.
  workerIdleMemoryLimit: '1GB',
};
