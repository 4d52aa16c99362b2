// Where the built console is (`vite build` writes it; `make build` runs that): the gateway serves it.
import { fileURLToPath } from 'node:url';

export const consoleDir = fileURLToPath(new URL('./dist/', import.meta.url));
