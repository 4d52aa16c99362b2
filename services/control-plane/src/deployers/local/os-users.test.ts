/**
 * Local agent servers of different deployments run as different OS users: each reads its own
 * build, writes only its own home, and reaches neither the platform's secret files nor another
 * deployment's. (The machines that run these tests run them as root, as `berth up` does there.)
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { testEnv } from '@berth/testing';
import { asUser } from '../../__tests__/as-user.js';
import { detectIsolation, OsUsers } from './os-users.js';

let root: string;
let users: OsUsers;
const a = randomUUID();
const b = randomUUID();

beforeAll(async () => {
  // Under the test run's folder, which others may traverse (as a Berth installation must be).
  root = await mkdtemp(join(testEnv('tmpDir'), 'os-users-'));
  await chmod(root, 0o755);
  users = new OsUsers({ homesDir: join(root, 'agents'), artifactsDir: join(root, 'artifacts') });
  for (const id of [a, b]) {
    await mkdir(join(root, 'artifacts', id, 'rev'), { recursive: true });
    await writeFile(join(root, 'artifacts', id, 'rev', 'graph.js'), `// ${id}`);
  }
  await writeFile(join(root, 'secret-key'), 'platform secret', { mode: 0o600 });
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('OS users of local agent servers', () => {
  it('isolates when the platform runs as root and the runtime is readable', async () => {
    expect(process.getuid?.()).toBe(0);
    expect(await detectIsolation([process.execPath], join(root, 'state'))).toEqual({ kind: 'os-user' });
    const hidden = await mkdtemp(join(root, 'private-'));
    await writeFile(join(hidden, 'serve.js'), '');
    // mkdtemp makes 0700 folders: a runtime inside one cannot be loaded by another user.
    expect(await detectIsolation([join(hidden, 'serve.js')])).toEqual({ kind: 'none', reason: expect.stringContaining(hidden) });
    // A state folder inside a private folder: agents could not reach their builds.
    expect(await detectIsolation([process.execPath], join(hidden, 'state', '.berth'))).toEqual({ kind: 'none', reason: expect.stringContaining(hidden) });
  });

  it('gives each deployment its own stable user and private home', async () => {
    const ua = await users.userFor(a);
    const ub = await users.userFor(b);
    expect(ua.uid).toBeGreaterThanOrEqual(1_500_000);
    expect(ub.uid).not.toBe(ua.uid);
    expect(await users.userFor(a)).toEqual(ua);
    await users.grantArtifacts(a, ua);
    await users.grantArtifacts(b, ub);

    expect(asUser(ua, `require('fs').readFileSync(${JSON.stringify(join(root, 'artifacts', a, 'rev', 'graph.js'))})`)).toBe('ok');
    expect(asUser(ua, `require('fs').writeFileSync(${JSON.stringify(join(ua.home, 'notes'))}, 'x')`)).toBe('ok');
    // Not its own build's files, not another deployment's anything, not the platform's secrets.
    expect(asUser(ua, `require('fs').writeFileSync(${JSON.stringify(join(root, 'artifacts', a, 'rev', 'graph.js'))}, 'x')`)).toBe('EACCES');
    expect(asUser(ua, `require('fs').readFileSync(${JSON.stringify(join(root, 'artifacts', b, 'rev', 'graph.js'))})`)).toBe('EACCES');
    expect(asUser(ua, `require('fs').readdirSync(${JSON.stringify(ub.home)})`)).toBe('EACCES');
    expect(asUser(ua, `require('fs').readdirSync(${JSON.stringify(join(root, 'agents'))})`)).toBe('EACCES');
    expect(asUser(ua, `require('fs').readFileSync(${JSON.stringify(join(root, 'secret-key'))})`)).toBe('EACCES');
    expect(asUser(ua, `process.setuid(0)`)).toBe('EPERM');
  });

  it('keeps ids claimed after a deployment is removed', async () => {
    const before = await users.userFor(a);
    await users.remove(a);
    const again = await users.userFor(a);
    const other = await users.userFor(randomUUID());
    expect(again.uid).not.toBe(before.uid);
    expect(other.uid).not.toBe(before.uid);
  });
});
