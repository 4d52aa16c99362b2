#!/usr/bin/env node
// Runs jest and ends with the one line CI reads: `N passed, N failed[, N skipped]`.
//   node scripts/run-tests.mjs [--tier <tier>]... [jest arguments, e.g. a path filter]
// `--tier` (repeatable) runs only those tiers of test-tiers.mjs; without it, every tier but `images`
// (`make test-images` runs that one). Before the summary it prints the slowest test files;
// .berth/test-timings.tsv has them all.
import { spawnSync } from 'node:child_process';
import { chmodSync, constants, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { TestTierError, tierOfFile } from './test-tiers.mjs';

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
// Jest would refuse the configuration too (jest.config.mjs), but with its own stack trace around the message.
let tierOf;
try {
  tierOf = tierOfFile();
} catch (error) {
  if (!(error instanceof TestTierError)) throw error;
  console.error(error.message);
  console.log('0 passed, 1 failed');
  process.exit(1);
}
mkdirSync(join(root, '.berth'), { recursive: true });
const resultsFile = join(root, '.berth', 'jest-results.json');
const timingsFile = join(root, '.berth', 'test-timings.tsv');
rmSync(resultsFile, { force: true });

const args = [];
const tiers = [];
for (let i = 2; i < process.argv.length; i++) {
  if (process.argv[i] === '--tier') tiers.push(process.argv[++i]);
  else args.push(process.argv[i]);
}
const jest = spawnSync(
  process.execPath,
  [
    '--experimental-vm-modules',
    '--no-warnings=ExperimentalWarning',
    join(root, 'node_modules/jest/bin/jest.js'),
    '--json',
    `--outputFile=${resultsFile}`,
    ...args,
    // Last: jest takes every argument after --selectProjects for a project name.
    ...(tiers.length ? ['--selectProjects', ...tiers] : ['--ignoreProjects', 'images']),
  ],
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
  reportTimings(results.testResults);
} catch {
  failed = Math.max(failed, 1);
}
const status = jest.status ?? 1;
if (status !== 0 && failed === 0) failed = 1;
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(status);

/** Prints the slowest files and writes every file's time (seconds, tier, status, path) to timingsFile. */
function reportTimings(suites) {
  const rows = suites
    .map((suite) => {
      const file = relative(root, suite.name);
      // A file that failed to load has no start time.
      const seconds = suite.startTime ? (suite.endTime - suite.startTime) / 1000 : 0;
      return { file, tier: tierOf.get(file) ?? '?', status: suite.status, seconds };
    })
    .sort((a, b) => b.seconds - a.seconds);
  if (!rows.length) return;
  writeFileSync(
    timingsFile,
    ['seconds\ttier\tstatus\tfile', ...rows.map((r) => `${r.seconds.toFixed(1)}\t${r.tier}\t${r.status}\t${r.file}`)].join('\n') + '\n',
  );
  const total = rows.reduce((sum, r) => sum + r.seconds, 0);
  console.log(`\nSlowest test files (of ${rows.length}, ${total.toFixed(0)} s in all; every file in ${relative(root, timingsFile)}):`);
  for (const r of rows.slice(0, 15)) console.log(`${r.seconds.toFixed(1).padStart(8)} s  ${r.tier.padEnd(11)} ${r.file}`);
}
