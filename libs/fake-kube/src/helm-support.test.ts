// What helm (and kubectl) need of an API server beyond the adapters' calls: OpenAPI v3 naming the
// PATCH operations that take `fieldValidation`, server-side apply per field manager, and the kinds a
// chart installs (Roles, RoleBindings, PodDisruptionBudgets, Ingresses, Jobs) with their validation.
// charts/berth/tests/install.test.ts runs helm itself against the fake.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { KubeConfig, KubernetesObjectApi, PatchStrategy, type KubernetesObject } from '@kubernetes/client-node';
import { FakeKube } from './index.js';

let fake: FakeKube;
let objects: KubernetesObjectApi;

beforeAll(async () => {
  fake = await FakeKube.start();
  const kc = new KubeConfig();
  kc.loadFromOptions(fake.kubeConfigOptions());
  objects = KubernetesObjectApi.makeApiClient(kc);
});

afterAll(async () => {
  await fake?.close();
});

async function getJson(path: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${fake.url}${path}`);
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

/** Applies `object` as `manager` (`PATCH …?fieldManager=` with application/apply-patch+yaml). */
async function apply(object: KubernetesObject, manager = 'helm'): Promise<KubernetesObject> {
  return objects.patch(object, undefined, undefined, manager, undefined, PatchStrategy.ServerSideApply);
}

describe('discovery for helm', () => {
  it('serves OpenAPI v3 whose PATCH operations take fieldValidation, so clients leave validation to the server', async () => {
    const root = (await getJson('/openapi/v3'))['paths'] as Record<string, { serverRelativeURL: string }>;
    expect(Object.keys(root)).toEqual(
      expect.arrayContaining(['api/v1', 'apis/apps/v1', 'apis/policy/v1', 'apis/rbac.authorization.k8s.io/v1', 'apis/batch/v1']),
    );
    const apps = await getJson(root['apis/apps/v1']!.serverRelativeURL);
    const path = (apps['paths'] as Record<string, { patch: { 'x-kubernetes-group-version-kind': unknown; parameters: Array<{ name: string; in: string }> } }>)[
      '/apis/apps/v1/namespaces/{namespace}/deployments/{name}'
    ]!;
    expect(path.patch['x-kubernetes-group-version-kind']).toEqual({ group: 'apps', version: 'v1', kind: 'Deployment' });
    expect(path.patch.parameters).toContainEqual(expect.objectContaining({ name: 'fieldValidation', in: 'query' }));
    const resources = (await getJson('/apis/rbac.authorization.k8s.io/v1'))['resources'] as Array<{ name: string }>;
    expect(resources.map((r) => r.name)).toEqual(['roles', 'rolebindings']);
  });
});

describe('server-side apply', () => {
  const service = (labels: Record<string, string>, ports: number[]): KubernetesObject & Record<string, unknown> => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'web', namespace: 'default', labels },
    spec: { selector: { app: 'web' }, ports: ports.map((port) => ({ name: `p${port}`, port })) },
  });

  it('creates, then sets what is applied and removes only what the same manager dropped', async () => {
    const created = (await apply(service({ tier: 'front', team: 'a' }, [80]))) as KubernetesObject & { spec: { clusterIP: string } };
    expect(created.spec.clusterIP).toMatch(/^10\.96\./);
    // Another writer's label survives the manager's next apply; a server default (clusterIP) too.
    await objects.patch(
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: 'default', labels: { owner: 'ops' } } },
      undefined,
      undefined,
      'kubectl',
      undefined,
      PatchStrategy.MergePatch,
    );

    const updated = (await apply(service({ tier: 'front' }, [8080]))) as KubernetesObject & { spec: { clusterIP: string; ports: Array<{ port: number }> } };

    expect(updated.metadata?.labels).toEqual({ tier: 'front', owner: 'ops' });
    expect(updated.spec.ports.map((p) => p.port)).toEqual([8080]);
    expect(updated.spec.clusterIP).toBe(created.spec.clusterIP);
  });

  it('refuses an apply without a field manager or of another kind than the URL names', async () => {
    const noManager = await fetch(`${fake.url}/api/v1/namespaces/default/configmaps/c`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/apply-patch+yaml' },
      body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' } }),
    });
    expect(noManager.status).toBe(400);
    expect(((await noManager.json()) as { message: string }).message).toContain('fieldManager: Required value');
    const wrongKind = await fetch(`${fake.url}/api/v1/namespaces/default/configmaps/c?fieldManager=t`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/apply-patch+yaml' },
      body: JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'c' } }),
    });
    expect(wrongKind.status).toBe(400);
    expect(fake.store.find('configmaps', 'default', 'c')).toBeUndefined();
  });
});

describe('the kinds a chart installs', () => {
  it('refuses changing a RoleBinding roleRef and a PodDisruptionBudget with both bounds, as the API server does', async () => {
    const binding = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'b', namespace: 'default' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'one' },
      subjects: [{ kind: 'ServiceAccount', name: 'sa', namespace: 'default' }],
    };
    await apply(binding);
    await expect(apply({ ...binding, roleRef: { ...binding.roleRef, name: 'two' } } as KubernetesObject)).rejects.toMatchObject({ code: 422 });
    const pdb = {
      apiVersion: 'policy/v1',
      kind: 'PodDisruptionBudget',
      metadata: { name: 'p', namespace: 'default' },
      spec: { minAvailable: 1, maxUnavailable: 1, selector: { matchLabels: { app: 'web' } } },
    };
    await expect(apply(pdb as KubernetesObject)).rejects.toMatchObject({ code: 422 });
    expect(fake.store.find('policy/poddisruptionbudgets', 'default', 'p')).toBeUndefined();
  });
});

describe('strategic merge patch (client-side apply)', () => {
  it('merges containers by name, keeping what the patch does not mention, and honours $patch: delete', async () => {
    const container = (name: string): Record<string, unknown> => ({
      name,
      image: `${name}:1`,
      readinessProbe: { httpGet: { path: '/readyz', port: 8080 } },
      env: [
        { name: 'A', value: '1' },
        { name: 'B', value: '2' },
      ],
    });
    await apply({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'smp', namespace: 'default' },
      spec: {
        selector: { matchLabels: { app: 'smp' } },
        template: { metadata: { labels: { app: 'smp' } }, spec: { containers: [container('main'), container('side')] } },
      },
    } as KubernetesObject);

    const patch = {
      spec: {
        template: {
          spec: {
            '$setElementOrder/containers': [{ name: 'main' }],
            containers: [
              { name: 'main', image: 'main:2', env: [{ name: 'B', $patch: 'delete' }] },
              { name: 'side', $patch: 'delete' },
            ],
          },
        },
      },
    };
    // Sent as helm sends it: client-node's typed serializer would drop the `$` directives.
    const res = await fetch(`${fake.url}/apis/apps/v1/namespaces/default/deployments/smp?fieldManager=helm`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/strategic-merge-patch+json' },
      body: JSON.stringify(patch),
    });
    expect(res.status).toBe(200);

    const containers = (fake.store.get('apps/deployments', 'default', 'smp')['spec'] as { template: { spec: { containers: Array<Record<string, unknown>> } } })
      .template.spec.containers;
    expect(containers).toEqual([{ ...container('main'), image: 'main:2', env: [{ name: 'A', value: '1' }] }]);
  });
});
