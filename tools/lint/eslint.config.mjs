// ESLint for Berth (`make lint`, part of `make test`): only rules that catch real bugs — lost promises,
// swallowed errors, import cycles — none about style. Type information comes from one program over
// tsconfig.tests.json, which resolves workspace packages to their sources (the `berth-source` condition).
import { fileURLToPath } from 'node:url';
import tseslint from 'typescript-eslint';
import { importX, createNodeResolver } from 'eslint-plugin-import-x';
import routePaths from './route-paths.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Rules that need no type information, for the TypeScript sources and the repo's own .mjs scripts alike. */
const syntaxRules = {
  // An error thrown from an async executor is lost.
  'no-async-promise-executor': 'error',
  // `return`/`throw` in finally replaces the error being thrown.
  'no-unsafe-finally': 'error',
  // An empty catch swallows the error; a comment saying why it may be ignored is enough.
  'no-empty': ['error', { allowEmptyCatch: false }],
  'no-constant-binary-expression': 'error',
  // A control character in a regex is usually a typo (an intended one says so with a disable comment).
  'no-control-regex': 'error',
};

export default [
  {
    // Generated code, other npm projects (bench/, examples/, the agent-runtime's test projects) and run state.
    ignores: [
      '**/dist/**',
      'proto/src/gen/**',
      'bench/**',
      'examples/**',
      'services/*/test-projects/**',
      '**/.berth/**',
      'coverage/**',
    ],
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: syntaxRules,
  },
  {
    files: ['cli/src/**/*.ts', 'libs/*/src/**/*.ts', 'services/*/src/**/*.ts', 'proto/src/**/*.ts', 'infra/local/src/**/*.ts', 'charts/*/tests/**/*.ts', 'images/tests/**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { project: ['./tsconfig.tests.json', './tsconfig.pages.json'], tsconfigRootDir: root },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    plugins: { '@typescript-eslint': tseslint.plugin, 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.js', '.mjs'],
      // Cycles are ours to find: packages from npm are not followed. Workspace packages resolve to their
      // real paths (libs/..., services/...), so cycles between them are found.
      'import-x/ignore': ['/node_modules/'],
      'import-x/resolver-next': [
        createNodeResolver({
          // Sources import `./x.js` meaning `./x.ts`; workspace packages export their sources under `berth-source`.
          extensionAlias: { '.js': ['.ts', '.js'] },
          conditionNames: ['berth-source', 'types', 'import', 'node', 'default'],
        }),
      ],
    },
    rules: {
      ...syntaxRules,
      // A promise nobody awaits loses its rejection (an unhandled rejection ends the process) and its ordering.
      '@typescript-eslint/no-floating-promises': 'error',
      // An async callback where a void one is expected: its rejection reaches no one.
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      // `return promise` inside try/catch skips the catch (and runs the finally too early).
      '@typescript-eslint/return-await': ['error', 'error-handling-correctness-only'],
      'import-x/no-cycle': 'error',
    },
  },
  routePaths,
];
