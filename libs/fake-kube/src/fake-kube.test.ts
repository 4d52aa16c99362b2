// The fake API server, driven through the real client (@kubernetes/client-node 1.4), as the
// adapters will drive it: the deployer's objects and rollouts, and what the sandbox driver needs
// (pull failures, volumes, network policies, label patches at a resourceVersion, pods/exec).
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  Exec,
  KubeConfig,
  KubernetesObjectApi,
  NetworkingV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Deployment,
  type V1Status,
} from '@kubernetes/client-node';
import { until } from '@berth/testing';
import { FakeKube } from './index.js';

let fake: FakeKube;
let core: CoreV1Api;
let apps: AppsV1Api;
let net: NetworkingV1Api;
let kc: KubeConfig;
const ns = 'default';

function clients(server: FakeKube): { core: CoreV1Api; apps: AppsV1Api; kc: KubeConfig } {
  const kc = new KubeConfig();
  kc.loadFromOptions(server.kubeConfigOptions());
  return { core: kc.makeApiClient(CoreV1Api), apps: kc.makeApiClient(AppsV1Api), kc };
}

/** The `Status` object of a failed call. */
async function failure(call: Promise<unknown>): Promise<{ code: number; reason: string; message: string; details?: Record<string, unknown> }> {
  try {
    await call;
  } catch (error) {
    expect(error).toBeInstanceOf(ApiException);
    const e = error as ApiException<string>;
    const status = JSON.parse(e.body) as { kind: string; code: number; reason: string; message: string; details?: Record<string, unknown> };
    expect(status.kind).toBe('Status');
    expect(status.code).toBe(e.code);
    return status;
  }
  throw new Error('the call succeeded');
}

function deployment(name: string, image: string, replicas = 2): V1Deployment {
  return {
    metadata: { name, labels: { app: name } },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'main', image }] } },
    },
  };
}

beforeAll(async () => {
  fake = await FakeKube.start({ rollouts: { delayMs: 20 } });
  ({ core, apps, kc } = clients(fake));
  net = kc.makeApiClient(NetworkingV1Api);
});
afterAll(async () => {
  await fake.close();
});
afterEach(() => {
  fake.rollouts.resetOutcomes();
});

