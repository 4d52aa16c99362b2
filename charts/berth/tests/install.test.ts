/**
 * `helm install`, `helm upgrade` and `helm uninstall` of the chart against libs/fake-kube, the
 * in-repo fake API server: helm talks to it over the real REST paths (discovery, OpenAPI, server-side
 * apply, its release Secrets in protobuf), so what an operator's helm does to a cluster is what
 * these tests look at.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FakeKube, type KubeObject } from '@berth/fake-kube';
import { until } from '@berth/testing';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeKubeconfig } from './fake-cluster.js';
import { helm, type HelmResult } from './helm-binary.js';

const chart = fileURLToPath(new URL('..', import.meta.url));
const NS = 'berth';
const SERVICES = ['gateway', 'control-plane', 'sandbox-manager', 'export-worker'];
const DATABASE = ['--set', 'postgres.url=postgres://berth:secret@postgres.db.svc:5432/berth'];

type Obj = Record<string, unknown>;

let fake: FakeKube;
let dir: string;
let kubeconfig: string;

/** helm against the fake, in namespace `berth`; throws with helm's output when `expectOk` and it fails. */
async function kubeHelm(args: string[], expectOk = true): Promise<HelmResult> {
  const result = await helm([...args, '--namespace', NS], { KUBECONFIG: kubeconfig });
  if (expectOk && result.code !== 0) throw new Error(`helm ${args[0]} failed (${result.code}):\n${result.stderr}`);
  return result;
}

function deployment(service: string): KubeObject {
  return fake.store.get('apps/deployments', NS, `berth-${service}`);
}

function podSpec(object: KubeObject): Obj {
  return ((object['spec'] as Obj)['template'] as Obj)['spec'] as Obj;
}

function container(object: KubeObject): Obj {
  return (podSpec(object)['containers'] as Obj[])[0]!;
}

/** The release Secrets helm keeps, revision → status label. */
function releases(): Record<string, string | undefined> {
  return Object.fromEntries(
    fake.store.list('secrets', NS, { labelSelector: 'owner=helm,name=berth' }).map((s) => [s.metadata.labels!['version']!, s.metadata.labels!['status']]),
  );
}

/** Whether a Deployment's controller finished rolling out its latest spec (its status written last). */
function rolledOut(object: KubeObject): boolean {
  const status = (object['status'] ?? {}) as { observedGeneration?: number; updatedReplicas?: number; availableReplicas?: number };
  const replicas = (object['spec'] as { replicas: number }).replicas;
  return status.observedGeneration === object.metadata.generation && status.updatedReplicas === replicas && status.availableReplicas === replicas;
}

function secretValue(key: string): string {
  const data = fake.store.get('secrets', NS, 'berth')['data'] as Record<string, string>;
  return Buffer.from(data[key]!, 'base64').toString('utf8');
}

beforeAll(async () => {
  fake = await FakeKube.start({ namespaces: ['default', NS] });
  dir = await mkdtemp(join(tmpdir(), 'berth-helm-'));
  // Only the helm child process sees this kubeconfig (helm() passes KUBECONFIG to it alone).
  kubeconfig = await writeKubeconfig(dir, fake.url, NS);
});

afterAll(async () => {
  await fake?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

// One release goes through its life in order: each test starts where the previous one left it.
describe('helm against a Kubernetes API (libs/fake-kube)', () => {
  it('installs the four services, locked down and probed, and records the release', async () => {
    const result = await kubeHelm(['install', 'berth', chart, ...DATABASE]);
    expect(result.stdout).toContain('STATUS: deployed');
    expect(result.stdout).toContain('kubectl -n berth exec deployment/berth-gateway -- berth keys bootstrap');

    for (const service of SERVICES) {
      const object = deployment(service);
      const main = container(object);
      expect(main['image']).toBe('berth/platform:0.1.0');
      expect(main['args']).toEqual(['serve', '--service', service]);
      // The gateway answers the probes on its HTTP port, the gRPC services on their health listener.
      const port = service === 'gateway' ? 8080 : 8081;
      expect(main['readinessProbe']).toMatchObject({ httpGet: { path: '/readyz', port } });
      expect(main['livenessProbe']).toMatchObject({ httpGet: { path: '/healthz', port } });
      expect(main['securityContext']).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
      expect(podSpec(object)['securityContext']).toMatchObject({ runAsNonRoot: true });
      expect((object['spec'] as Obj)['strategy']).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
      expect(fake.store.find('policy/poddisruptionbudgets', NS, `berth-${service}`)).toBeDefined();
      expect(fake.store.find('services', NS, `berth-${service}`)).toBeDefined();
    }
    expect(fake.store.find('rbac.authorization.k8s.io/roles', NS, 'berth-deployer')).toBeDefined();
    expect(fake.store.find('rbac.authorization.k8s.io/rolebindings', NS, 'berth-sandboxes')).toBeDefined();
    expect(secretValue('DATABASE_URL')).toBe('postgres://berth:secret@postgres.db.svc:5432/berth');
    expect(secretValue('BERTH_SECRET_KEY')).toHaveLength(44);
    expect(releases()).toEqual({ 1: 'deployed' });
  });

  it('rolls every service to a new image tag on upgrade, keeping the generated secret key', async () => {
    const secretKey = secretValue('BERTH_SECRET_KEY');
    const generations = SERVICES.map((s) => deployment(s).metadata.generation!);

    await kubeHelm(['upgrade', 'berth', chart, '--reuse-values', '--set', 'image.tag=0.2.0']);

    SERVICES.forEach((service, k) => {
      const object = deployment(service);
      expect(container(object)['image']).toBe('berth/platform:0.2.0');
      expect(object.metadata.generation).toBe(generations[k]! + 1);
      expect((object['spec'] as Obj)['strategy']).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
    });
    // Read back with lookup: a new key would make every stored deployment secret unreadable.
    expect(secretValue('BERTH_SECRET_KEY')).toBe(secretKey);
    // helm returns before the rollouts end (the fake's controllers finish them): every one does.
    await until('every service rolled out', () => SERVICES.every((s) => rolledOut(deployment(s))) || undefined, 10_000, 20);
    expect(releases()).toEqual({ 1: 'superseded', 2: 'deployed' });
  });

  it('refuses an upgrade with a bad value by the schema, changing nothing', async () => {
    const before = SERVICES.map((s) => deployment(s).metadata.resourceVersion);
    fake.clearRequests();

    const result = await kubeHelm(['upgrade', 'berth', chart, '--reuse-values', '--set', 'gateway.replicas=-1'], false);

    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("at '/gateway/replicas': minimum: got -1, want 0");
    expect(SERVICES.map((s) => deployment(s).metadata.resourceVersion)).toEqual(before);
    expect(fake.requests.filter((r) => r.method !== 'GET')).toEqual([]);
    expect(releases()).toEqual({ 1: 'superseded', 2: 'deployed' });
  });

  it('removes everything it made on uninstall', async () => {
    await kubeHelm(['uninstall', 'berth']);

    for (const service of SERVICES) {
      expect(fake.store.find('apps/deployments', NS, `berth-${service}`)).toBeUndefined();
      expect(fake.store.find('services', NS, `berth-${service}`)).toBeUndefined();
    }
    expect(fake.store.list('secrets', NS)).toEqual([]);
    expect(fake.store.list('configmaps', NS)).toEqual([]);
    expect(fake.store.list('rbac.authorization.k8s.io/roles', NS)).toEqual([]);
  });
});
