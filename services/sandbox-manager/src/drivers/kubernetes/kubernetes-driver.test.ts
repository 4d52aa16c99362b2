// The kubernetes sandbox driver against the in-repo fake API server. The fake's kubelet makes pods
// ready (or fail to pull), and its exec runs commands as host processes in a scratch folder per
// pod — so commands, kills and files here are real processes and real bytes, through the real
// exec protocol, but not inside any isolation (see libs/fake-kube/src/pod-exec.ts).
import { randomBytes, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FakeKube } from '@berth/fake-kube';
import { until } from '@berth/testing';
import { ImagePullError, InstanceError, InstanceNotFoundError, SandboxFileError, type ExecSpec, type InstanceSpec, type SandboxProcess } from '../driver.js';
import { KubernetesDriver, type KubernetesDriverOptions } from './kubernetes-driver.js';
import { LABELS, PROXY_CONTAINER, proxySecretName, pullSecretName, SANDBOX_CONTAINER } from './manifests.js';

const NS = 'sandboxes';
const IMAGE = 'registry.test/sandbox:1';
const CA = {
  certPem: '-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n',
  keyPem: '-----BEGIN PRIVATE KEY-----\nTEST\n-----END PRIVATE KEY-----\n',
};

let fake: FakeKube;
let driver: KubernetesDriver;

function options(overrides: Partial<KubernetesDriverOptions> = {}): KubernetesDriverOptions {
  return {
    cluster: { server: fake.url },
    namespace: NS,
    platformImage: 'berth/platform:test',
    proxyCa: CA,
    pollIntervalMs: 10,
    readyTimeoutMs: 3_000,
    ...overrides,
  };
}

beforeAll(async () => {
  fake = await FakeKube.start({ namespaces: ['default', 'kube-system', NS], pods: { delayMs: 10, images: [IMAGE, 'berth/platform:test'] } });
  driver = new KubernetesDriver(options());
});
afterAll(async () => {
  await driver.close();
  await fake.close();
});

function instanceName(): string {
  return `berth-sbx-${randomBytes(6).toString('hex')}`;
}

function spec(overrides: Partial<InstanceSpec> = {}): InstanceSpec {
  return {
    instance: instanceName(),
    tenantId: 't-1',
    image: { reference: IMAGE },
    resources: { cpuMillis: 500, memoryBytes: 256 * 1024 ** 2 },
    volumes: [],
    egress: { rules: [], allowList: [], denyList: [], privateAllow: [] },
    env: {},
    labels: {},
    ...overrides,
  };
}

async function collect(process: SandboxProcess): Promise<{ stdout: string; stderr: string; exitCode: number; signal: string | undefined }> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  process.onOutput((stream, chunk) => (stream === 'stdout' ? out : err).push(chunk));
  const exit = await process.exited;
  return { stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString(), exitCode: exit.exitCode, signal: exit.signal };
}

const sh = (command: string, more: Partial<ExecSpec> = {}): ExecSpec => ({ command, shell: '/bin/sh', env: {}, ...more });

