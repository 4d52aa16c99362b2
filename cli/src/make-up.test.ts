/**
 * `make up` says what it does as it goes: the first run installs and builds for minutes. The
 * checkout's Makefile runs in a scratch folder with stand-ins for npm, turbo, the sandbox tools'
 * installer and berth, which print what a real one prints (turbo: lines as turbo 2 writes them).
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const makefile = fileURLToPath(new URL('../../Makefile', import.meta.url));
let dir: string;

/** A stand-in command: prints its name and arguments, then `body` (bash). */
async function standIn(name: string, body = ''): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, `#!/usr/bin/env bash\necho "${name} $*"\n${body}\n`);
  await chmod(file, 0o755);
  return file;
}

/** Runs `make up` with the stand-ins; `turbo` is the build's stand-in. */
async function makeUp(turbo: string): Promise<{ code: number; lines: string[] }> {
  const overrides = [
    `NPM=${await standIn('npm', 'mkdir -p node_modules')}`,
    `TURBO=${turbo}`,
    `ENSURE_PODMAN=${await standIn('ensure-podman')}`,
    `BERTH=${await standIn('berth')}`,
  ];
  return new Promise((resolve) =>
    execFile('make', ['--no-print-directory', '-f', makefile, '-C', dir, 'up', ...overrides], { timeout: 30_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, lines: `${stdout}${stderr}`.split('\n').filter((l) => l.trim() !== '') }),
    ),
  );
}

/** Turbo's output for one package built now and one built before, then `exit`. */
const turboBuild = (exit: number) =>
  standIn(
    'turbo',
    [
      "echo '@berth/ids:build: cache hit, suppressing logs 1111111111111111'",
      "echo '@berth/cli:build: cache miss, executing 5be3306297568a75'",
      "echo '@berth/cli:build: '",
      "echo '@berth/cli:build: > @berth/cli@0.1.0 build'",
      "echo '@berth/cli:build: > tsc -b && chmod +x dist/bin.js'",
      ...(exit ? ['echo "@berth/cli:build: src/index.ts(3,1): error TS2304: Cannot find name \'x\'."'] : []),
      "echo ' Tasks:    2 successful, 2 total'",
      `exit ${exit}`,
    ].join('\n'),
  );

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-make-up-'));
  await writeFile(join(dir, 'package-lock.json'), '{}\n');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

it('prints a line before each step, and turbo’s progress as a line per package it builds', async () => {
  const first = await makeUp(await turboBuild(0));
  expect(first.code).toBe(0);
  expect(first.lines).toEqual([
    '==> Checking the sandbox tools (Podman, runc, …; apt-get installs what is missing)',
    'ensure-podman ',
    '==> Installing npm dependencies (npm ci; about a minute the first time)',
    `${join(dir, 'npm')} ci --no-fund --no-audit`,
    'npm ci --no-fund --no-audit',
    '==> Building the packages (turbo; about two minutes the first time)',
    'turbo run build --output-logs=new-only',
    '   building @berth/cli',
    ' Tasks:    2 successful, 2 total',
    '==> Starting Berth: Postgres, the sandbox engine, the platform…',
    'berth up',
  ]);

  // Installed already: no install step the next time.
  const past = new Date(Date.now() - 60_000);
  await utimes(join(dir, 'package-lock.json'), past, past);
  const second = await makeUp(await turboBuild(0));
  expect(second.lines.filter((l) => l.startsWith('==>'))).toEqual([
    '==> Checking the sandbox tools (Podman, runc, …; apt-get installs what is missing)',
    '==> Building the packages (turbo; about two minutes the first time)',
    '==> Starting Berth: Postgres, the sandbox engine, the platform…',
  ]);
});

it('shows a failed build’s errors and stops there', async () => {
  const failed = await makeUp(await turboBuild(2));
  expect(failed.code).not.toBe(0);
  expect(failed.lines).toContain("@berth/cli:build: src/index.ts(3,1): error TS2304: Cannot find name 'x'.");
  expect(failed.lines.some((l) => l.includes('Starting Berth') || l === 'berth up')).toBe(false);
});
