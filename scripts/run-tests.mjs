#!/usr/bin/env node
// Runs the whole jest suite and ends with the one line CI reads: `N passed, N failed[, N skipped]`.
// Extra arguments go to jest (e.g. a path filter).
import { spawnSync } from 'node:child_process';
import { chmodSync, constants, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

const root = new URL('..', import.meta.url).pathname;

// As root, the tests run deployed code as OS users of its own (docs/security.md), which must be able
// to load Berth from this checkout. A checkout made private (e.g. cloned into `mktemp -d`) is opened
// for traversal only; a private folder above it cannot be fixed from here, so say so.
if (process.getuid?.() === 0) {
  const checkout = resolve(root);
  if (!(statSync(checkout).mode & constants.S_IXOTH)) {
    chmodSync(checkout, statSync(checkout).mode | 0o011);
    console.log(`run-tests: ${checkout} may now be traversed by other users (the deployments' OS users load Berth from it)`);
  }
  for (let dir = dirname(checkout); dir !== dirname(dir); dir = dirname(dir)) {
    if (!(statSync(dir).mode & constants.S_IXOTH)) {
      console.log(`run-tests: ${dir} cannot be traversed by other users: the isolation tests will fail (move the checkout)`);
      break;
    }
  }
}
mkdirSync(join(root, '.berth'), { recursive: true });
const resultsFile = join(root, '.berth', 'jest-results.json');
rmSync(resultsFile, { force: true });

const jest = spawnSync(
  process.execPath,
  ['--experimental-vm-modules', '--no-warnings=ExperimentalWarning', join(root, 'node_modules/jest/bin/jest.js'),
    '--json', `--outputFile=${resultsFile}`, ...process.argv.slice(2)],
  { cwd: root, stdio: 'inherit' },
);

let passed = 0;
let failed = 0;
let skipped = 0;
try {
  const results = JSON.parse(readFileSync(resultsFile, 'utf8'));
  passed = results.numPassedTests;
  failed = results.numFailedTests;
  skipped = results.numPendingTests + results.numTodoTests;
  // A suite that fails to load (syntax error, failing beforeAll) has no failed tests; count it.
  failed += results.testResults.filter((s) => s.status === 'failed' && s.assertionResults.every((a) => a.status !== 'failed')).length;
} catch {
  failed = Math.max(failed, 1);
}
const status = jest.status ?? 1;
if (status !== 0 && failed === 0) failed = 1;
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(status);
