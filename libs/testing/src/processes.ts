/**
 * The processes that use a folder: its path is in their command line or environment, or it holds
 * their working directory. How a test finds what a command left running (a Postgres, an engine, a
 * server) under a state folder of its own, whoever started it and whatever it is called.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { processAlive } from '@berth/local-stack';

export interface FoundProcess {
  pid: number;
  /** Its command line, arguments separated by spaces. */
  command: string;
}

/** Synchronous on purpose: /proc reads are cheap, and a test watching for a phase of a start must look often. */
export async function processesUsing(paths: string[]): Promise<FoundProcess[]> {
  // Gone meanwhile, or not ours to read: nothing to say about it.
  const read = (pid: number, file: string) => {
    try {
      return readFileSync(`/proc/${pid}/${file}`, 'utf8');
    } catch {
      return '';
    }
  };
  const found: FoundProcess[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    // A zombie has run its course (its parent only has not looked yet).
    if (!processAlive(pid)) continue;
    const cmdline = read(pid, 'cmdline');
    let cwd = '';
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      // Not ours to read.
    }
    const inPlace = (path: string) => cmdline.includes(path) || cwd === path || cwd.startsWith(`${path}/`);
    const environ = paths.some(inPlace) ? '' : read(pid, 'environ');
    if (paths.some((path) => inPlace(path) || environ.includes(path))) {
      found.push({ pid, command: cmdline.split('\0').join(' ').trim() });
    }
  }
  return found;
}
