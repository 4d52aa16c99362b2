// What the sandbox driver needs of the fake, driven through the real client (@kubernetes/client-node):
// pods that fail to pull, volumes and network policies, label patches under a resourceVersion
// precondition, and `pods/exec` over WebSocket (channel framing, Status with the exit code).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApiException, CoreV1Api, Exec, KubeConfig, NetworkingV1Api, PatchStrategy, setHeaderOptions, type V1Status } from '@kubernetes/client-node';
import { FakeKube } from './index.js';

let fake: FakeKube;
let kc: KubeConfig;
let core: CoreV1Api;
let net: NetworkingV1Api;
const ns = 'default';

beforeAll(async () => {
  fake = await FakeKube.start({ pods: { delayMs: 10, images: ['sandbox:ok'], pullBackOffMs: 50 } });
  kc = new KubeConfig();
  kc.loadFromOptions(fake.kubeConfigOptions());
  core = kc.makeApiClient(CoreV1Api);
  net = kc.makeApiClient(NetworkingV1Api);
});
afterAll(async () => {
  await fake.close();
});

async function waitFor<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 3_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function runningPod(name: string, env: Array<{ name: string; value: string }> = []): Promise<void> {
  await core.createNamespacedPod({ namespace: ns, body: { metadata: { name, labels: { app: 'box' } }, spec: { containers: [{ name: 'box', image: 'sandbox:ok', env }, { name: 'side', image: 'sandbox:ok' }] } } });
  await waitFor('pod ready', () => core.readNamespacedPod({ name, namespace: ns }), (p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false);
}

function sink(): { stream: Writable; bytes: () => Buffer } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      callback();
    },
  });
  return { stream, bytes: () => Buffer.concat(chunks) };
}

/** Runs a command through client-node's Exec and collects everything. */
async function exec(pod: string, command: string[], input?: Buffer, container = 'box'): Promise<{ stdout: Buffer; stderr: Buffer; status: V1Status }> {
  const stdout = sink();
  const stderr = sink();
  const stdin = new PassThrough();
  const status = await new Promise<V1Status>((resolve, reject) => {
    new Exec(kc).exec(ns, pod, container, command, stdout.stream, stderr.stream, stdin, false, resolve).then(() => {
      if (input) stdin.write(input);
      stdin.end();
    }, reject);
  });
  return { stdout: stdout.bytes(), stderr: stderr.bytes(), status };
}

