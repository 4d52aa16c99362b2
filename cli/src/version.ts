import { readFileSync } from 'node:fs';

/** Berth packages are versioned together; the CLI's version is the platform's. */
export const BERTH_VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