describe('core objects', () => {
  it('creates and reads a Secret, folding stringData into base64 data, with maintained metadata', async () => {
    const created = await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 's1', labels: { team: 'a' } }, stringData: { TOKEN: 'sêcret' } },
    });
    expect(created.data).toEqual({ TOKEN: Buffer.from('sêcret').toString('base64') });
    expect(created.stringData).toBeUndefined();
    expect(created.type).toBe('Opaque');
    expect(created.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(Number(created.metadata?.resourceVersion)).toBeGreaterThan(0);
    expect(created.metadata?.creationTimestamp).toBeInstanceOf(Date);
    const read = await core.readNamespacedSecret({ name: 's1', namespace: ns });
    expect(read.metadata?.uid).toBe(created.metadata?.uid);
    expect(read.data).toEqual(created.data);
  });

  it('answers a second create with 409 AlreadyExists and a missing object with 404 NotFound', async () => {
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'dup' }, data: { a: '1' } } });
    const conflict = await failure(core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'dup' } } }));
    expect(conflict).toMatchObject({
      code: 409,
      reason: 'AlreadyExists',
      message: 'configmaps "dup" already exists',
      details: { name: 'dup', kind: 'configmaps' },
    });
    const missing = await failure(core.readNamespacedSecret({ name: 'nope', namespace: ns }));
    expect(missing).toMatchObject({ code: 404, reason: 'NotFound', message: 'secrets "nope" not found' });
    const missingApps = await failure(apps.readNamespacedDeployment({ name: 'nope', namespace: ns }));
    expect(missingApps.message).toBe('deployments.apps "nope" not found');
    expect(missingApps.details).toMatchObject({ group: 'apps', kind: 'deployments' });
  });

  it('refuses objects in a namespace that does not exist, until it is created', async () => {
    const body = { metadata: { name: 'x' }, data: {} };
    expect(await failure(core.createNamespacedConfigMap({ namespace: 'later', body }))).toMatchObject({ code: 404, message: 'namespaces "later" not found' });
    await core.createNamespace({ body: { metadata: { name: 'later' } } });
    await core.createNamespacedConfigMap({ namespace: 'later', body });
    await core.deleteNamespace({ name: 'later' });
    // Deleting a namespace deletes what was in it.
    expect((await failure(core.readNamespacedConfigMap({ name: 'x', namespace: 'later' }))).code).toBe(404);
  });

  it('rejects invalid names and labels with 422 Invalid', async () => {
    const badName = await failure(core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'Bad_Name' } } }));
    expect(badName).toMatchObject({ code: 422, reason: 'Invalid' });
    expect(badName.message).toContain('metadata.name');
    const svc = await failure(core.createNamespacedService({ namespace: ns, body: { metadata: { name: '1svc' }, spec: { ports: [{ port: 80 }] } } }));
    expect(svc.message).toContain('DNS-1035');
    const label = await failure(core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'ok', labels: { k: 'has space' } } } }));
    expect(label.code).toBe(422);
  });

  it('lists with equality, inequality, existence and set-based label selectors, per namespace and across them', async () => {
    await core.createNamespace({ body: { metadata: { name: 'other' } } });
    const make = (namespace: string, name: string, labels: Record<string, string>) =>
      core.createNamespacedConfigMap({ namespace, body: { metadata: { name, labels } } });
    await make(ns, 'l-a', { tier: 'web', env: 'prod' });
    await make(ns, 'l-b', { tier: 'web', env: 'dev' });
    await make(ns, 'l-c', { tier: 'db' });
    await make('other', 'l-d', { tier: 'web', env: 'prod' });
    const names = async (labelSelector: string, namespace: string | 'all' = ns) =>
      (namespace === 'all'
        ? await core.listConfigMapForAllNamespaces({ labelSelector })
        : await core.listNamespacedConfigMap({ namespace, labelSelector })
      ).items.map((i) => i.metadata?.name);
    expect(await names('tier=web')).toEqual(['l-a', 'l-b']);
    expect(await names('tier==web,env=prod')).toEqual(['l-a']);
    expect(await names('tier,env!=prod')).toEqual(['l-b', 'l-c']);
    expect(await names('tier in (db, web),!env')).toEqual(['l-c']);
    expect(await names('env notin (prod)')).toEqual(['dup', 'l-b', 'l-c']);
    expect(await names('env=prod', 'all')).toEqual(['l-a', 'l-d']);
    const list = await core.listNamespacedConfigMap({ namespace: ns, fieldSelector: 'metadata.name=l-c' });
    expect(list.items.map((i) => i.metadata?.name)).toEqual(['l-c']);
    expect(list.metadata?.resourceVersion).toBeDefined();
  });

  it('replaces with optimistic concurrency: a stale resourceVersion is a 409 Conflict', async () => {
    const created = await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'cc' }, data: { v: '1' } } });
    const updated = await core.replaceNamespacedConfigMap({ name: 'cc', namespace: ns, body: { ...created, data: { v: '2' } } });
    expect(updated.data).toEqual({ v: '2' });
    expect(updated.metadata?.uid).toBe(created.metadata?.uid);
    expect(Number(updated.metadata?.resourceVersion)).toBeGreaterThan(Number(created.metadata?.resourceVersion));
    const stale = await failure(core.replaceNamespacedConfigMap({ name: 'cc', namespace: ns, body: { ...created, data: { v: '3' } } }));
    expect(stale).toMatchObject({ code: 409, reason: 'Conflict' });
    expect(stale.message).toContain('the object has been modified');
    expect((await core.readNamespacedConfigMap({ name: 'cc', namespace: ns })).data).toEqual({ v: '2' });
  });

  it('applies merge, strategic-merge and JSON patches', async () => {
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'p', labels: { a: '1', b: '2' } }, data: { x: '1', y: '2' } } });
    const merged = await core.patchNamespacedConfigMap(
      { name: 'p', namespace: ns, body: { metadata: { labels: { b: null, c: '3' } }, data: { y: 'two' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(merged.metadata?.labels).toEqual({ a: '1', c: '3' });
    expect(merged.data).toEqual({ x: '1', y: 'two' });
    const strategic = await core.patchNamespacedConfigMap(
      { name: 'p', namespace: ns, body: { data: { z: '3' } } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    expect(strategic.data).toEqual({ x: '1', y: 'two', z: '3' });
    // client-node's default patch type is a JSON patch.
    const json = await core.patchNamespacedConfigMap({
      name: 'p',
      namespace: ns,
      body: [
        { op: 'remove', path: '/data/x' },
        { op: 'add', path: '/data/w', value: '4' },
      ],
    });
    expect(json.data).toEqual({ y: 'two', z: '3', w: '4' });
    const missing = await failure(
      core.patchNamespacedConfigMap({ name: 'nope', namespace: ns, body: { data: {} } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch)),
    );
    expect(missing.code).toBe(404);
    expect(fake.requestsTo('PATCH', `/api/v1/namespaces/${ns}/configmaps/p`).map((r) => r.contentType)).toEqual([
      'application/merge-patch+json',
      'application/strategic-merge-patch+json',
      'application/json-patch+json',
    ]);
  });

  it('deletes one object and collections by label selector', async () => {
    for (const name of ['d1', 'd2', 'd3']) {
      await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name, labels: { batch: name === 'd3' ? 'keep' : 'drop' } } } });
    }
    const status = await core.deleteNamespacedSecret({ name: 'd1', namespace: ns });
    expect(status.status).toBe('Success');
    expect((await failure(core.deleteNamespacedSecret({ name: 'd1', namespace: ns }))).code).toBe(404);
    await core.deleteCollectionNamespacedSecret({ namespace: ns, labelSelector: 'batch=drop' });
    const left = await core.listNamespacedSecret({ namespace: ns, labelSelector: 'batch' });
    expect(left.items.map((i) => i.metadata?.name)).toEqual(['d3']);
  });

  it('assigns a Service its cluster IP and keeps it immutable', async () => {
    const svc = await core.createNamespacedService({
      namespace: ns,
      body: { metadata: { name: 'web' }, spec: { selector: { app: 'web' }, ports: [{ port: 8000 }] } },
    });
    expect(svc.spec?.type).toBe('ClusterIP');
    expect(svc.spec?.clusterIP).toMatch(/^10\.96\./);
    expect(svc.spec?.ports?.[0]).toMatchObject({ port: 8000, targetPort: 8000, protocol: 'TCP' });
    const changed = await failure(
      core.replaceNamespacedService({ name: 'web', namespace: ns, body: { ...svc, spec: { ...svc.spec, clusterIP: '10.0.0.1', clusterIPs: ['10.0.0.1'] } } }),
    );
    expect(changed.code).toBe(422);
  });
});

