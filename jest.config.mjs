// Jest runs TypeScript sources directly (swc), as native ESM. Workspace packages resolve to their
// `src/index.ts`, so tests never need a build of the packages they import.
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('.', import.meta.url).pathname;
const workspaceDirs = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).workspaces.flatMap((pattern) =>
  pattern.endsWith('/*')
    ? readdirSync(join(root, pattern.slice(0, -2))).map((d) => join(pattern.slice(0, -2), d))
    : [pattern],
);
const packageMap = {};
for (const dir of workspaceDirs) {
  const manifest = join(root, dir, 'package.json');
  if (!existsSync(manifest)) continue;
  const { name } = JSON.parse(readFileSync(manifest, 'utf8'));
  packageMap[`^${name.replace('/', '\\/')}$`] = `<rootDir>/${dir}/src/index.ts`;
}

export default {
  rootDir: root,
  testEnvironment: 'node',
  testMatch: [
    '<rootDir>/{libs,services,infra,cli,proto}/**/src/**/*.test.ts',
    '<rootDir>/charts/*/tests/**/*.test.ts',
    // The lint rules' tests (ESLint's RuleTester), in JavaScript as the rules are (ESLint loads them untranspiled).
    '<rootDir>/tools/*/tests/**/*.test.mjs',
  ],
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
  globalSetup: '<rootDir>/libs/testing/src/jest-global-setup.mjs',
  globalTeardown: '<rootDir>/libs/testing/src/jest-global-teardown.mjs',
  testTimeout: 30000,
  maxWorkers: 2,
  // A worker whose heap grew past this after a test file is replaced: memory a file leaves behind
  // (the graph-output tests' 50 MB values, in-process servers) does not accumulate into an
  // out-of-memory crash of a later file in the same worker.
  workerIdleMemoryLimit: '1GB',
};
