/**
 * The container driver at the boundary between a sandbox and the host, played from inside the
 * sandbox by an attacker who controls every process and file in it: whatever it does to its run
 * folder (the only host folder it can write), the host never reaches another sandbox or a host
 * socket on its behalf, and never follows a path the sandbox chose. Both kinds of run folder.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import { captureLogger, testSandbox } from '@berth/testing';
import { agentBinaryPath } from '../../agent/agent-client.js';
import { contractSpec, runIn } from '../contract.js';
import { InstanceError, SandboxFileError, type InstanceSpec } from '../driver.js';
import { ContainerDriver, type AuthProxy, type ContainerDriverOptions } from './container-driver.js';
import type { RunFolderKind } from './instance-files.js';

const FAKE_CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const sandbox = testSandbox();
const image = { reference: sandbox.image, insecureRegistries: [sandbox.registry] };
const docker = new Dockerode({ socketPath: sandbox.socketPath });

/** A Unix socket server on the host that records every connection and every byte it is sent. */
async function trapSocket(): Promise<{ path: string; connections: number; received: Buffer[]; close(): Promise<void> }> {
  const path = join(sandbox.tmpDir, `trap-${randomBytes(4).toString('hex')}.sock`);
  const trap = { path, connections: 0, received: [] as Buffer[], close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
  const server: Server = createServer((socket) => {
    trap.connections += 1;
    socket.on('data', (chunk: Buffer) => trap.received.push(chunk));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return trap;
}

/** The host path of an instance's agent socket, as the engine reports its run folder mount. */
async function hostAgentSocket(instance: string): Promise<string> {
  const info = await docker.getContainer(instance).inspect();
  return join(info.Mounts.find((mount) => mount.Destination === '/.berth/run')!.Source, 'agent.sock');
}

describe.each<[RunFolderKind]>([['volume'], ['bind']])('container driver, %s run folders: a sandbox cannot steer the host', (runFolders) => {
  let driver: ContainerDriver;
  let options: ContainerDriverOptions;
  const made: string[] = [];
  const create = async (overrides: Partial<InstanceSpec> = {}): Promise<InstanceSpec> => {
    const spec = contractSpec(image, overrides);
    made.push(spec.instance);
    await driver.create(spec);
    return spec;
  };
  /** A second manager on the same run directory, as after a restart. */
  const restartedManager = () => new ContainerDriver({ ...options, logger: captureLogger('container-driver').logger });
  /** Every way the host reaches a sandbox's agent, each expected to be refused without reaching anything. */
  const expectRefused = async (instance: string): Promise<void> => {
    const refusal = /cannot run commands: its agent's socket was replaced from inside the sandbox/;
    await expect(runIn(driver, instance, 'cat /secret.txt; touch /reached')).rejects.toThrow(refusal);
    await expect(driver.readFile(instance, '/secret.txt')).rejects.toThrow(refusal);
    await expect(driver.writeFile(instance, '/written', Buffer.from('from the attacker'))).rejects.toThrow(refusal);
    await expect(driver.exec(instance, { command: 'true', shell: '/bin/sh', env: {} })).rejects.toBeInstanceOf(InstanceError);
    expect(await driver.claim(instance, 'sandbox-x')).toBe(false);
  };

  beforeAll(async () => {
    options = {
      socketPath: sandbox.socketPath,
      runDir: await mkdtemp(join(sandbox.tmpDir, 'run-')),
      logger: captureLogger('container-driver').logger,
      runFolders,
    };
    driver = new ContainerDriver(options);
    await driver.pullImage(image);
  });

  afterAll(async () => {
    await Promise.all(made.map((instance) => driver.remove(instance)));
    await driver.close();
  });

  it("a sandbox that points its agent socket at another sandbox's agent reaches nothing of it, and gets its own agent back by a restart", async () => {
    const victim = await create();
    await driver.writeFile(victim.instance, '/secret.txt', Buffer.from('the secret of A'));
    const attacker = await create();
    const swap = await runIn(driver, attacker.instance, `ln -sf ${await hostAgentSocket(victim.instance)} /.berth/run/agent.sock && echo swapped`);
    expect(swap.stdout).toBe('swapped\n');

    await expectRefused(attacker.instance);
    // A was not touched: no command ran in it and no file was written there.
    expect((await runIn(driver, victim.instance, 'ls /; cat /secret.txt')).stdout).not.toMatch(/reached|written/);
    await expect(driver.readFile(victim.instance, '/written')).rejects.toMatchObject({ kind: 'not_found' });

    // A bind run folder keeps the symlink across the restart (the agent replaces it); a volume is new.
    await driver.stop(attacker.instance);
    await driver.start(attacker.instance, attacker);
    expect((await runIn(driver, attacker.instance, 'cat /secret.txt 2>&1; hostname')).stdout).toBe(
      `cat: can't open '/secret.txt': No such file or directory\n${attacker.instance}\n`,
    );
  });

  it('a sandbox that points its agent socket at a host socket gets nothing sent there, not even a connection', async () => {
    const trap = await trapSocket();
    try {
      const attacker = await create();
      await runIn(driver, attacker.instance, `ln -sf ${trap.path} /.berth/run/agent.sock`);
      await expectRefused(attacker.instance);
      // A restarted manager reattaching it does not trust the symlink either.
      const restarted = restartedManager();
      await expect(restarted.start(attacker.instance, attacker)).rejects.toThrow(/socket was replaced/);
      await expect(runIn(restarted, attacker.instance, 'echo chosen-by-the-sandbox')).rejects.toThrow(/socket was replaced/);
      await restarted.close();
      expect(trap.connections).toBe(0);
      expect(Buffer.concat(trap.received).toString()).toBe('');
    } finally {
      await trap.close();
    }
  });

  it('a second agent started inside the sandbox on the socket path is not its agent', async () => {
    const attacker = await create();
    // The real agent binary, serving on the path the host dials: a perfect impostor. The command
    // ends once the impostor's socket has taken the path (another inode there).
    await runIn(
      driver,
      attacker.instance,
      'sock=/.berth/run/agent.sock; before=$(ls -i $sock); /.berth/bin/sandboxd --socket $sock </dev/null >/dev/null 2>&1 & ' +
        'until now=$(ls -i $sock 2>/dev/null) && [ -n "$now" ] && [ "$now" != "$before" ]; do sleep 0.01; done',
    );
    await expectRefused(attacker.instance);
    const restarted = restartedManager();
    await expect(restarted.start(attacker.instance, attacker)).rejects.toThrow(/socket was replaced/);
    await restarted.close();
  });

  it('a restarted manager reattaches a sandbox whose agent socket is untouched', async () => {
    const spec = await create();
    // Renamed away and back: the same socket, its agent's.
    await runIn(driver, spec.instance, 'mv /.berth/run/agent.sock /.berth/run/moved && mv /.berth/run/moved /.berth/run/agent.sock');
    const restarted = restartedManager();
    await restarted.start(spec.instance, spec);
    expect((await runIn(restarted, spec.instance, 'echo still mine')).stdout).toBe('still mine\n');
    await restarted.close();
  });
});

describe('container driver: what the host keeps of a sandbox', () => {
  let driver: ContainerDriver;
  let runDir: string;
  const made: string[] = [];
  const create = async (on: ContainerDriver = driver, overrides: Partial<InstanceSpec> = {}): Promise<InstanceSpec> => {
    const spec = contractSpec(image, overrides);
    made.push(spec.instance);
    await on.create(spec);
    return spec;
  };

  beforeAll(async () => {
    runDir = await mkdtemp(join(sandbox.tmpDir, 'run-'));
    driver = new ContainerDriver({ socketPath: sandbox.socketPath, runDir, logger: captureLogger('container-driver').logger });
    await driver.pullImage(image);
  });

  afterAll(async () => {
    await Promise.all(made.map((instance) => driver.remove(instance)));
    await driver.close();
  });

  it("the run folder is a small tmpfs of the sandbox's own, new at every start, and gone with it", async () => {
    const spec = await create();
    const fill = await runIn(driver, spec.instance, 'dd if=/dev/zero of=/.berth/run/fill bs=1M count=8 2>&1; ls /.berth/run');
    expect(fill.stdout).toMatch(/No space left on device/);
    expect(fill.stdout).toMatch(/agent\.sock/);
    // Nothing of it is on the host's disk in the run directory.
    const kept = async () => (await readdir(runDir)).filter((name) => name.startsWith(spec.instance)).sort();
    expect(await kept()).toEqual([`${spec.instance}.host`, `${spec.instance}.ro`]);
    await driver.stop(spec.instance);
    await driver.start(spec.instance, spec);
    expect((await runIn(driver, spec.instance, 'ls /.berth/run')).stdout).toBe('agent.sock\n');
    await driver.remove(spec.instance);
    expect(await kept()).toEqual([]);
    await expect(docker.getVolume(`${spec.instance}-run`).inspect()).rejects.toMatchObject({ statusCode: 404 });
  });

  it("a volume cannot stand in for the platform's mounts", async () => {
    for (const mountPath of ['/.berth/host', '/.berth/run', '/.berth', '/.berth/bin/sandboxd']) {
      const spec = contractSpec(image, { volumes: [{ volume: 'berth-vol-shadow', mountPath }] });
      await expect(driver.create(spec)).rejects.toThrow(`a volume cannot be mounted at ${mountPath} (/.berth is the platform's)`);
    }
    await expect(docker.getVolume('berth-vol-shadow').inspect()).rejects.toMatchObject({ statusCode: 404 });
  });

  it('a create under a name that exists fails and leaves that sandbox as it was', async () => {
    const spec = await create();
    await expect(driver.create(spec)).rejects.toThrow(`sandbox instance ${spec.instance} already exists`);
    expect((await runIn(driver, spec.instance, 'echo fine')).stdout).toBe('fine\n');
  });

  it('a running sandbox whose agent socket was never pinned (the manager stopped in between) is restarted, then pinned', async () => {
    const spec = await create();
    await runIn(driver, spec.instance, 'echo kept > /kept; sleep 300 </dev/null >/dev/null 2>&1 &');
    await rm(join(runDir, `${spec.instance}.host`, 'agent-socket.json'));
    const restarted = new ContainerDriver({ socketPath: sandbox.socketPath, runDir, logger: captureLogger('container-driver').logger });
    await restarted.start(spec.instance, spec);
    const after = await runIn(restarted, spec.instance, 'cat /kept; ps -o args | grep -c "^sleep 300"');
    expect(after.stdout).toBe('kept\n0\n');
    await restarted.close();
  });

  it('a sandbox made by an earlier version (its run folder the only mount) is refused, saying what to do', async () => {
    const instance = contractSpec(image).instance;
    made.push(instance);
    await docker.createContainer({
      name: instance,
      Image: sandbox.image,
      Entrypoint: ['/.berth/bin/sandboxd', '--socket', '/.berth/run/agent.sock'],
      Labels: { 'berth.dev/sandbox-instance': instance },
      HostConfig: { NetworkMode: 'none', Binds: [`${agentBinaryPath()}:/.berth/bin/sandboxd:ro`, `${await mkdtemp(join(runDir, 'old-'))}:/.berth/run`] },
    });
    await expect(driver.start(instance, contractSpec(image, { instance }))).rejects.toThrow(
      `sandbox ${instance} was made by an earlier version of Berth, with other folders: delete it and create it again`,
    );
  });

  it("the proxy's socket and CA are the host's: the sandbox uses them, as root or not, but cannot replace them", async () => {
    // Answers every request with a 204, as the real proxy does to what its policy allows.
    const proxy: AuthProxy = {
      caCertPem: FAKE_CA_PEM,
      async open(_instance, socketPath) {
        const sockets = new Set<Socket>();
        const server = createServer((socket) => {
          sockets.add(socket);
          socket.on('close', () => sockets.delete(socket));
          socket.end('HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n');
        });
        await new Promise<void>((resolve) => server.listen(socketPath, resolve));
        return {
          // As the real proxy does: connections still open are cut.
          close: () => {
            const closed = new Promise<void>((resolve) => server.close(() => resolve()));
            for (const socket of sockets) socket.destroy();
            return closed;
          },
        };
      },
    };
    const withProxy = new ContainerDriver({ socketPath: sandbox.socketPath, runDir, logger: captureLogger('container-driver').logger, proxy });
    const userImage = { reference: sandbox.userImage, insecureRegistries: [sandbox.registry] };
    await withProxy.pullImage(userImage);
    for (const source of [image, userImage]) {
      const spec = await create(withProxy, { image: source });
      const result = await runIn(
        withProxy,
        spec.instance,
        [
          'wget -S -q -O /dev/null http://example.com/ 2>&1 | head -1',
          'cat "$NODE_EXTRA_CA_CERTS"',
          'rm -f /.berth/host/proxy.sock 2>/dev/null || echo cannot-remove',
          'ln -sf /etc/passwd /.berth/host/proxy-ca.crt 2>/dev/null || echo cannot-link',
          'touch /.berth/host/new 2>/dev/null || echo cannot-create',
          'ls /.berth/host',
        ].join('; '),
      );
      expect(result.stdout).toBe(`  HTTP/1.1 204 No Content\n${FAKE_CA_PEM}cannot-remove\ncannot-link\ncannot-create\nproxy-ca.crt\nproxy.sock\n`);
      await withProxy.remove(spec.instance);
    }
    await withProxy.close();
  });

  it('a read is bounded: a device that never ends is refused once it passes the limit', async () => {
    const spec = await create();
    const error = await driver.readFile(spec.instance, '/dev/zero', { maxBytes: 1024 * 1024 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(SandboxFileError);
    expect(error).toMatchObject({ kind: 'too_large', message: '/dev/zero: larger than 1 MiB, the most one read returns' });
    // The agent is fine afterwards.
    expect((await runIn(driver, spec.instance, 'echo ok')).stdout).toBe('ok\n');
  });
});
