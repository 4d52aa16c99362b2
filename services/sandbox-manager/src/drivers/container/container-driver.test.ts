/**
 * The container driver against the private Podman engine of the test run (jest global setup),
 * with images pulled from the test registries: the driver contract, then what only containers do.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtemp } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import { PodmanService } from '@berth/local-stack';
import { captureLogger, testSandbox, until } from '@berth/testing';
import { contractSpec, driverContract, runIn } from '../contract.js';
import { ImagePullError, InstanceError, type EgressPolicy } from '../driver.js';
import { ContainerDriver, type AuthProxy } from './container-driver.js';

const sandbox = testSandbox();
const image = { reference: sandbox.image, insecureRegistries: [sandbox.registry] };

async function makeDriver(options: { proxy?: AuthProxy; storageQuota?: 'enforce' | 'ignore'; socketPath?: string } = {}) {
  const runDir = await mkdtemp(join(sandbox.tmpDir, 'run-'));
  const logs = captureLogger('container-driver');
  const driver = new ContainerDriver({ socketPath: sandbox.socketPath, runDir, logger: logs.logger, ...options });
  return { driver, runDir, logs };
}

driverContract(
  'container',
  async () => ({
    driver: (await makeDriver()).driver,
    image,
    missingImage: { reference: `${sandbox.registry}/berth-test/no-such-image:1`, insecureRegistries: [sandbox.registry] },
  }),
  { memoryLimit: true, isolation: true, stopStart: true },
);

describe('container driver', () => {
  let driver: ContainerDriver;
  let runDir: string;
  const docker = new Dockerode({ socketPath: sandbox.socketPath });
  const made: string[] = [];
  const create = async (overrides: Parameters<typeof contractSpec>[1] = {}, on = driver) => {
    const spec = contractSpec(image, overrides);
    made.push(spec.instance);
    await on.create(spec);
    return spec;
  };

  beforeAll(async () => {
    ({ driver, runDir } = await makeDriver());
    await driver.pullImage(image);
  });

  afterAll(async () => {
    await Promise.all(made.map((instance) => driver.remove(instance)));
    await driver.close();
  });

  it('creates containers with no network, dropped capabilities, limits and only the agent and its own folders mounted', async () => {
    const spec = await create({ resources: { memoryBytes: 48 * 1024 * 1024, cpuMillis: 250 } });
    const info = await docker.getContainer(spec.instance).inspect();
    expect(info.HostConfig).toMatchObject({
      NetworkMode: 'none',
      Memory: 48 * 1024 * 1024,
      MemorySwap: 48 * 1024 * 1024,
      NanoCpus: 250_000_000,
      PidsLimit: 1024,
      ReadonlyRootfs: false,
    });
    expect(info.HostConfig.SecurityOpt).toContain('no-new-privileges');
    expect(info.Config.Labels).toMatchObject({
      'berth.dev/sandbox-instance': spec.instance,
      'berth.dev/tenant': 'contract-tenant',
      'berth.dev/contract': 'yes',
    });
    const mounts = info.Mounts.map((mount) => ({ destination: mount.Destination, rw: mount.RW })).sort((a, b) => a.destination.localeCompare(b.destination));
    expect(mounts).toEqual([
      { destination: '/.berth/bin/sandboxd', rw: false },
      { destination: '/.berth/host', rw: false },
      { destination: '/.berth/run', rw: true },
    ]);
    // Root in the sandbox holds only CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID and
    // NET_BIND_SERVICE (bits 0 1 3 4 5 6 7 10), whatever the engine grants by default.
    const caps = await runIn(driver, spec.instance, 'grep -E "Cap(Eff|Bnd)" /proc/self/status');
    expect(caps.stdout).toBe('CapEff:\t00000000000004fb\nCapBnd:\t00000000000004fb\n');
    const env = await runIn(driver, spec.instance, 'echo "$HTTP_PROXY $https_proxy $NO_PROXY"');
    expect(env.stdout).toBe('http://127.0.0.1:3128 http://127.0.0.1:3128 localhost,127.0.0.1,::1\n');
  });

  it("runs as the image's USER in its WORKDIR, with no capabilities at all", async () => {
    const userImage = { reference: sandbox.userImage, insecureRegistries: [sandbox.registry] };
    expect(await driver.pullImage(userImage)).toMatchObject({ user: '1000:1000', workingDir: '/home/user' });
    // Once without the user in the spec (the driver asks the engine), once with it (as the manager sends it).
    for (const image of [userImage, { ...userImage, user: '1000:1000' }]) {
      const spec = await create({ image });
      const result = await runIn(
        driver,
        spec.instance,
        'id -u; pwd; echo x > mine && echo written; grep -E "^Cap(Eff|Amb)" /proc/self/status; touch /etc/nope || echo refused',
      );
      expect(result.stdout).toBe('1000\n/home/user\nwritten\nCapEff:\t0000000000000000\nCapAmb:\t0000000000000000\nrefused\n');
    }
  });

  it('pulls from a registry that needs credentials, says when they are missing or wrong, also once the image is in the engine', async () => {
    const { host, image: reference, username, password } = sandbox.privateRegistry;
    const source = { reference, insecureRegistries: [host] };
    const error = await driver.pullImage(source).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ImagePullError);
    expect((error as Error).message).toBe(`cannot pull ${reference}: the registry needs credentials and none are set (registry ${host})`);
    await expect(driver.pullImage({ ...source, credentials: { server: host, username, password: 'wrong' } })).rejects.toThrow(
      /the registry credentials were refused/,
    );
    const info = await driver.pullImage({ ...source, credentials: { server: host, username, password } });
    expect(info.digest).toMatch(/^sha256:/);
    // Now in the engine's store: someone without the credentials (another tenant) still cannot have it.
    await expect(driver.pullImage(source)).rejects.toThrow(/the registry needs credentials and none are set/);
    await expect(driver.pullImage({ ...source, credentials: { server: host, username, password: 'wrong' } })).rejects.toThrow(
      /the registry credentials were refused/,
    );
  });

  it('says when a registry is unreachable or serves plain HTTP to a TLS pull', async () => {
    await expect(driver.pullImage({ reference: '127.0.0.1:1/berth-test/busybox:1', insecureRegistries: ['127.0.0.1:1'] })).rejects.toThrow(
      /registry 127.0.0.1:1 is unreachable \(.*connection refused\)/,
    );
    await expect(driver.pullImage({ reference: `${sandbox.registry}/berth-test/busybox:never-pulled` })).rejects.toThrow(
      /serves plain HTTP; add it to the image's insecure registries/,
    );
  });

  it('enforces the storage limit', async () => {
    const spec = await create({ resources: { storageBytes: 20 * 1024 * 1024 } });
    const result = await runIn(driver, spec.instance, 'dd if=/dev/zero of=/big bs=1M count=40');
    expect(result.exit.exitCode).not.toBe(0);
    expect(result.stderr).toMatch(/quota|space/i);
  });

  it('named volumes outlive the instance', async () => {
    const volume = `berth-vol-${Date.now().toString(36)}`;
    const first = await create({ volumes: [{ volume, mountPath: '/data' }] });
    await driver.writeFile(first.instance, '/data/kept.txt', Buffer.from('volume data'));
    await driver.remove(first.instance);
    const second = await create({ volumes: [{ volume, mountPath: '/data' }] });
    expect((await driver.readFile(second.instance, '/data/kept.txt')).toString()).toBe('volume data');
    await driver.remove(second.instance);
    await driver.removeVolume(volume);
    await driver.removeVolume(volume);
    await expect(docker.getVolume(volume).inspect()).rejects.toMatchObject({ statusCode: 404 });
  });

  it('stops fast, and an agent that ends by itself is a failed instance with its exit code', async () => {
    const spec = await create();
    await driver.stop(spec.instance);
    // Fast: the agent ended on the engine's SIGTERM (exit 0) instead of being killed (137) when
    // the stop's grace period ran out.
    expect((await docker.getContainer(spec.instance).inspect()).State).toMatchObject({ Running: false, ExitCode: 0 });
    await driver.start(spec.instance, spec);
    // The run folder is the sandbox's to change; markers it plants there mean nothing to the host.
    await runIn(driver, spec.instance, 'touch /.berth/run/stopped /.berth/run/claimed-by');
    expect(await driver.claim(spec.instance, 'sandbox-1')).toBe(true);
    // PID 1 told to go from inside: nobody stopped it.
    const kill = await driver.exec(spec.instance, { command: 'kill -TERM 1', shell: '/bin/sh', env: {} });
    await kill.exited.catch(() => undefined);
    await until('the instance fails', async () => ((await driver.inspect(spec.instance)).state === 'failed' ? true : undefined), 10_000);
    expect(await driver.inspect(spec.instance)).toEqual({ state: 'failed', reason: expect.stringMatching(/^exited with code \d+$/) as unknown });
    await expect(runIn(driver, spec.instance, 'true')).rejects.toThrow(`sandbox ${spec.instance} cannot run commands: exited with code`);
  });

  const FAKE_CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

  it('opens the auth proxy on create and start, closes it on stop and remove, and bridges the sandbox to it', async () => {
    const calls: string[] = [];
    const servers: Server[] = [];
    const proxy: AuthProxy = {
      caCertPem: FAKE_CA_PEM,
      async open(instance: string, socketPath: string, policy: EgressPolicy) {
        calls.push(`open ${instance} ${policy.allowList.join(',')}`);
        const server = createServer((socket) => {
          socket.once('data', (request) => {
            const line = request.toString().split('\r\n')[0];
            socket.end(`HTTP/1.1 200 OK\r\nContent-Length: ${line!.length}\r\nConnection: close\r\n\r\n${line}`);
          });
        });
        servers.push(server);
        await new Promise<void>((resolve) => server.listen(socketPath, resolve));
        return {
          close: async () => {
            calls.push(`close ${instance}`);
            await new Promise((resolve) => server.close(resolve));
          },
        };
      },
    };
    const { driver: withProxy } = await makeDriver({ proxy });
    const spec = contractSpec(image, { egress: { rules: [], allowList: ['example.com'], denyList: [], privateAllow: [] } });
    await withProxy.create(spec);
    try {
      const fetched = await runIn(withProxy, spec.instance, 'wget -q -O - http://example.com/hello');
      expect(fetched.stdout).toBe('GET http://example.com/hello HTTP/1.1');
      // The image has no CA bundle of its own: the bundle is the proxy's CA alone.
      expect((await runIn(withProxy, spec.instance, 'cat "$NODE_EXTRA_CA_CERTS"')).stdout).toBe(FAKE_CA_PEM);
      expect((await runIn(withProxy, spec.instance, 'cat "$SSL_CERT_FILE"')).stdout).toBe(FAKE_CA_PEM);
      await withProxy.stop(spec.instance);
      await withProxy.start(spec.instance, spec);
    } finally {
      await withProxy.remove(spec.instance);
      await withProxy.close();
    }
    const name = spec.instance;
    expect(calls).toEqual([`open ${name} example.com`, `close ${name}`, `open ${name} example.com`, `close ${name}`]);
  });

  it('says sandboxes are off, and how to fix it, when the agent is not built or no engine answers', async () => {
    const noAgent = new ContainerDriver({
      socketPath: sandbox.socketPath,
      runDir: sandbox.tmpDir,
      logger: captureLogger().logger,
      agentBinary: join(sandbox.tmpDir, 'no-agent'),
    });
    expect(await noAgent.unavailableReason()).toMatch(/sandbox agent .*no-agent is not built \(it needs gcc\): run `apt-get install gcc libc6-dev`/);
    const noEngine = new ContainerDriver({ socketPath: join(sandbox.tmpDir, 'no.sock'), runDir: sandbox.tmpDir, logger: captureLogger().logger });
    expect(await noEngine.unavailableReason()).toMatch(/no container engine answers on .*no\.sock/);
    expect(await driver.unavailableReason()).toBeUndefined();
  });

  it('refuses instance names that are not DNS labels (they become host paths)', async () => {
    await expect(driver.inspect('../etc')).rejects.toBeInstanceOf(InstanceError);
    await expect(driver.create(contractSpec(image, { instance: 'Bad/Name' }))).rejects.toThrow(/not a valid instance name/);
  });

  it('a storage limit on an engine that cannot enforce one fails clearly, or is ignored when told so', async () => {
    // Podman wants its runroot path under 50 characters: a short folder of its own.
    const engine = new PodmanService({ directory: await mkdtemp(join(tmpdir(), 'bpo-')) });
    await engine.start();
    try {
      const strict = new ContainerDriver({ socketPath: engine.socketPath, runDir: join(runDir, 'strict'), logger: captureLogger().logger });
      const lenient = new ContainerDriver({
        socketPath: engine.socketPath,
        runDir: join(runDir, 'lenient'),
        logger: captureLogger().logger,
        storageQuota: 'ignore',
      });
      await strict.pullImage(image);
      const limited = { resources: { storageBytes: 20 * 1024 * 1024 } };
      await expect(strict.create(contractSpec(image, limited))).rejects.toThrow(/cannot enforce storage quotas/);
      const spec = contractSpec(image, limited);
      await lenient.create(spec);
      expect((await runIn(lenient, spec.instance, 'echo ok')).stdout).toBe('ok\n');
      await lenient.remove(spec.instance);
    } finally {
      await engine.destroy();
    }
  }, 60_000);
});
