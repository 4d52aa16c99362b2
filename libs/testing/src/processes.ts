/**
 * The processes that use a folder: its path is in their command line or environment, or it holds
 * their working directory. How a test finds what a command left running (a Postgres, an engine, a
 * server) under a state folder of its own, whoever started it and whatever it is called.
 */
import { readdir, readFile, readlink } from 'node:fs/promises';

export interface FoundProcess {
  pid: number;
  /** Its command line, arguments separated by spaces. */
  command: string;
}

export async function processesUsing(paths: string[]): Promise<FoundProcess[]> {
  const found: FoundProcess[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    // Gone meanwhile, or not ours to read: nothing to say about it.
    const read = (file: string) => readFile(`/proc/${pid}/${file}`, 'utf8').catch(() => '');
    const [cmdline, environ, cwd, stat] = await Promise.all([read('cmdline'), read('environ'), readlink(`/proc/${pid}/cwd`).catch(() => ''), read('stat')]);
    // A zombie has run its course (its parent only has not looked yet).
    if (!stat || stat[stat.lastIndexOf(')') + 2] === 'Z') continue;
    const uses = (path: string) => cmdline.includes(path) || environ.includes(path) || cwd === path || cwd.startsWith(`${path}/`);
    if (paths.some(uses)) found.push({ pid, command: cmdline.split('\0').join(' ').trim() });
  }
  return found;
}
