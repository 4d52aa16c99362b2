/** Running a snippet of Node.js as another OS user, for tests of what that user may do. */
import { spawnSync } from 'node:child_process';
import type { DeploymentUser } from '../deployers/local/os-users.js';

/** What `code` (run by node as `user`, in its home) prints: 'ok' or the error code it met. */
export function asUser(user: DeploymentUser, code: string): string {
  const out = spawnSync(process.execPath, ['-e', `try { ${code}; console.log('ok') } catch (e) { console.log(e.code ?? e.message) }`], {
    uid: user.uid,
    gid: user.gid,
    env: { HOME: user.home, PATH: process.env.PATH ?? '/usr/bin:/bin' },
    cwd: user.home,
    encoding: 'utf8',
  });
  return out.stdout.trim() || out.stderr.trim();
}
