import { existsSync, readFileSync } from 'node:fs';

const hasProc = existsSync('/proc/self/stat');

/**
 * True while a process with this pid runs: it exists (ours or another user's, as the `postgres`
 * user's postmaster is) and is not a zombie that nobody reaped yet.
 */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // Without /proc (not Linux), kill() is all there is to go by.
  if (!hasProc) return true;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  // `pid (comm) S …`: the state follows the last `)` (comm may hold any character).
  return stat[stat.lastIndexOf(')') + 2] !== 'Z';
}
