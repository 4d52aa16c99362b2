// The fake API server, driven through the real client (@kubernetes/client-node 1.4), as the
// adapters will drive it.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type V1Deployment,
} from '@kubernetes/client-node';
import { FakeKube } from './index.js';

let fake: FakeKube;
let core: CoreV1Api;
let apps: AppsV1Api;
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

async function waitFor<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 3_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
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
  ({ core, apps } = clients(fake));
});
afterAll(async () => {
  await fake.close();
});
afterEach(() => {
  fake.rollouts.resetOutcomes();
});

describe('core objects', () => {
  it('creates and reads a Secret, folding stringData into base64 data, with maintained metadata', async () => {
    const created = await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 's1', labels: { team: 'a' } }, stringData: { TOKEN: 'sêcret' } } });
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
    expect(conflict).toMatchObject({ code: 409, reason: 'AlreadyExists', message: 'configmaps "dup" already exists', details: { name: 'dup', kind: 'configmaps' } });
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
    const json = await core.patchNamespacedConfigMap({ name: 'p', namespace: ns, body: [{ op: 'remove', path: '/data/x' }, { op: 'add', path: '/data/w', value: '4' }] });
    expect(json.data).toEqual({ y: 'two', z: '3', w: '4' });
    const missing = await failure(core.patchNamespacedConfigMap({ name: 'nope', namespace: ns, body: { data: {} } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch)));
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
    const svc = await core.createNamespacedService({ namespace: ns, body: { metadata: { name: 'web' }, spec: { selector: { app: 'web' }, ports: [{ port: 8000 }] } } });
    expect(svc.spec?.type).toBe('ClusterIP');
    expect(svc.spec?.clusterIP).toMatch(/^10\.96\./);
    expect(svc.spec?.ports?.[0]).toMatchObject({ port: 8000, targetPort: 8000, protocol: 'TCP' });
    const changed = await failure(core.replaceNamespacedService({ name: 'web', namespace: ns, body: { ...svc, spec: { ...svc.spec, clusterIP: '10.0.0.1', clusterIPs: ['10.0.0.1'] } } }));
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
    const scaled = await apps.patchNamespacedDeployment({ name: 'gen', namespace: ns, body: { spec: { replicas: 3 } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    expect(scaled.metadata?.generation).toBe(2);
    const selector = await failure(apps.patchNamespacedDeployment(
      { name: 'gen', namespace: ns, body: { spec: { selector: { matchLabels: { app: 'other' } } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    ));
    expect(selector.code).toBe(422);
  });

  it('rolls a Deployment out: status catches up, pods run and belong to it, deleting it deletes them', async () => {
    await apps.createNamespacedDeployment({ namespace: ns, body: deployment('roll', 'img:1', 2) });
    const done = await waitFor('rollout', () => apps.readNamespacedDeploymentStatus({ name: 'roll', namespace: ns }), (d) => d.status?.availableReplicas === 2);
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
    await apps.replaceNamespacedDeployment({ name: 'roll', namespace: ns, body: { ...next, metadata: { ...next.metadata, resourceVersion: current.metadata?.resourceVersion } } });
    await waitFor('second rollout', () => core.listNamespacedPod({ namespace: ns, labelSelector: 'app=roll' }), (l) => l.items.length === 2 && l.items.every((p) => p.spec?.containers[0]?.image === 'img:2'));
    const old = new Set(pods.items.map((p) => p.metadata?.name));
    expect((await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=roll' })).items.some((p) => old.has(p.metadata?.name))).toBe(false);

    await apps.deleteNamespacedDeployment({ name: 'roll', namespace: ns });
    expect((await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=roll' })).items).toEqual([]);
  });

  it('fails a rollout the test asked to fail: Progressing False, a crash-looping pod whose logs say why, old pods kept', async () => {
    await apps.createNamespacedDeployment({ namespace: ns, body: deployment('bad', 'img:ok', 1) });
    await waitFor('first rollout', () => apps.readNamespacedDeployment({ name: 'bad', namespace: ns }), (d) => d.status?.availableReplicas === 1);
    fake.rollouts.failImage('img:broken', { logs: 'Traceback\nModuleNotFoundError: No module named agent\n' });
    const current = await apps.readNamespacedDeployment({ name: 'bad', namespace: ns });
    await apps.replaceNamespacedDeployment({ name: 'bad', namespace: ns, body: { ...deployment('bad', 'img:broken', 1), metadata: { name: 'bad', labels: { app: 'bad' }, resourceVersion: current.metadata?.resourceVersion } } });
    const failed = await waitFor(
      'failed rollout',
      () => apps.readNamespacedDeployment({ name: 'bad', namespace: ns }),
      (d) => d.status?.conditions?.some((c) => c.type === 'Progressing' && c.status === 'False') ?? false,
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
    await new Promise((r) => setTimeout(r, 100));
    const d = await apps.readNamespacedDeployment({ name: 'stuck', namespace: ns });
    expect(d.status?.observedGeneration).toBe(1);
    expect(d.status?.availableReplicas ?? 0).toBe(0);
    expect(d.status?.conditions?.find((c) => c.type === 'Progressing')).toMatchObject({ status: 'True', reason: 'ReplicaSetUpdated' });
  });
});

describe('pods created through the API', () => {
  it('start Pending, then run and get Ready; a failing image stays not ready with its logs', async () => {
    const created = await core.createNamespacedPod({ namespace: ns, body: { metadata: { generateName: 'sandbox-' }, spec: { containers: [{ name: 'box', image: 'sandbox:ok' }] } } });
    expect(created.metadata?.name).toMatch(/^sandbox-[0-9a-f]{5}$/);
    expect(created.status?.phase).toBe('Pending');
    const name = created.metadata!.name!;
    const running = await waitFor('pod start', () => core.readNamespacedPod({ name, namespace: ns }), (p) => p.status?.phase === 'Running');
    expect(running.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(running.status?.containerStatuses?.[0]?.state?.running).toBeDefined();

    fake.pods.failImage('sandbox:bad', { reason: 'CrashLoopBackOff', logs: 'permission denied\n' });
    const bad = await core.createNamespacedPod({ namespace: ns, body: { metadata: { name: 'bad-box' }, spec: { containers: [{ name: 'box', image: 'sandbox:bad' }] } } });
    const waiting = await waitFor('pod failure', () => core.readNamespacedPod({ name: 'bad-box', namespace: ns }), (p) => (p.status?.containerStatuses?.length ?? 0) > 0);
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
    await objects.create({ apiVersion: 'apps/v1', kind: 'Deployment', ...deployment('generic', 'img:1', 1), metadata: { name: 'generic', namespace: ns, labels: { app: 'generic' } } });
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
      expect.objectContaining({ method: 'POST', path: `/api/v1/namespaces/${ns}/configmaps`, status: 201, body: expect.objectContaining({ data: { k: 'v' } }) }),
      expect.objectContaining({ method: 'GET', path: `/api/v1/namespaces/${ns}/configmaps/absent`, status: 404 }),
    ]);
  });
});
