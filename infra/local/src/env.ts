/**
 * The only reader of process.env in `@berth/local-stack`: the servers it starts run in this
 * process's environment (PATH, locale, proxies), which is theirs to inherit, not settings of ours.
 */

/** A copy of this process's environment, for a child process (add what is its own). */
export function inheritedEnv(): NodeJS.ProcessEnv {
  return { ...process.env };
}

/** The folders of this process's PATH, where binaries are looked up. */
export function searchPath(): string[] {
  return (process.env.PATH ?? '/usr/bin:/bin').split(':');
}