describe('lifecycle', () => {
  it('creates a pod with its secrets, network policy, record and volumes, and resolves once it is ready', async () => {
    const s = spec({
      image: { reference: IMAGE, credentials: { server: 'registry.test', username: 'u', password: 'p' } },
      volumes: [{ volume: 'vol-t1-data', mountPath: '/data' }],
      labels: { 'berth.dev/pool': 'p1' },
    });
    await driver.create(s);
    expect(await driver.inspect(s.instance)).toEqual({ state: 'running' });
    const pod = fake.store.get('pods', NS, s.instance) as {
      spec: { containers: Array<{ name: string }>; imagePullSecrets: unknown };
      metadata: { labels: Record<string, string> };
    };
    expect(pod.spec.containers.map((c) => c.name)).toEqual([SANDBOX_CONTAINER, PROXY_CONTAINER]);
    expect(pod.spec.imagePullSecrets).toEqual([{ name: pullSecretName(s.instance) }]);
    expect(pod.metadata.labels).toMatchObject({ [LABELS.instance]: s.instance, 'berth.dev/pool': 'p1' });
    expect(fake.store.find('secrets', NS, proxySecretName(s.instance))).toBeDefined();
    expect(fake.store.get('secrets', NS, pullSecretName(s.instance))['type']).toBe('kubernetes.io/dockerconfigjson');
    expect(fake.store.find('networking.k8s.io/networkpolicies', NS, s.instance)).toBeDefined();
    expect(fake.store.find('persistentvolumeclaims', NS, 'vol-t1-data')).toBeDefined();
    expect(await driver.list()).toContain(s.instance);
    await expect(driver.create(s)).rejects.toThrow(/already exists/);
    await driver.remove(s.instance);
  });

  it("fails a create whose image cannot be pulled with the kubelet's words, leaving nothing behind", async () => {
    const s = spec({ image: { reference: 'registry.test/nope:1' } });
    const error = await driver.create(s).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ImagePullError);
    expect((error as Error).message).toMatch(/could not pull image registry\.test\/nope:1: ErrImagePull: .*not found/);
    expect(await driver.inspect(s.instance)).toEqual({ state: 'missing' });
    expect(fake.store.find('secrets', NS, proxySecretName(s.instance))).toBeUndefined();
  });

  it('fails a create that does not become ready in time, saying where the pod stands', async () => {
    const slow = new KubernetesDriver(options({ readyTimeoutMs: 100 }));
    // Pending for longer than the test runs: only the deadline can end the wait.
    fake.pods.delayMs = 3_600_000;
    try {
      const s = spec();
      const error = await slow.create(s).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InstanceError);
      expect((error as Error).message).toBe(`sandbox instance ${s.instance} did not become ready within 100ms (phase Pending)`);
      expect(await slow.inspect(s.instance)).toEqual({ state: 'missing' });
    } finally {
      fake.pods.delayMs = 10;
      await slow.close();
    }
  });

  it('stops (pod gone, record and volumes kept), starts again, and removes idempotently', async () => {
    const s = spec({ volumes: [{ volume: 'vol-t1-keep', mountPath: '/keep' }] });
    await driver.create(s);
    await driver.writeFile(s.instance, 'scratch.txt', Buffer.from('gone after stop'));
    await driver.stop(s.instance);
    expect(await driver.inspect(s.instance)).toEqual({ state: 'stopped' });
    expect(fake.store.find('pods', NS, s.instance)).toBeUndefined();
    expect(fake.store.find('persistentvolumeclaims', NS, 'vol-t1-keep')).toBeDefined();
    expect(await driver.list()).toContain(s.instance);
    await expect(driver.exec(s.instance, sh('true'))).rejects.toThrow(`sandbox instance ${s.instance} is stopped: start it first`);
    await driver.stop(s.instance);

    await driver.start(s.instance, s);
    expect(await driver.inspect(s.instance)).toEqual({ state: 'running' });
    // On Kubernetes only volumes outlive the pod.
    await expect(driver.readFile(s.instance, 'scratch.txt')).rejects.toMatchObject({ kind: 'not_found' });

    await driver.remove(s.instance);
    await driver.remove(s.instance);
    expect(await driver.inspect(s.instance)).toEqual({ state: 'missing' });
    expect(await driver.list()).not.toContain(s.instance);
    expect(fake.store.find('persistentvolumeclaims', NS, 'vol-t1-keep')).toBeDefined();
    await driver.removeVolume('vol-t1-keep');
    await driver.removeVolume('vol-t1-keep');
    expect(fake.store.find('persistentvolumeclaims', NS, 'vol-t1-keep')).toBeUndefined();
    await expect(driver.stop(s.instance)).rejects.toBeInstanceOf(InstanceNotFoundError);
    await expect(driver.start(s.instance, s)).rejects.toBeInstanceOf(InstanceNotFoundError);
    await expect(driver.exec(s.instance, sh('true'))).rejects.toBeInstanceOf(InstanceNotFoundError);
  });

  it('inspects a pod whose sandbox died as failed, with why', async () => {
    const s = spec();
    await driver.create(s);
    const pod = fake.store.get('pods', NS, s.instance);
    const status = pod['status'] as { containerStatuses: Array<Record<string, unknown>> };
    status.containerStatuses[0]!['state'] = { terminated: { exitCode: 137, reason: 'OOMKilled' } };
    fake.store.replace('pods', NS, s.instance, pod, { subresource: 'status' });
    expect(await driver.inspect(s.instance)).toEqual({ state: 'failed', reason: 'out of memory (limit 256Mi)' });
    expect(await driver.claim(s.instance, 'sbx-1')).toBe(false);
    await driver.remove(s.instance);
  });

  it('pulls an image by running it once: digest and user, and a missing image is an ImagePullError', async () => {
    const info = await driver.pullImage({ reference: IMAGE });
    expect(info.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const uid = process.getuid?.() ?? 0;
    expect(info.user).toBe(uid === 0 ? '' : String(uid));
    await expect(driver.pullImage({ reference: 'registry.test/nope:2' })).rejects.toBeInstanceOf(ImagePullError);
    expect(fake.store.list('pods', NS).filter((p) => p.metadata.name!.startsWith('berth-pull-'))).toEqual([]);
    // The image's own /bin/sh ran there: with no network at all.
    expect(fake.store.get('networking.k8s.io/networkpolicies', NS, 'sandbox-image-pull')['spec']).toMatchObject({
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [],
    });
  });

  it("runs a sandbox as its image's non-root USER when a restarted manager knows it only from the template", async () => {
    const fresh = new KubernetesDriver(options());
    const s = spec({ image: { reference: IMAGE, user: '1000:1000' } });
    await fresh.create(s);
    try {
      const pod = fake.store.get('pods', NS, s.instance) as unknown as { spec: { securityContext: Record<string, unknown> } };
      expect(pod.spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
    } finally {
      await fresh.remove(s.instance);
      await fresh.close();
    }
  });

  it('says why sandboxes cannot run when the API refuses it', async () => {
    expect(await driver.unavailableReason()).toBeUndefined();
    const locked = await FakeKube.start({ token: 'right' });
    try {
      const refused = new KubernetesDriver({ ...options(), cluster: { server: locked.url, token: 'wrong' } });
      expect(await refused.unavailableReason()).toMatch(/cannot be used for sandboxes: Unauthorized/);
    } finally {
      await locked.close();
    }
  });
});

