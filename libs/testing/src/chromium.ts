import { existsSync } from 'node:fs';

/** Where Debian's Chromium is (`make test-tools` installs it); never a downloaded browser. */
const CHROMIUM_PATHS = ['/usr/bin/chromium', '/usr/local/bin/chromium'];

export function chromiumPath(): string | undefined {
  return CHROMIUM_PATHS.find((path) => existsSync(path));
}

/** Why the browser tests cannot start Chromium, or undefined when they can. */
export function chromiumUnavailableReason(): string | undefined {
  return chromiumPath() ? undefined : `Chromium not found at ${CHROMIUM_PATHS.join(' or ')}: run make test-tools`;
}