describe('deployments and rollouts', () => {
  it('bumps generation on spec changes only, and keeps status out of spec writes', async () => {
    const created = await apps.createNamespacedDeployment({ namespace: ns, body: deployment('gen', 'img:1') });
    expect(created.metadata?.generation).toBe(1);
    expect(created.status).toBeUndefined();
    const labelled = await apps.patchNamespacedDeployment(
      { name: 'gen', namespace: ns, body: { metadata: { labels: { app: 'gen', extra: 'x' } }, status: { replicas: 99 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(labelled.metadata?.generation).toBe(1);
    expect(labelled.status?.replicas).not.toBe(99);
    const scaled = await apps.patchNamespacedDeployment(
      { name: 'gen', namespace: ns, body: { spec: { replicas: 3 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(scaled.metadata?.generation).toBe(2);
    const selector = await failure(
      apps.patchNamespacedDeployment(
        { name: 'gen', namespace: ns, body: { spec: { selector: { matchLabels: { app: 'other' } } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
    expect(selector.code).toBe(422);
  });

  it('rolls a Deployment out: status catches up, pods run and belong to it, deleting it deletes them', async () => {
    await apps.createNamespacedDeployment({ namespace: ns, body: deployment('roll', 'img:1', 2) });
    const done = await until(
      'rollout',
      async () => {
        const d = await apps.readNamespacedDeploymentStatus({ name: 'roll', namespace: ns });
        return d.status?.availableReplicas === 2 ? d : undefined;
      },
      3_000,
      10,
    );
    expect(done.status).toMatchObject({ observedGeneration: 1, replicas: 2, updatedReplicas: 2, readyReplicas: 2 });
    expect(done.status?.conditions?.map((c) => [c.type, c.status, c.reason])).toEqual([
      ['Available', 'True', 'MinimumReplicasAvailable'],
      ['Progressing', 'True', 'NewReplicaSetAvailable'],
    ]);
    const pods = await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=roll' });
    expect(pods.items).toHaveLength(2);
    expect(pods.items.every((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))).toBe(true);

    // A new template replaces every pod.
    const current = await apps.readNamespacedDeployment({ name: 'roll', namespace: ns });
    const next = deployment('roll', 'img:2', 2);
    await apps.replaceNamespacedDeployment({
      name: 'roll',
      namespace: ns,
      body: { ...next, metadata: { ...next.metadata, resourceVersion: current.metadata?.resourceVersion } },
    });
    await until(
      'second rollout',
      async () => {
        const l = await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=roll' });
        return l.items.length === 2 && l.items.every((p) => p.spec?.containers[0]?.image === 'img:2') ? l : undefined;
      },
      3_000,
      10,
    );
    const old = new Set(pods.items.map((p) => p.metadata?.name));
    expect((await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=roll' })).items.some((p) => old.has(p.metadata?.name))).toBe(false);

    await apps.deleteNamespacedDeployment({ name: 'roll', namespace: ns });
    expect((await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=roll' })).items).toEqual([]);
  });

  it('fails a rollout the test asked to fail: Progressing False, a crash-looping pod whose logs say why, old pods kept', async () => {
    await apps.createNamespacedDeployment({ namespace: ns, body: deployment('bad', 'img:ok', 1) });
    await until(
      'first rollout',
      async () => {
        const d = await apps.readNamespacedDeployment({ name: 'bad', namespace: ns });
        return d.status?.availableReplicas === 1 ? d : undefined;
      },
      3_000,
      10,
    );
    fake.rollouts.failImage('img:broken', { logs: 'Traceback\nModuleNotFoundError: No module named agent\n' });
    const current = await apps.readNamespacedDeployment({ name: 'bad', namespace: ns });
    await apps.replaceNamespacedDeployment({
      name: 'bad',
      namespace: ns,
      body: { ...deployment('bad', 'img:broken', 1), metadata: { name: 'bad', labels: { app: 'bad' }, resourceVersion: current.metadata?.resourceVersion } },
    });
    const failed = await until(
      'failed rollout',
      async () => {
        const d = await apps.readNamespacedDeployment({ name: 'bad', namespace: ns });
        return d.status?.conditions?.some((c) => c.type === 'Progressing' && c.status === 'False') ? d : undefined;
      },
      3_000,
      10,
    );
    expect(failed.status).toMatchObject({ observedGeneration: 2, updatedReplicas: 1, availableReplicas: 1, replicas: 2 });
    expect(failed.status?.conditions?.find((c) => c.type === 'Progressing')?.reason).toBe('ProgressDeadlineExceeded');
    const pods = (await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=bad' })).items;
    const broken = pods.find((p) => p.spec?.containers[0]?.image === 'img:broken')!;
    expect(broken.status?.containerStatuses?.[0]?.state?.waiting?.reason).toBe('CrashLoopBackOff');
    expect(pods.some((p) => p.spec?.containers[0]?.image === 'img:ok')).toBe(true);
    const logs = await core.readNamespacedPodLog({ name: broken.metadata!.name!, namespace: ns, tailLines: 1 });
    expect(logs).toBe('ModuleNotFoundError: No module named agent\n');
  });

  it('lets a hook decide outcomes, and a stalled rollout never reports a verdict', async () => {
    fake.rollouts.setDecider((d) => (d.metadata.name === 'stuck' ? { result: 'stall' } : undefined));
    await apps.createNamespacedDeployment({ namespace: ns, body: deployment('stuck', 'img:1', 1) });
    // The rollout's end made its one surge pod, and wrote the status with it: no verdict after that.
    await until(
      'the rollout to end',
      async () => (await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=stuck' })).items.length || undefined,
      3_000,
      10,
    );
    const d = await apps.readNamespacedDeployment({ name: 'stuck', namespace: ns });
    expect(d.status?.observedGeneration).toBe(1);
    expect(d.status?.availableReplicas ?? 0).toBe(0);
    expect(d.status?.conditions?.find((c) => c.type === 'Progressing')).toMatchObject({ status: 'True', reason: 'ReplicaSetUpdated' });
  });
});

describe('pods created through the API', () => {
  it('start Pending, then run and get Ready; a failing image stays not ready with its logs', async () => {
    const created = await core.createNamespacedPod({
      namespace: ns,
      body: { metadata: { generateName: 'sandbox-' }, spec: { containers: [{ name: 'box', image: 'sandbox:ok' }] } },
    });
    expect(created.metadata?.name).toMatch(/^sandbox-[0-9a-f]{5}$/);
    expect(created.status?.phase).toBe('Pending');
    const name = created.metadata!.name!;
    const running = await until(
      'pod start',
      async () => {
        const p = await core.readNamespacedPod({ name, namespace: ns });
        return p.status?.phase === 'Running' ? p : undefined;
      },
      3_000,
      10,
    );
    expect(running.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(running.status?.containerStatuses?.[0]?.state?.running).toBeDefined();

    fake.pods.failImage('sandbox:bad', { reason: 'CrashLoopBackOff', logs: 'permission denied\n' });
    const bad = await core.createNamespacedPod({
      namespace: ns,
      body: { metadata: { name: 'bad-box' }, spec: { containers: [{ name: 'box', image: 'sandbox:bad' }] } },
    });
    const waiting = await until(
      'pod failure',
      async () => {
        const p = await core.readNamespacedPod({ name: 'bad-box', namespace: ns });
        return (p.status?.containerStatuses?.length ?? 0) > 0 ? p : undefined;
      },
      3_000,
      10,
    );
    expect(waiting.status?.containerStatuses?.[0]?.state?.waiting?.reason).toBe('CrashLoopBackOff');
    expect(await core.readNamespacedPodLog({ name: 'bad-box', namespace: ns })).toBe('permission denied\n');
    const deleted = await core.deleteNamespacedPod({ name: bad.metadata!.name!, namespace: ns });
    expect(deleted.metadata?.name).toBe('bad-box');
    fake.pods.resetOutcomes();
  });
});

describe('server', () => {
  it('serves discovery so the generic object API works', async () => {
    const { kc } = clients(fake);
    const objects = KubernetesObjectApi.makeApiClient(kc);
    await objects.create({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      ...deployment('generic', 'img:1', 1),
      metadata: { name: 'generic', namespace: ns, labels: { app: 'generic' } },
    });
    const read = await objects.read({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'generic', namespace: ns } });
    expect(read.metadata?.uid).toBeDefined();
    expect(fake.requestsTo('GET', '/apis/apps/v1').length).toBeGreaterThan(0);
  });

  it('requires the bearer token it was started with', async () => {
    const secured = await FakeKube.start({ token: 'let-me-in' });
    try {
      const good = clients(secured).core;
      await good.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'x' } } });
      const kc = new KubeConfig();
      kc.loadFromOptions({ ...secured.kubeConfigOptions(), users: [{ name: 'fake-kube', token: 'wrong' }] });
      const bad = kc.makeApiClient(CoreV1Api);
      await expect(bad.readNamespacedConfigMap({ name: 'x', namespace: 'default' })).rejects.toMatchObject({ code: 401 });
      expect(secured.requests.map((r) => r.status)).toEqual([201, 401]);
    } finally {
      await secured.close();
    }
  });

  it('records the requests it served, with parsed bodies', async () => {
    fake.clearRequests();
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'rec' }, data: { k: 'v' } } });
    await failure(core.readNamespacedConfigMap({ name: 'absent', namespace: ns }));
    expect(fake.requests).toEqual([
      expect.objectContaining({
        method: 'POST',
        path: `/api/v1/namespaces/${ns}/configmaps`,
        status: 201,
        body: expect.objectContaining({ data: { k: 'v' } }),
      }),
      expect.objectContaining({ method: 'GET', path: `/api/v1/namespaces/${ns}/configmaps/absent`, status: 404 }),
    ]);
  });
});

async function runningPod(name: string, env: Array<{ name: string; value: string }> = []): Promise<void> {
  await core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name, labels: { app: 'box' } },
      spec: {
        containers: [
          { name: 'box', image: 'sandbox:ok', env },
          { name: 'side', image: 'sandbox:ok' },
        ],
      },
    },
  });
  await until(
    'pod ready',
    async () => {
      const p = await core.readNamespacedPod({ name, namespace: ns });
      return p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? p : undefined;
    },
    3_000,
    10,
  );
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

describe('pods for sandboxes', () => {
  beforeAll(() => {
    fake.pods.delayMs = 10;
    fake.pods.images = new Set(['sandbox:ok']);
    fake.pods.pullBackOffMs = 50;
  });
  afterAll(() => {
    fake.pods.images = undefined;
  });

  it('fail to pull an image that does not exist: ErrImagePull with the registry answer, then ImagePullBackOff', async () => {
    await core.createNamespacedPod({ namespace: ns, body: { metadata: { name: 'no-image' }, spec: { containers: [{ name: 'box', image: 'sandbox:nope' }] } } });
    const pulled = await until(
      'pull failure',
      async () => {
        const p = await core.readNamespacedPod({ name: 'no-image', namespace: ns });
        return (p.status?.containerStatuses?.length ?? 0) > 0 ? p : undefined;
      },
      3_000,
      10,
    );
    expect(pulled.status?.phase).toBe('Pending');
    expect(pulled.status?.containerStatuses?.[0]?.state?.waiting).toEqual({
      reason: 'ErrImagePull',
      message: expect.stringContaining('failed to pull and unpack image "sandbox:nope"'),
    });
    const backOff = await until(
      'back-off',
      async () => {
        const p = await core.readNamespacedPod({ name: 'no-image', namespace: ns });
        return p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ImagePullBackOff' ? p : undefined;
      },
      3_000,
      10,
    );
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
        {
          name: 'claimable',
          namespace: ns,
          body: { metadata: { resourceVersion: read.metadata!.resourceVersion, labels: { 'berth.dev/claimed-by': owner } } },
        },
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
    await expect(
      core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: { metadata: { name: 'nosize' }, spec: { accessModes: ['ReadWriteOnce'] } } }),
    ).rejects.toMatchObject({ code: 422 });
  });

  it('stores a NetworkPolicy with policyTypes defaulted, and refuses a bad CIDR', async () => {
    const policy = await net.createNamespacedNetworkPolicy({
      namespace: ns,
      body: {
        metadata: { name: 'box' },
        spec: { podSelector: { matchLabels: { app: 'box' } }, egress: [{ to: [{ ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8'] } }] }] },
      },
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
    fake.pods.delayMs = 10;
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
    const running = exec('doomed', ['/bin/sh', '-c', 'touch started; sleep 30']);
    await until('the command to start', () => existsSync(join(fake.exec.scratchDir(ns, 'doomed'), 'started')) || undefined, 10_000, 10);
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