describe('claims', () => {
  it('two concurrent claims of one pod: exactly one wins; the winner may claim again, a stopped pod cannot be claimed', async () => {
    const s = spec();
    await driver.create(s);
    const results = await Promise.all([driver.claim(s.instance, 'sbx-a'), driver.claim(s.instance, 'sbx-b')]);
    expect(results.filter(Boolean)).toHaveLength(1);
    const winner = results[0] ? 'sbx-a' : 'sbx-b';
    expect((fake.store.get('pods', NS, s.instance).metadata.labels ?? {})[LABELS.claimedBy]).toBe(winner);
    expect(await driver.claim(s.instance, winner)).toBe(true);
    await driver.stop(s.instance);
    expect(await driver.claim(s.instance, 'sbx-c')).toBe(false);
    await driver.remove(s.instance);
  });

  it('20 concurrent claimers over 5 members: every member goes to one claimer only', async () => {
    const members = Array.from({ length: 5 }, () => spec({ labels: { 'berth.dev/pool': 'race' } }));
    await Promise.all(members.map((m) => driver.create(m)));
    const won = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const sandboxId = `sbx-${i}`;
        const order = [...members].sort(() => Math.random() - 0.5);
        for (const member of order) if (await driver.claim(member.instance, sandboxId)) return member.instance;
        return undefined;
      }),
    );
    const taken = won.filter((w): w is string => w !== undefined);
    expect(taken).toHaveLength(5);
    expect(new Set(taken).size).toBe(5);
    await Promise.all(members.map((m) => driver.remove(m.instance)));
  });
});

