#!/usr/bin/env node
// The `berth` command. A committed launcher (not dist/bin.js itself) so that `npm ci` links it
// into node_modules/.bin before the first build has produced dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const built = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
if (!existsSync(built)) {
  console.error('berth: not built yet: run `make build` (or `make up`) in the repository first');
  process.exit(1);
}
await import(built);
