/**
 * Local agent servers of different deployments run as different OS users: each reads its own
 * build, writes only its own home, and reaches neither the platform's secret files nor another
 * deployment's; two installations on one machine never hand out the same id. (The machines that
 * run these tests run them as root, as `berth up` does there.)
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
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
  // The host-wide registry of this test's own (not the machine's /var/lib/berth/uids).
  users = new OsUsers({ homesDir: join(root, 'agents'), artifactsDir: join(root, 'artifacts'), registryDir: join(root, 'uids') });
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

  it('never gives deployments of two installations on one machine the same id', async () => {
    const registryDir = join(root, 'shared-uids');
    const installation = (name: string) => new OsUsers({ homesDir: join(root, name, 'agents'), artifactsDir: join(root, name, 'artifacts'), registryDir });
    const [first, second] = [installation('first'), installation('second')];
    const uids: number[] = [];
    // Interleaved, as two platforms deploying at the same time would.
    for (let i = 0; i < 3; i += 1) {
      uids.push((await first.userFor(randomUUID())).uid, (await second.userFor(randomUUID())).uid);
    }
    expect(new Set(uids).size).toBe(6);
  });

  it('keeps an id an installation claimed before the registry, unless another installation holds it', async () => {
    const registryDir = join(root, 'upgraded-uids');
    const [older, newer] = ['older', 'newer'].map(
      (name) => new OsUsers({ homesDir: join(root, name, 'agents'), artifactsDir: join(root, name, 'artifacts'), registryDir }),
    );
    // Both made a home owned by 1 500 000 when each counted ids from there on its own.
    const [a, b] = [randomUUID(), randomUUID()];
    for (const [name, id] of [
      ['older', a],
      ['newer', b],
    ] as const) {
      await mkdir(join(root, name, 'agents', id), { recursive: true });
      await chown(join(root, name, 'agents', id), 1_500_000, 1_500_000);
    }
    expect((await older!.userFor(a)).uid).toBe(1_500_000);
    const moved = await newer!.userFor(b);
    expect(moved.uid).not.toBe(1_500_000);
    expect((await newer!.userFor(b)).uid).toBe(moved.uid);
  });
});