describe('commands and files', () => {
  const s = spec({ env: { FROM_SPEC: 'spec-value' } });
  beforeAll(async () => {
    await driver.create(s);
  });
  afterAll(async () => {
    await driver.remove(s.instance);
  });

  it('runs a command: stdout, stderr, exit code, env of the instance and of the command, cwd', async () => {
    const dir = fake.exec.scratchDir(NS, s.instance);
    const process = await driver.exec(
      s.instance,
      sh('echo "$FROM_SPEC $FROM_EXEC"; pwd; echo oops >&2; exit 7', { env: { FROM_EXEC: 'exec-value' }, cwd: dir }),
    );
    expect(process.pid).toBeGreaterThan(0);
    expect(await collect(process)).toEqual({ stdout: `spec-value exec-value\n${dir}\n`, stderr: 'oops\n', exitCode: 7, signal: undefined });
  });

  it('falls back to /bin/sh when the shell does not exist, and takes stdin until it is closed', async () => {
    const process = await driver.exec(s.instance, { command: 'cat; echo done', shell: '/no/such/bash', env: {} });
    process.write(Buffer.from('hello '));
    process.write(Buffer.from('world\n'));
    process.closeStdin();
    expect(await collect(process)).toMatchObject({ stdout: 'hello world\ndone\n', exitCode: 0 });
  });

  it('kills a command and everything it started: exit 137, SIGKILL, no process left', async () => {
    const marker = `${300 + Math.floor(Math.random() * 600)}`;
    const process = await driver.exec(s.instance, sh(`(sleep ${marker}; echo never) & sleep ${marker}`));
    const result = collect(process);
    const sleepers = () =>
      readdirSync('/proc')
        .filter((p) => /^\d+$/.test(p))
        .filter((p) => {
          try {
            return (
              readFileSync(join('/proc', p, 'cmdline'), 'utf8')
                .replace(/\0/g, ' ')
                .trim() === `sleep ${marker}`
            );
          } catch {
            return false;
          }
        });
    await until('both sleeps run', () => (sleepers().length === 2 ? true : undefined), 10_000, 10);
    process.kill();
    process.kill();
    // The sleeps last minutes, past the test's timeout: only the kill ends the command.
    expect(await result).toEqual({ stdout: '', stderr: '', exitCode: 137, signal: 'SIGKILL' });
    expect(sleepers()).toEqual([]);
  });

  it('writes and reads files binary-safe, creating parent folders', async () => {
    const dir = fake.exec.scratchDir(NS, s.instance);
    const data = randomBytes(300_000);
    const path = join(dir, 'deep/er/file.bin');
    await driver.writeFile(s.instance, path, data);
    expect(readFileSync(path).equals(data)).toBe(true);
    expect((await driver.readFile(s.instance, path)).equals(data)).toBe(true);
    await driver.writeFile(s.instance, path, Buffer.from('shorter'));
    expect((await driver.readFile(s.instance, path)).toString()).toBe('shorter');
    await driver.writeFile(s.instance, join(dir, 'empty'), Buffer.alloc(0));
    expect((await driver.readFile(s.instance, join(dir, 'empty'))).length).toBe(0);
  });

  it('a read holds at most its limit: past it the exec is dropped and the read is too_large', async () => {
    const dir = fake.exec.scratchDir(NS, s.instance);
    const limit = 1024 * 1024;
    await driver.writeFile(s.instance, join(dir, 'at-limit'), randomBytes(limit));
    expect((await driver.readFile(s.instance, join(dir, 'at-limit'), { maxBytes: limit })).length).toBe(limit);
    await driver.writeFile(s.instance, join(dir, 'big'), randomBytes(3 * limit));
    const error = await driver.readFile(s.instance, join(dir, 'big'), { maxBytes: limit }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxFileError);
    expect(error).toMatchObject({ kind: 'too_large', message: `${join(dir, 'big')}: larger than 1 MiB, the most one read returns` });
  });

  it('tells a missing file from a folder', async () => {
    const dir = fake.exec.scratchDir(NS, s.instance);
    const missing = await driver.readFile(s.instance, join(dir, 'missing')).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(SandboxFileError);
    expect(missing).toMatchObject({ kind: 'not_found' });
    await expect(driver.readFile(s.instance, dir)).rejects.toMatchObject({ kind: 'is_directory' });
    await expect(driver.writeFile(s.instance, dir, Buffer.from('x'))).rejects.toMatchObject({ kind: 'is_directory' });
  });

  it("closing the driver ends its exec connections: a running command's exited rejects", async () => {
    const own = new KubernetesDriver(options());
    const process = await own.exec(s.instance, sh('cat'));
    await own.close();
    await expect(process.exited).rejects.toThrow(/closed before the command finished/);
  });

  it('runs many commands at once, each with its own output', async () => {
    const ids = Array.from({ length: 10 }, () => randomUUID());
    const results = await Promise.all(ids.map(async (id) => collect(await driver.exec(s.instance, sh(`echo ${id}`)))));
    expect(results.map((r) => r.stdout.trim())).toEqual(ids);
  });
});
