#!/usr/bin/env node
// Builds berth-sandboxd (the in-sandbox agent) into dist/agent/, only when the source is newer.
// A static binary: it is bind-mounted into images that may have no libc at all (busybox, distroless).
import { spawnSync } from 'node:child_process';
import { mkdirSync, renameSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('./sandboxd.c', import.meta.url));
const output = fileURLToPath(new URL('../dist/agent/berth-sandboxd', import.meta.url));

function mtime(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return -1;
  }
}

if (mtime(output) >= mtime(source) && mtime(output) >= mtime(fileURLToPath(import.meta.url))) process.exit(0);

const cc = process.env.CC ?? 'gcc';
if (spawnSync(cc, ['--version'], { stdio: 'ignore' }).error) {
  // Not fatal: the rest of the platform builds and runs; the container driver then says sandboxes
  // are off because the agent is missing (and how to get it).
  console.warn(
    `berth-sandboxd: the C compiler "${cc}" was not found, so the sandbox agent is not built and sandboxes stay off.\n` +
      'Install it with: apt-get install gcc libc6-dev (static glibc is part of libc6-dev), then build again',
  );
  process.exit(0);
}
mkdirSync(fileURLToPath(new URL('../dist/agent/', import.meta.url)), { recursive: true });
// Build next to the target and rename: a running sandbox may have the old binary mounted.
const temporary = `${output}.${process.pid}.tmp`;
const result = spawnSync(cc, ['-static', '-O2', '-Wall', '-Wextra', '-Werror', '-o', temporary, source], { stdio: 'inherit' });
if (result.status !== 0) {
  console.error(`berth-sandboxd: ${cc} failed to build ${source}` + (result.error ? `: ${result.error.message}` : ''));
  process.exit(1);
}
renameSync(temporary, output);
