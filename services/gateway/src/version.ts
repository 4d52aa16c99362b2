import { readFileSync } from 'node:fs';

/** The platform version, from the gateway's package.json. */
export const BERTH_VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
