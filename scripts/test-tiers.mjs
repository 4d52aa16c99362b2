// The test tiers of test-tiers.mjs, checked against the test files on disk: jest.config.mjs builds
// one jest project per tier from them, and run-tests.mjs names each file's tier in its timings.
// `node scripts/test-tiers.mjs` prints how many files each tier holds (or what is wrong).
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import manifest from '../test-tiers.mjs';

const root = new URL('..', import.meta.url).pathname;
const TEST_FILE = /\.test\.[cm]?[jt]sx?$/;
// Build output, dependencies and state: never a test of ours.
const SKIP = new Set(['node_modules', 'dist', '.git', '.berth', '.turbo']);

export class TestTierError extends Error {
  name = 'TestTierError';
}

/** Every test file under the repository, relative to it. */
export function findTestFiles(dir = root) {
  const found = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...findTestFiles(path));
    else if (TEST_FILE.test(entry.name)) found.push(relative(root, path));
  }
  return found;
}

/**
 * The tiers, each with its files.
 * @throws TestTierError listing every test file in no tier or in two, and every listed file that does not exist
 */
export function readTiers() {
  const tierOf = new Map();
  const problems = [];
  for (const [tier, files] of Object.entries(manifest)) {
    for (const file of files) {
      if (tierOf.has(file)) problems.push(`${file} is in two tiers (${tierOf.get(file)} and ${tier}): keep one`);
      else tierOf.set(file, tier);
    }
  }
  const onDisk = new Set(findTestFiles());
  for (const file of onDisk) {
    if (!tierOf.has(file)) problems.push(`${file} is in no tier: add it to one in test-tiers.mjs (${Object.keys(manifest).join(', ')})`);
  }
  for (const file of tierOf.keys()) {
    if (!onDisk.has(file)) problems.push(`${file} is listed in test-tiers.mjs but does not exist: remove it there`);
  }
  if (problems.length) {
    throw new TestTierError(`test-tiers.mjs does not match the test files (docs/contribute/testing.md):\n  ${problems.join('\n  ')}`);
  }
  return manifest;
}

/** The tier of each test file (relative path → tier). */
export function tierOfFile() {
  return new Map(Object.entries(readTiers()).flatMap(([tier, files]) => files.map((file) => [file, tier])));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  try {
    for (const [tier, files] of Object.entries(readTiers())) console.log(`${tier.padEnd(12)} ${files.length} files`);
  } catch (error) {
    console.error(error instanceof TestTierError ? error.message : error);
    process.exit(1);
  }
}
