#!/usr/bin/env node
// Runs the whole jest suite and ends with the one line CI reads: `N passed, N failed[, N skipped]`.
// Extra arguments go to jest (e.g. a path filter).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
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
