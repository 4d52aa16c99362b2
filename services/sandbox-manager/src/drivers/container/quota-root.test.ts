/**
 * A sandbox with a storage limit has a root file system of that size (quota-root.ts): `df` inside
 * shows the limit, writes past it fail, and its mounts and loop devices exist only while it runs.
 * Against the private Podman engine of the test run, on btrfs storage (the only one with limits).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { captureLogger, testSandbox, until } from '@berth/testing';
import { contractSpec, runIn } from '../contract.js';
import { ContainerDriver } from './container-driver.js';

const sandbox = testSandbox();
const image = { reference: sandbox.image, insecureRegistries: [sandbox.registry] };
const LIMIT = 64 * 1024 * 1024;

function makeDriver(runDir: string): ContainerDriver {
  return new ContainerDriver({ socketPath: sandbox.socketPath, runDir, logger: captureLogger('quota-root').logger });
}

/** What of the instance's root the host holds: its overlay mount and the loop device of its image. */
async function hostHolds(instance: string): Promise<{ mounts: number; loops: number }> {
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
  const mounts = mountinfo.split('\n').filter((line) => line.includes(`/${instance}.`)).length;
  let loops = 0;
  for (const device of (await readdir('/sys/block')).filter((name) => name.startsWith('loop'))) {
    const backing = await readFile(`/sys/block/${device}/loop/backing_file`, 'utf8').catch(() => '');
    if (backing.includes(`/${instance}.`)) loops++;
  }
  return { mounts, loops };
}

async function dfTotalKiB(driver: ContainerDriver, instance: string): Promise<number> {
  const result = await runIn(driver, instance, 'df -k / | tail -n 1');
  expect(result.exit.exitCode).toBe(0);
  return Number(result.stdout.trim().split(/\s+/)[1]);
}

describe('a sandbox with a storage limit', () => {
  let driver: ContainerDriver;
  let runDir: string;
  const made: string[] = [];
  const create = async (on = driver) => {
    const spec = contractSpec(image, { resources: { memoryBytes: 64 * 1024 * 1024, storageBytes: LIMIT } });
    made.push(spec.instance);
    await on.create(spec);
    return spec;
  };

  beforeAll(async () => {
    runDir = await mkdtemp(join(sandbox.tmpDir, 'run-'));
    driver = makeDriver(runDir);
    await driver.pullImage(image);
  });

  afterAll(async () => {
    await Promise.all(made.map((instance) => driver.remove(instance)));
    await driver.close();
  });

  it('sees its limit as the size of / in df, and cannot write past it', async () => {
    const spec = await create();
    const total = await dfTotalKiB(driver, spec.instance);
    // ext4's own tables take a little of it.
    expect(total).toBeLessThanOrEqual(LIMIT / 1024);
    expect(total).toBeGreaterThan((LIMIT / 1024) * 0.95); // less the inode tables
    // Room for a file per 8 KiB of the limit (a node_modules of small files), as df -i says.
    const inodes = await runIn(driver, spec.instance, 'df -i / | tail -n 1');
    expect(Number(inodes.stdout.trim().split(/\s+/)[1])).toBeGreaterThanOrEqual(LIMIT / 8192);
    const result = await runIn(driver, spec.instance, 'dd if=/dev/zero of=/big bs=1M count=80');
    expect(result.exit.exitCode).not.toBe(0);
    expect(result.stderr).toMatch(/no space/i);
  });

  it('keeps its files over a stop and a start by a restarted manager, and leaves no mount or loop device once stopped or removed', async () => {
    const spec = await create();
    expect(await runIn(driver, spec.instance, 'echo kept > /etc/kept').then((r) => r.exit.exitCode)).toBe(0);
    expect(await hostHolds(spec.instance)).toEqual({ mounts: 1, loops: 1 });
    await driver.stop(spec.instance);
    // The loop device lets go of its image asynchronously after the unmount.
    await until('the loop device of a stopped sandbox to go', async () => (await hostHolds(spec.instance)).loops === 0);
    expect(await hostHolds(spec.instance)).toEqual({ mounts: 0, loops: 0 });

    const restarted = makeDriver(runDir);
    await restarted.start(spec.instance, spec);
    expect((await runIn(restarted, spec.instance, 'cat /etc/kept')).stdout).toBe('kept\n');
    expect(await dfTotalKiB(restarted, spec.instance)).toBeLessThanOrEqual(LIMIT / 1024);
    await restarted.remove(spec.instance);
    await until('the loop device of a removed sandbox to go', async () => (await hostHolds(spec.instance)).loops === 0);
    expect(await hostHolds(spec.instance)).toEqual({ mounts: 0, loops: 0 });
    await restarted.close();
  });

  it("neither sees another sandbox's files nor shares its space", async () => {
    const [one, other] = await Promise.all([create(), create()]);
    await runIn(driver, one.instance, 'echo mine > /root/secret; dd if=/dev/zero of=/fill bs=1M count=40');
    const seen = await runIn(driver, other.instance, 'cat /root/secret; ls /fill');
    expect(seen.stdout).toBe('');
    expect(seen.exit.exitCode).not.toBe(0);
    const free = await runIn(driver, other.instance, "df -k / | tail -n 1 | awk '{print $4}'");
    expect(Number(free.stdout.trim())).toBeGreaterThan((LIMIT / 1024) * 0.9);
  });
});
