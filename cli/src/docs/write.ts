/**
 * `make docs`: rewrites the generated pages of docs/reference (see pages.ts).
 * Run as `node --conditions=berth-source --import tsx cli/src/docs/write.ts`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, generatedPages } from './pages.js';

for (const [path, text] of Object.entries(generatedPages())) {
  writeFileSync(join(REPO_ROOT, path), text);
  console.log(`wrote ${path}`);
}
