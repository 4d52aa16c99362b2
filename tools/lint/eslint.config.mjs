// ESLint for Berth (`make lint`, part of `make test`): rules that catch real bugs — lost promises,
// swallowed errors, import cycles — and the project's own conventions (plugin.mjs: process.env only in
// env.ts, a status written only by its lifecycle's move function; files under 600 lines). None about
// layout: that is Prettier's (`make format`). Type information comes from one program over
// tsconfig.tests.json, which resolves workspace packages to their sources (the `berth-source` condition).
import { fileURLToPath } from 'node:url';
import tseslint from 'typescript-eslint';
import { importX, createNodeResolver } from 'eslint-plugin-import-x';
import berth from './plugin.mjs';
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
  // A file is read whole by whoever changes it: past ~600 lines it holds more than one thing (split it by
  // what each part does). Blank lines do not count; comments do. Tests too: no file is over it today.
  'max-lines': ['error', { max: 600, skipBlankLines: true, skipComments: false }],
};

/** The TypeScript sources ESLint checks (with type information). */
const typescriptFiles = [
  'cli/src/**/*.ts',
  'libs/*/src/**/*.ts',
  'services/*/src/**/*.ts',
  'proto/src/**/*.ts',
  'infra/local/src/**/*.ts',
  'charts/*/tests/**/*.ts',
  'images/tests/**/*.ts',
];

/**
 * Each lifecycle table's one status writer (`Class.method`), by the Postgres table whose `status` it
 * writes (libs/lifecycle; the tables are declared in each service's tables.ts). Statuses of tables
 * without a lifecycle (agent-runtime's runs and threads, whose values the LangGraph API defines; login
 * flows) are not checked.
 */
const statusMoves = {
  revisions: 'DeploymentStore.move',
  exports: 'ExportStore.moveExport',
  export_runs: 'ExportStore.moveRun',
  sandboxes: 'SandboxStore.move',
  templates: 'Templates.moveImage',
  pool_members: 'Pools.moveMember',
};

export default [
  {
    // Generated code, other npm projects (bench/, examples/, the agent-runtime's test projects) and run state.
    ignores: ['**/dist/**', 'proto/src/gen/**', 'bench/**', 'examples/**', 'services/*/test-projects/**', '**/.berth/**', 'coverage/**'],
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: syntaxRules,
  },
  {
    files: typescriptFiles,
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { project: ['./tsconfig.tests.json', './tsconfig.pages.json'], tsconfigRootDir: root },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    plugins: { '@typescript-eslint': tseslint.plugin, 'import-x': importX, berth },
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
      'berth/status-writes-in-move': ['error', { moves: statusMoves }],
    },
  },
  routePaths,
  {
    // Settings come from a package's src/env.ts (its zod schema), not from process.env anywhere else.
    files: typescriptFiles,
    ignores: [
      // The readers: each service's, the CLI's, the local stack's (what its servers inherit).
      'services/*/src/env.ts',
      'cli/src/env.ts',
      'infra/local/src/env.ts',
      // Tests set up the environment of the processes they start, and read where the servers are.
      '**/*.test.ts',
      '**/__tests__/**',
      'charts/*/tests/**',
      'images/tests/**',
      // Test support: jest's global setup hands the servers' addresses to its workers in process.env (their
      // only channel); the fake Kubernetes API runs a pod's command with the PATH of the tests; a contract
      // suite's child worker gets its spec the same way.
      'libs/testing/src/**',
      'libs/fake-kube/src/**',
      'libs/*/src/contract/**',
    ],
    rules: { 'berth/no-process-env': 'error' },
  },
];