describe('pods', () => {
  it('fail to pull an image that does not exist: ErrImagePull with the registry answer, then ImagePullBackOff', async () => {
    await core.createNamespacedPod({ namespace: ns, body: { metadata: { name: 'no-image' }, spec: { containers: [{ name: 'box', image: 'sandbox:nope' }] } } });
    const pulled = await waitFor('pull failure', () => core.readNamespacedPod({ name: 'no-image', namespace: ns }), (p) => (p.status?.containerStatuses?.length ?? 0) > 0);
    expect(pulled.status?.phase).toBe('Pending');
    expect(pulled.status?.containerStatuses?.[0]?.state?.waiting).toEqual({
      reason: 'ErrImagePull',
      message: expect.stringContaining('failed to pull and unpack image "sandbox:nope"'),
    });
    const backOff = await waitFor('back-off', () => core.readNamespacedPod({ name: 'no-image', namespace: ns }), (p) => p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ImagePullBackOff');
    expect(backOff.status?.containerStatuses?.[0]?.state?.waiting?.message).toBe('Back-off pulling image "sandbox:nope"');
  });

  it('report the pulled image digest of a running container', async () => {
    await runningPod('digest');
    const pod = await core.readNamespacedPod({ name: 'digest', namespace: ns });
    expect(pod.status?.containerStatuses?.[0]?.imageID).toMatch(/^sandbox:ok@sha256:[0-9a-f]{64}$/);
  });

  it('take a label patch only at the resourceVersion read: a stale one is 409 Conflict', async () => {
    await runningPod('claimable');
    const read = await core.readNamespacedPod({ name: 'claimable', namespace: ns });
    const patch = (owner: string) =>
      core.patchNamespacedPod(
        { name: 'claimable', namespace: ns, body: { metadata: { resourceVersion: read.metadata!.resourceVersion, labels: { 'berth.dev/claimed-by': owner } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    expect((await patch('a')).metadata?.labels?.['berth.dev/claimed-by']).toBe('a');
    await expect(patch('b')).rejects.toMatchObject({ code: 409 });
    const claimed = await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=box,berth.dev/claimed-by' });
    expect(claimed.items.map((p) => p.metadata?.name)).toEqual(['claimable']);
  });
});

describe('volumes and network policies', () => {
  it('binds a PersistentVolumeClaim at once and refuses one without a size', async () => {
    const claim = await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: { metadata: { name: 'data' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } } },
    });
    expect(claim.status?.phase).toBe('Bound');
    await expect(core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: { metadata: { name: 'nosize' }, spec: { accessModes: ['ReadWriteOnce'] } } })).rejects.toMatchObject({ code: 422 });
  });

  it('stores a NetworkPolicy with policyTypes defaulted, and refuses a bad CIDR', async () => {
    const policy = await net.createNamespacedNetworkPolicy({
      namespace: ns,
      body: { metadata: { name: 'box' }, spec: { podSelector: { matchLabels: { app: 'box' } }, egress: [{ to: [{ ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8'] } }] }] } },
    });
    expect(policy.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
    const bad = net.createNamespacedNetworkPolicy({
      namespace: ns,
      body: { metadata: { name: 'bad' }, spec: { podSelector: {}, egress: [{ to: [{ ipBlock: { cidr: 'ten/8' } }] }] } },
    });
    await expect(bad).rejects.toBeInstanceOf(ApiException);
    await expect(bad).rejects.toMatchObject({ code: 422 });
  });
});

describe('pods/exec', () => {
  beforeAll(async () => {
    await runningPod('exec-box', [{ name: 'GREETING', value: 'hello from the pod spec' }]);
  });

  it('streams stdout and stderr on their channels and ends with a Success Status', async () => {
    const result = await exec('exec-box', ['/bin/sh', '-c', 'echo "$GREETING"; echo oops >&2']);
    expect(result.stdout.toString()).toBe('hello from the pod spec\n');
    expect(result.stderr.toString()).toBe('oops\n');
    expect(result.status).toEqual({ metadata: {}, status: 'Success' });
  });

  it('reports a non-zero exit code in the Status causes, as the kubelet does', async () => {
    const result = await exec('exec-box', ['/bin/sh', '-c', 'exit 3']);
    expect(result.status).toMatchObject({ status: 'Failure', reason: 'NonZeroExitCode', details: { causes: [{ reason: 'ExitCode', message: '3' }] } });
  });

  it('passes binary stdin through and closes it (v5) so the command sees its end', async () => {
    const data = Buffer.from(Array.from({ length: 200_000 }, (_, i) => (i * 7) % 256));
    const result = await exec('exec-box', ['cat'], data);
    expect(result.stdout.equals(data)).toBe(true);
  });

  it('runs in a scratch folder of the pod, which goes when the pod goes, killing its processes', async () => {
    const result = await exec('exec-box', ['/bin/sh', '-c', 'pwd; echo kept > file']);
    const dir = result.stdout.toString().trim();
    expect(dir).toBe(fake.exec.scratchDir(ns, 'exec-box'));
    expect(existsSync(join(dir, 'file'))).toBe(true);
    await runningPod('doomed');
    const running = exec('doomed', ['/bin/sh', '-c', 'sleep 30']);
    await new Promise((r) => setTimeout(r, 200));
    await core.deleteNamespacedPod({ name: 'doomed', namespace: ns });
    expect((await running).status.details?.causes?.[0]?.message).toBe('137');
    expect(existsSync(fake.exec.scratchDir(ns, 'exec-box'))).toBe(true);
  });

  it('answers a command that cannot start with an InternalError Status, and refuses bad targets before upgrading', async () => {
    const result = await exec('exec-box', ['/no/such/binary']);
    expect(result.status).toMatchObject({ status: 'Failure', reason: 'InternalError' });
    await expect(exec('exec-box', ['true'], undefined, 'nope')).rejects.toBeDefined();
    await expect(exec('no-such-pod', ['true'])).rejects.toBeDefined();
    expect(fake.requestsTo('GET', '/api/v1/namespaces/default/pods/no-such-pod/exec')[0]?.status).toBe(404);
    expect(fake.requestsTo('GET', '/api/v1/namespaces/default/pods/exec-box/exec').map((r) => r.status)).toContain(400);
  });
});
