/**
 * The behavioural contract of a sandbox driver: every adapter runs these jest blocks against a real
 * (or, for Kubernetes, the in-repo fake) backend — `driverContract('container', …)` in the
 * adapter's test file. What a backend cannot play is switched off by a capability flag, so a
 * skipped block says what is not covered.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { ImagePullError, InstanceNotFoundError, SandboxFileError, type ExitInfo, type ImageSource, type InstanceSpec, type SandboxDriver } from './driver.js';

export interface ContractSetup {
  driver: SandboxDriver;
  /** A busybox-like image (sh, echo, cat, ps, ls, sleep, dd, hostname) in a registry. */
  image: ImageSource;
  /** A reference in the same registry that does not exist. */
  missingImage: ImageSource;
  /** Called after the suite (after the driver is closed). */
  cleanup?(): Promise<void>;
}

export interface DriverCapabilities {
  /** Memory limits are enforced and an OOM kill is reported (`oomKilled`). */
  memoryLimit: boolean;
  /** Instances are real isolated processes (host processes, files, hostname, network checks). */
  isolation: boolean;
  /** stop/start keeps the instance's files. */
  stopStart: boolean;
}

export interface RunResult {
  stdout: string;
  stderr: string;
  exit: ExitInfo;
}

/** Runs a command to its end, collecting its output. */
export async function runIn(
  driver: SandboxDriver,
  instance: string,
  command: string,
  options: { env?: Record<string, string>; cwd?: string; shell?: string } = {},
): Promise<RunResult> {
  const running = await driver.exec(instance, {
    command,
    shell: options.shell ?? '/bin/sh',
    env: options.env ?? {},
    ...(options.cwd ? { cwd: options.cwd } : {}),
  });
  const out: Record<'stdout' | 'stderr', Buffer[]> = { stdout: [], stderr: [] };
  running.onOutput((stream, chunk) => out[stream].push(chunk));
  const exit = await running.exited;
  return { stdout: Buffer.concat(out.stdout).toString('utf8'), stderr: Buffer.concat(out.stderr).toString('utf8'), exit };
}

/** An instance name of the `berth-sbx-` family, unique per call. */
export function contractInstanceName(): string {
  return `berth-sbx-${randomBytes(6).toString('hex')}`;
}

export function contractSpec(image: ImageSource, overrides: Partial<InstanceSpec> = {}): InstanceSpec {
  return {
    instance: contractInstanceName(),
    tenantId: 'contract-tenant',
    image,
    resources: { memoryBytes: 64 * 1024 * 1024, cpuMillis: 500 },
    volumes: [],
    egress: { rules: [], allowList: [], denyList: [], privateAllow: [] },
    env: { CONTRACT_ENV: 'from-spec' },
    labels: { 'berth.dev/contract': 'yes' },
    ...overrides,
  };
}

