/**
 * The generated pages of docs/reference: `make docs` writes them (write.ts), and docs.test.ts fails
 * while one differs from what the code, the env schemas or the chart say now.
 */
import { fileURLToPath } from 'node:url';
import { cliPage } from './commands.js';
import { helmPage } from './helm.js';
import { restPage } from './rest.js';
import { settingsPage } from './settings.js';

/** The checkout this file is in (cli/src/docs or cli/dist/docs, three levels down). */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Each generated page, by its path from the repository root. */
export function generatedPages(root = REPO_ROOT): Record<string, string> {
  return {
    'docs/reference/rest.md': restPage(),
    'docs/reference/cli.md': cliPage(),
    'docs/reference/settings.md': settingsPage(root),
    'docs/reference/helm-values.md': helmPage(root),
  };
}