export function driverContract(name: string, makeDriver: () => Promise<ContractSetup>, capabilities: DriverCapabilities): void {
  describe(`sandbox driver contract: ${name}`, () => {
    let setup: ContractSetup;
    let driver: SandboxDriver;
    let spec: InstanceSpec;
    const made: string[] = [];
    const run = (command: string, options?: Parameters<typeof runIn>[3]) => runIn(driver, spec.instance, command, options);

    beforeAll(async () => {
      setup = await makeDriver();
      driver = setup.driver;
      await driver.pullImage(setup.image);
      spec = contractSpec(setup.image);
      made.push(spec.instance);
      await driver.create(spec);
    }, 120_000);

    afterAll(async () => {
      if (!setup) return;
      await Promise.all(made.map((instance) => driver.remove(instance)));
      await driver.close();
      await setup.cleanup?.();
    }, 60_000);

    it('a created instance is running and runs commands with its environment', async () => {
      expect(await driver.inspect(spec.instance)).toEqual({ state: 'running' });
      const result = await run('echo "$CONTRACT_ENV $EXTRA"', { env: { EXTRA: 'from-exec' } });
      expect(result).toMatchObject({ stdout: 'from-spec from-exec\n', stderr: '', exit: { exitCode: 0, oomKilled: false } });
      expect(await driver.list()).toContain(spec.instance);
    });

    it('separates stdout from stderr and reports exit codes', async () => {
      const result = await run('echo out; echo err >&2; exit 3');
      expect(result.stdout).toBe('out\n');
      expect(result.stderr).toBe('err\n');
      expect(result.exit).toEqual({ exitCode: 3, oomKilled: false });
    });

    it('runs in the given working directory, and falls back to /bin/sh for a shell the image lacks', async () => {
      const result = await run('pwd', { cwd: '/tmp', shell: '/no/such/shell' });
      expect(result.stdout).toBe('/tmp\n');
    });

    it('feeds stdin', async () => {
      const cat = await driver.exec(spec.instance, { command: 'cat', shell: '/bin/sh', env: {} });
      const chunks: Buffer[] = [];
      cat.onOutput((_stream, chunk) => chunks.push(chunk));
      cat.write(Buffer.from('hello\n'));
      cat.closeStdin();
      expect((await cat.exited).exitCode).toBe(0);
      expect(Buffer.concat(chunks).toString()).toBe('hello\n');
    });

    it('kill ends a command and the processes it started', async () => {
      const sleeper = await driver.exec(spec.instance, { command: 'sleep 1001 & sleep 1002', shell: '/bin/sh', env: {} });
      // Let the shell start both.
      await new Promise((resolve) => setTimeout(resolve, 200));
      sleeper.kill();
      expect(await sleeper.exited).toEqual({ exitCode: 137, signal: 'SIGKILL', oomKilled: false });
      const left = await run('ps');
      expect(left.stdout).not.toMatch(/sleep 100[12]/);
    });

    (capabilities.memoryLimit ? it : it.skip)('a memory hog is killed (137, out of memory) and the instance keeps working', async () => {
      // dd allocates its whole block: 256 MiB against a 64 MiB limit.
      const hog = await run('dd if=/dev/zero of=/dev/null bs=256M count=1');
      expect(hog.exit).toMatchObject({ exitCode: 137, oomKilled: true });
      expect((await run('echo alive')).stdout).toBe('alive\n');
      expect(await driver.inspect(spec.instance)).toEqual({ state: 'running' });
    });

    it('files round-trip byte for byte, parents created', async () => {
      const data = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(300_000)]);
      await driver.writeFile(spec.instance, '/tmp/contract/deep/data.bin', data);
      expect((await driver.readFile(spec.instance, '/tmp/contract/deep/data.bin')).equals(data)).toBe(true);
      expect((await run('wc -c < /tmp/contract/deep/data.bin')).stdout.trim()).toBe(String(data.length));
      await driver.writeFile(spec.instance, '/tmp/contract/deep/data.bin', Buffer.from('replaced'));
      expect((await driver.readFile(spec.instance, '/tmp/contract/deep/data.bin')).toString()).toBe('replaced');
    });

    it('reading a missing file is a not_found SandboxFileError', async () => {
      const error = await driver.readFile(spec.instance, '/no/such/file').catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(SandboxFileError);
      expect((error as SandboxFileError).kind).toBe('not_found');
    });

    describe('isolation', () => {
      const maybe = capabilities.isolation ? it : it.skip;

      maybe('host processes are invisible', async () => {
        const ps = await run('ps');
        expect(ps.exit.exitCode).toBe(0);
        expect(ps.stdout).not.toMatch(/node|jest|postgres|redis|podman|conmon/);
        // The agent, the shell and ps: nothing else.
        expect(ps.stdout.trim().split('\n').length).toBeLessThanOrEqual(6);
      });

      maybe('host files are invisible', async () => {
        const here = fileURLToPath(new URL('.', import.meta.url));
        const result = await run(`ls /; test -e ${JSON.stringify(here)} && echo HOST-FILES; test -e /var/run/secrets && echo SECRETS; true`);
        expect(result.stdout).not.toMatch(/HOST-FILES|SECRETS/);
        expect(result.stdout.split('\n')).not.toContain('work');
      });

      maybe("the hostname is not the host's", async () => {
        const result = await run('hostname');
        expect(result.stdout.trim()).not.toBe(hostname());
        expect(result.stdout.trim()).not.toBe('');
      });

      maybe('the only network interface is loopback', async () => {
        const result = await run('cat /proc/net/dev');
        const interfaces = result.stdout
          .split('\n')
          .slice(2)
          .filter(Boolean)
          .map((line) => line.split(':')[0]!.trim());
        expect(interfaces).toEqual(['lo']);
      });
    });

    (capabilities.stopStart ? it : it.skip)('stop and start keep the files', async () => {
      const other = contractSpec(setup.image);
      made.push(other.instance);
      await driver.create(other);
      await driver.writeFile(other.instance, '/root-file.txt', Buffer.from('kept'));
      await driver.stop(other.instance);
      expect(await driver.inspect(other.instance)).toEqual({ state: 'stopped' });
      await driver.start(other.instance, other);
      expect(await driver.inspect(other.instance)).toEqual({ state: 'running' });
      expect((await driver.readFile(other.instance, '/root-file.txt')).toString()).toBe('kept');
    });

    it('a removed instance is missing, cannot be claimed and runs nothing', async () => {
      const other = contractSpec(setup.image);
      await driver.create(other);
      expect(await driver.claim(other.instance, 'sandbox-a')).toBe(true);
      expect(await driver.claim(other.instance, 'sandbox-b')).toBe(false);
      await driver.remove(other.instance);
      await driver.remove(other.instance);
      expect(await driver.inspect(other.instance)).toEqual({ state: 'missing' });
      expect(await driver.claim(other.instance, 'sandbox-c')).toBe(false);
      expect(await driver.list()).not.toContain(other.instance);
      await expect(runIn(driver, other.instance, 'true')).rejects.toBeInstanceOf(InstanceNotFoundError);
    });

    it('pulling an image that does not exist is an ImagePullError naming it', async () => {
      const error = await driver.pullImage(setup.missingImage).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(ImagePullError);
      expect((error as Error).message).toContain(setup.missingImage.reference);
      expect((error as Error).message).toMatch(/does not exist/);
    });
  });
}
