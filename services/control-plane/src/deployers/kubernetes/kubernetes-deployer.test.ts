// The kubernetes deployer against the in-repo fake API server: the deployer contract, then what
// is particular to this adapter (objects it writes, restore on failure, timeouts, auth, errors).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { connectionAllowed, FakeKube, podEndpoint, type Endpoint, type KubeObject, type NetworkPolicyObject } from '@berth/fake-kube';
import { labelValue } from '@berth/kube';
import { until } from '@berth/testing';
import { collectLog, deployerContract } from '../contract.js';
import { DeployFailedError, type RevisionSpec } from '../deployer.js';
import { KubernetesDeployer, type KubernetesDeployerOptions } from './kubernetes-deployer.js';
import {
  AGENT_METRICS_PORT,
  ARTIFACT_CREDENTIAL_KEY,
  buildManifests,
  FETCH_CONTAINER_NAME,
  LABELS,
  objectName,
  PROJECT_DIR,
  type ImageRevisionSpec,
} from './manifests.js';
import type { AgentNetworkPolicy, Lookup } from './network-policy.js';

const NAMESPACE = 'berth';
const GOOD = 'registry.test/agent:ok';
const BROKEN = 'registry.test/agent:broken';
const SLOW = 'registry.test/agent:slow';
const BROKEN_REASON = "ImportError: cannot import name 'graph' from 'agent'";
const AGENT_SERVER_IMAGE = 'registry.test/berth/agent-server:0.1.0';

function ready(pod: KubeObject): boolean {
  const conditions = (pod['status'] as { conditions?: Array<{ type: string; status: string }> } | undefined)?.conditions ?? [];
  return conditions.some((c) => c.type === 'Ready' && c.status === 'True');
}

/** A fake with the rollout outcomes every test here relies on (rollouts take longer than one poll). */
async function startFake(options: { token?: string; namespaces?: string[] } = {}): Promise<FakeKube> {
  const fake = await FakeKube.start({
    namespaces: options.namespaces ?? ['default', NAMESPACE],
    rollouts: { delayMs: 200 },
    ...(options.token ? { token: options.token } : {}),
  });
  fake.rollouts.failImage(BROKEN, { logs: `starting agent server\nloading graph agent:graph\n${BROKEN_REASON}\n` });
  fake.rollouts.stallImage(SLOW);
  return fake;
}

const POLICIES = 'networking.k8s.io/networkpolicies';
const PLATFORM_LABELS = { 'app.kubernetes.io/name': 'berth', 'app.kubernetes.io/instance': 'berth' };
const NETWORK_POLICY: AgentNetworkPolicy = {
  gateway: { namespace: 'platform', labels: { ...PLATFORM_LABELS, 'app.kubernetes.io/component': 'gateway' }, port: 8080 },
  controlPlane: { namespace: 'platform', labels: { ...PLATFORM_LABELS, 'app.kubernetes.io/component': 'control-plane' }, port: 8092 },
  metricsScraper: { namespace: 'monitoring', labels: { 'app.kubernetes.io/name': 'prometheus' } },
};
/** Where the agent servers' database is, as the cluster's DNS answers now (tests move it). */
const databaseAddresses: Record<string, string[]> = { db: ['10.0.9.9'], 'db.internal.example': ['10.0.9.9'] };
const lookup: Lookup = async (host) => databaseAddresses[host] ?? Promise.reject(new Error(`getaddrinfo ENOTFOUND ${host}`));

/** A deployer as env.ts makes one by default: with the NetworkPolicy on. */
function deployerFor(fake: FakeKube, options: Partial<KubernetesDeployerOptions> = {}): KubernetesDeployer {
  return new KubernetesDeployer({
    cluster: { server: fake.url },
    pollIntervalMs: 20,
    rolloutTimeoutMs: 5_000,
    networkPolicy: NETWORK_POLICY,
    lookup,
    ...options,
  });
}

function objectsOf(fake: FakeKube, deploymentId: string): KubeObject[] {
  const labelSelector = `${LABELS.deploymentId}=${labelValue(deploymentId)}`;
  return ['apps/deployments', 'services', 'secrets', 'pods', POLICIES].flatMap((r) => fake.store.list(r, NAMESPACE, { labelSelector }));
}

deployerContract('kubernetes (fake API server)', async () => {
  const fake = await startFake();
  return {
    deployer: deployerFor(fake),
    reopen: () => deployerFor(fake),
    goodArtifact: () => ({ kind: 'image', imageUri: GOOD }),
    failingArtifact: () => ({ artifact: { kind: 'image', imageUri: BROKEN }, reason: BROKEN_REASON }),
    slowArtifact: () => ({ kind: 'image', imageUri: SLOW }),
    async runningRevisions(deploymentId) {
      const pods = fake.store.list('pods', NAMESPACE, { labelSelector: `${LABELS.deploymentId}=${labelValue(deploymentId)}` });
      return [...new Set(pods.filter(ready).map((p) => p.metadata.labels![LABELS.revisionId]!))];
    },
    exists: async (deploymentId) => objectsOf(fake, deploymentId).length > 0,
    async answers(url) {
      // In-cluster DNS is out of reach: a url answers when its Service exists and selects a ready pod.
      const match = /^http:\/\/([a-z0-9-]+)\.([a-z0-9-]+)\.svc\.cluster\.local:8000$/.exec(url);
      if (!match) return false;
      const service = fake.store.find('services', match[2], match[1]!);
      if (!service) return false;
      const spec = service['spec'] as { selector: Record<string, string>; ports: Array<{ port: number }> };
      if (!spec.ports.some((p) => p.port === 8000)) return false;
      const selector = Object.entries(spec.selector)
        .map(([k, v]) => `${k}=${v}`)
        .join(',');
      return fake.store.list('pods', match[2], { labelSelector: selector }).some(ready);
    },
    deployTimeoutMs: 5_000,
    teardown: () => fake.close(),
  };
});

/** A revision of a new deployment (a prod one of two replicas, with secrets and platform env). */
function spec(overrides: Partial<RevisionSpec> = {}): ImageRevisionSpec {
  return {
    deploymentId: randomUUID(),
    revisionId: randomUUID(),
    tenantId: randomUUID(),
    name: `agent-${randomUUID().slice(0, 6)}`,
    deploymentType: 'prod',
    artifact: { kind: 'image', imageUri: GOOD },
    secrets: { OPENAI_API_KEY: 'sk-test', EMPTY: '' },
    env: {
      DATABASE_URL: 'postgres://agent_x:role-password@db/berth',
      BERTH_AGENT_SCHEMA: 'agent_x',
      BERTH_DEPLOYMENT_CREDENTIAL: 'bdc_deployment_credential',
      PORT: '1234',
    },
    resources: { replicas: 2, cpu: 0.5, memoryMb: 512, workers: 4 },
    ...overrides,
  } as ImageRevisionSpec;
}

describe('KubernetesDeployer', () => {
  let fake: FakeKube;
  let deployer: KubernetesDeployer;

  beforeAll(async () => {
    fake = await startFake();
    deployer = deployerFor(fake);
  });
  afterAll(async () => {
    await deployer.close();
    await fake.close();
  });

  it('writes the Secret, Deployment and Service of the manifests, and returns the in-cluster url', async () => {
    const revision = spec();
    const log = collectLog();
    const deployed = await deployer.deploy(revision, log.log);
    const name = objectName(revision.name, revision.deploymentId);
    expect(deployed.url).toBe(`http://${name}.${NAMESPACE}.svc.cluster.local:8000`);

    const expected = buildManifests(revision, { namespace: NAMESPACE });
    const secret = fake.store.get('secrets', NAMESPACE, name);
    // The deployment's secrets and the platform's env; PORT is the manifest's own.
    const { PORT: _port, ...platformEnv } = revision.env;
    expect(Object.fromEntries(Object.entries(secret['data'] as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]))).toEqual({
      ...revision.secrets,
      ...platformEnv,
    });
    const deployment = fake.store.get('apps/deployments', NAMESPACE, name);
    expect(deployment.metadata.labels).toEqual(expected.deployment.metadata!.labels);
    expect(deployment['spec']).toMatchObject(JSON.parse(JSON.stringify(expected.deployment.spec)) as Record<string, unknown>);
    const service = fake.store.get('services', NAMESPACE, name);
    expect(service['spec']).toMatchObject({ type: 'ClusterIP', selector: expected.service.spec!.selector, ports: [{ port: 8000, targetPort: 8000 }] });
    // Two ready pods of this revision, the platform PORT winning over the spec's env.
    const pods = fake.store.list('pods', NAMESPACE, { labelSelector: `${LABELS.revisionId}=${revision.revisionId}` });
    expect(pods.filter(ready)).toHaveLength(2);
    const env = (deployment['spec'] as { template: { spec: { containers: Array<{ env: Array<{ name: string; value: string }> }> } } }).template.spec
      .containers[0]!.env;
    expect(env.find((e) => e.name === 'PORT')?.value).toBe('8000');

    expect(log.text()).toContain(`creating Secret ${name}`);
    expect(log.text()).toContain(`creating Deployment ${name}`);
    expect(log.text()).toContain('waiting for rollout');
    expect(fake.requestsTo('POST', `/apis/apps/v1/namespaces/${NAMESPACE}/deployments`).length).toBeGreaterThan(0);
  });

  it('gives the pods it creates no service-account token and no secret literal, as a non-root user', async () => {
    const revision = spec();
    await deployer.deploy(revision, collectLog().log);
    const name = objectName(revision.name, revision.deploymentId);
    const stored = JSON.stringify(fake.store.get('apps/deployments', NAMESPACE, name));
    for (const value of ['sk-test', 'role-password', 'bdc_deployment_credential']) expect(stored).not.toContain(value);
    const pods = fake.store.list('pods', NAMESPACE, { labelSelector: `${LABELS.revisionId}=${revision.revisionId}` });
    expect(pods.length).toBeGreaterThan(0);
    for (const pod of pods) {
      const podSpec = pod['spec'] as {
        automountServiceAccountToken?: boolean;
        enableServiceLinks?: boolean;
        securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
        containers: Array<{ volumeMounts?: Array<{ mountPath: string }>; securityContext?: { allowPrivilegeEscalation?: boolean } }>;
      };
      expect(podSpec.automountServiceAccountToken).toBe(false);
      expect(podSpec.enableServiceLinks).toBe(false);
      expect(podSpec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: expect.any(Number) });
      expect(podSpec.securityContext!.runAsUser).not.toBe(0);
      for (const container of podSpec.containers) {
        expect((container.volumeMounts ?? []).map((m) => m.mountPath)).not.toContain('/var/run/secrets/kubernetes.io/serviceaccount');
        expect(container.securityContext?.allowPrivilegeEscalation).toBe(false);
      }
    }
  });

  it('rolls out every revision, also one with the same image, replacing the objects at their resourceVersion', async () => {
    const first = spec();
    await deployer.deploy(first, collectLog().log);
    const name = objectName(first.name, first.deploymentId);
    const clusterIp = (fake.store.get('services', NAMESPACE, name)['spec'] as { clusterIP: string }).clusterIP;
    fake.clearRequests();
    const second = { ...first, revisionId: randomUUID() };
    const log = collectLog();
    await deployer.deploy(second, log.log);
    expect(log.text()).toContain(`replacing Deployment ${name}`);
    const puts = fake.requests.filter((r) => r.method === 'PUT');
    expect(puts.map((r) => r.path)).toEqual([
      `/apis/networking.k8s.io/v1/namespaces/${NAMESPACE}/networkpolicies/${name}`,
      `/api/v1/namespaces/${NAMESPACE}/secrets/${name}`,
      `/apis/apps/v1/namespaces/${NAMESPACE}/deployments/${name}`,
      `/api/v1/namespaces/${NAMESPACE}/services/${name}`,
    ]);
    expect(puts.every((r) => r.status === 200 && typeof (r.body as { metadata: { resourceVersion?: string } }).metadata.resourceVersion === 'string')).toBe(
      true,
    );
    const pods = fake.store.list('pods', NAMESPACE, { labelSelector: `${LABELS.deploymentId}=${first.deploymentId}` });
    expect(new Set(pods.map((p) => p.metadata.labels![LABELS.revisionId]))).toEqual(new Set([second.revisionId]));
    expect((fake.store.get('services', NAMESPACE, name)['spec'] as { clusterIP: string }).clusterIP).toBe(clusterIp);
  });

  it('puts the previous Deployment spec and Secret back when a revision fails', async () => {
    const first = spec();
    await deployer.deploy(first, collectLog().log);
    const name = objectName(first.name, first.deploymentId);
    const failing = { ...first, revisionId: randomUUID(), artifact: { kind: 'image' as const, imageUri: BROKEN }, secrets: { OPENAI_API_KEY: 'sk-new' } };
    const log = collectLog();
    await expect(deployer.deploy(failing, log.log)).rejects.toThrow(BROKEN_REASON);
    expect(log.text()).toContain('CrashLoopBackOff');
    expect(log.text()).toContain(`rolled ${name} back to revision ${first.revisionId}`);
    const deployment = fake.store.get('apps/deployments', NAMESPACE, name);
    expect(deployment.metadata.annotations?.['berth.dev/revision-id']).toBe(first.revisionId);
    const image = (deployment['spec'] as { template: { spec: { containers: Array<{ image: string }> } } }).template.spec.containers[0]!.image;
    expect(image).toBe(GOOD);
    const data = fake.store.get('secrets', NAMESPACE, name)['data'] as Record<string, string>;
    expect(Buffer.from(data['OPENAI_API_KEY']!, 'base64').toString()).toBe('sk-test');
  });

  it('fails at once on a pod that cannot pull its image, before the progress deadline', async () => {
    fake.rollouts.failImage('registry.test/agent:typo', {
      podReason: 'ImagePullBackOff',
      podMessage: 'Back-off pulling image "registry.test/agent:typo"',
      progressDeadline: false,
    });
    const log = collectLog();
    const error = await deployer.deploy(spec({ artifact: { kind: 'image', imageUri: 'registry.test/agent:typo' } }), log.log).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeployFailedError);
    // The fake sets no progress deadline, so the rollout itself never fails: what ended the deploy
    // is the pod's pull error, not the rollout timeout (whose failure says so, not this).
    expect((error as Error).message).toContain('ImagePullBackOff: Back-off pulling image "registry.test/agent:typo"');
    expect((error as Error).message).not.toMatch(/did not finish rolling out/);
    expect(log.text()).toContain('removed the objects of the failed first revision');
  });

  it('fails a rollout that does not finish within the rollout timeout', async () => {
    const quick = deployerFor(fake, { rolloutTimeoutMs: 300 });
    try {
      const log = collectLog();
      await expect(quick.deploy(spec({ artifact: { kind: 'image', imageUri: SLOW } }), log.log)).rejects.toThrow(
        /did not finish rolling out within 300ms \(waiting for rollout: 1\/2 replicas updated/,
      );
      expect(log.text()).toContain('removed the objects of the failed first revision');
    } finally {
      await quick.close();
    }
  });

  it('runs a source revision with the agent-server image, its Deployment carrying the init container that fetches the build', async () => {
    const sourceDeployer = deployerFor(fake, { agentServerImage: AGENT_SERVER_IMAGE });
    try {
      const archive = {
        url: 'http://berth-control-plane.berth.svc:8092/v1/artifacts/r',
        sha256: 'ab'.repeat(32),
        credential: 'artifact-credential-0123456789',
      };
      const revision = spec({ artifact: { kind: 'directory', path: '/var/lib/berth/artifacts/d/r', configPath: 'langgraph.json', archive } });
      const log = collectLog();
      const deployed = await sourceDeployer.deploy(revision, log.log);
      const name = objectName(revision.name, revision.deploymentId);
      expect(deployed.url).toBe(`http://${name}.${NAMESPACE}.svc.cluster.local:8000`);
      const pod = (fake.store.get('apps/deployments', NAMESPACE, name)['spec'] as { template: { spec: Record<string, unknown> } }).template.spec as {
        initContainers: Array<{ name: string; image: string; command: string[]; env: Array<{ name: string; value?: string; valueFrom?: unknown }> }>;
        containers: Array<{ image: string; volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }> }>;
        volumes: Array<{ name: string; emptyDir?: unknown }>;
      };
      expect(pod.initContainers.map((c) => [c.name, c.image, c.command.join(' ')])).toEqual([
        [FETCH_CONTAINER_NAME, AGENT_SERVER_IMAGE, 'node /app/services/agent-runtime/dist/fetch-artifact.js'],
      ]);
      expect(pod.initContainers[0]!.env).toContainEqual({ name: 'BERTH_ARTIFACT_SHA256', value: archive.sha256 });
      expect(pod.initContainers[0]!.env).toContainEqual({ name: ARTIFACT_CREDENTIAL_KEY, valueFrom: { secretKeyRef: { name, key: ARTIFACT_CREDENTIAL_KEY } } });
      expect(pod.containers[0]!.image).toBe(AGENT_SERVER_IMAGE);
      expect(pod.containers[0]!.volumeMounts).toContainEqual({ name: 'project', mountPath: PROJECT_DIR, readOnly: true });
      expect(pod.volumes.find((v) => v.name === 'project')?.emptyDir).toBeDefined();
      const secret = fake.store.get('secrets', NAMESPACE, name)['data'] as Record<string, string>;
      expect(Buffer.from(secret[ARTIFACT_CREDENTIAL_KEY]!, 'base64').toString()).toBe(archive.credential);
      expect(log.text()).toContain(`built from source, sha256 ${archive.sha256}`);
      const pods = fake.store.list('pods', NAMESPACE, { labelSelector: `${LABELS.revisionId}=${revision.revisionId}` });
      expect(pods.filter(ready)).toHaveLength(2);
    } finally {
      await sourceDeployer.close();
    }
  });

  it('refuses a source revision it cannot run with a clear DeployFailedError, without calling the API', async () => {
    fake.clearRequests();
    const noArchive = collectLog();
    const error = await deployer
      .deploy(spec({ artifact: { kind: 'directory', path: '/tmp/project', configPath: 'langgraph.json' } }), noArchive.log)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeployFailedError);
    expect((error as Error).message).toContain('the control plane keeps no archive of it for the cluster to fetch: set BERTH_S3_BUCKET');
    expect(noArchive.lines[0]?.level).toBe('error');
    // An archive but no agent-server image to run it with.
    const archive = { url: 'http://cp/v1/artifacts/r', sha256: 'ab'.repeat(32), credential: 'artifact-credential-0123456789' };
    const noImage = collectLog();
    const refused = await deployer
      .deploy(spec({ artifact: { kind: 'directory', path: '/tmp/project', configPath: 'langgraph.json', archive } }), noImage.log)
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DeployFailedError);
    expect((refused as Error).message).toBe('source revisions need the agent-server image: set BERTH_AGENT_SERVER_IMAGE on the control plane');
    expect(fake.requests).toEqual([]);
  });

  it('removes only the deployment it is asked to', async () => {
    const a = spec();
    const b = spec();
    await deployer.deploy(a, collectLog().log);
    await deployer.deploy(b, collectLog().log);
    const log = collectLog();
    await deployer.remove(a.deploymentId, log.log);
    const name = objectName(a.name, a.deploymentId);
    expect(log.text().split('\n')).toEqual([
      `deleted Deployment ${name}`,
      `deleted Service ${name}`,
      `deleted Secret ${name}`,
      `deleted NetworkPolicy ${name}`,
    ]);
    expect(objectsOf(fake, a.deploymentId)).toEqual([]);
    expect(
      objectsOf(fake, b.deploymentId)
        .map((o) => o.kind)
        .sort(),
    ).toEqual(['Deployment', 'NetworkPolicy', 'Pod', 'Pod', 'Secret', 'Service']);
  });

  it('stops after close', async () => {
    const closing = deployerFor(fake);
    const log = collectLog();
    const deploying = closing.deploy(spec({ artifact: { kind: 'image', imageUri: SLOW } }), log.log);
    // Closed while it waits for the rollout (the stalled image never finishes it).
    await until('the rollout to be under way', () => log.text().includes('waiting for rollout'));
    await closing.close();
    await expect(deploying).rejects.toThrow('the kubernetes deployer is closed');
    await expect(closing.deploy(spec(), collectLog().log)).rejects.toThrow('closed');
  });

  describe("its NetworkPolicy (from a deployed graph's side)", () => {
    /** A dev deployment whose database is at a name the test's resolver answers. */
    const contained = (overrides: Partial<RevisionSpec> = {}) =>
      spec({
        deploymentType: 'dev',
        env: { DATABASE_URL: 'postgres://agent_x:pw@db.internal.example:5432/berth_agent_x' },
        resources: { replicas: 1 },
        ...overrides,
      });

    const policies = () => fake.store.list(POLICIES, NAMESPACE) as unknown as NetworkPolicyObject[];
    const podsOf = (deploymentId: string) =>
      fake.store.list('pods', NAMESPACE, { labelSelector: `${LABELS.deploymentId}=${deploymentId}` }).map((p) => podEndpoint(p));
    const platformPod = (component: string): Endpoint => ({
      pod: { namespace: 'platform', labels: { ...PLATFORM_LABELS, 'app.kubernetes.io/component': component }, ip: '10.244.9.1' },
    });
    const tcp = (port: number) => ({ port });

    it('contains its pods from their first moment: no metadata endpoint, no platform service but its own, no other deployment', async () => {
      const mine = contained();
      const theirs = contained({ tenantId: randomUUID() });
      fake.clearRequests();
      await deployer.deploy(mine, collectLog().log);
      await deployer.deploy(theirs, collectLog().log);
      // Written before the Deployment: no pod of it ever ran without its policy.
      const writes = fake.requests.filter((r) => r.method === 'POST').map((r) => r.path.split('/').at(-1));
      expect(writes.slice(0, 2)).toEqual(['networkpolicies', 'secrets']);
      expect(writes.indexOf('networkpolicies')).toBeLessThan(writes.indexOf('deployments'));

      const [me] = podsOf(mine.deploymentId);
      const [neighbour] = podsOf(theirs.deploymentId);
      expect(me && neighbour).toBeDefined();
      const reach = (to: Endpoint, port: number) => connectionAllowed(policies(), me!, to, tcp(port));
      expect(reach({ ip: '169.254.169.254' }, 80)).toBe(false);
      expect(reach({ ip: '10.0.0.1' }, 443)).toBe(false);
      expect(reach(neighbour!, 8000)).toBe(false);
      expect(connectionAllowed(policies(), neighbour!, me!, tcp(8000))).toBe(false);
      for (const [component, port] of [
        ['control-plane', 50051],
        ['sandbox-manager', 50051],
        ['export-worker', 50051],
        ['gateway', 8081],
      ] as const) {
        expect({ component, port, allowed: reach(platformPod(component), port) }).toEqual({ component, port, allowed: false });
      }
      // What it needs: its database (where it resolves now), the gateway, the artifact endpoint, the internet.
      expect(reach({ ip: '10.0.9.9' }, 5432)).toBe(true);
      expect(reach(platformPod('gateway'), 8080)).toBe(true);
      expect(reach(platformPod('control-plane'), 8092)).toBe(true);
      expect(reach({ ip: '93.184.216.34' }, 443)).toBe(true);
      // Only the gateway reaches its API, and only the scraper its metrics port.
      expect(connectionAllowed(policies(), platformPod('gateway'), me!, tcp(8000))).toBe(true);
      expect(connectionAllowed(policies(), platformPod('control-plane'), me!, tcp(8000))).toBe(false);
      const prometheus: Endpoint = { pod: { namespace: 'monitoring', labels: { 'app.kubernetes.io/name': 'prometheus' }, ip: '10.244.8.8' } };
      expect(connectionAllowed(policies(), prometheus, me!, tcp(AGENT_METRICS_PORT))).toBe(true);
      expect(connectionAllowed(policies(), prometheus, me!, tcp(8000))).toBe(false);
      expect(connectionAllowed(policies(), platformPod('gateway'), me!, tcp(AGENT_METRICS_PORT))).toBe(false);
      expect(connectionAllowed(policies(), neighbour!, me!, tcp(AGENT_METRICS_PORT))).toBe(false);
    });

    it('resolves the database again at every deploy: a moved database is reachable, its old address no longer', async () => {
      const first = contained();
      await deployer.deploy(first, collectLog().log);
      databaseAddresses['db.internal.example'] = ['10.0.9.10'];
      try {
        const log = collectLog();
        await deployer.deploy({ ...first, revisionId: randomUUID() }, log.log);
        expect(log.text()).toContain('network policy: agent pods may reach DATABASE_URL (db.internal.example:5432) at 10.0.9.10, on port 5432');
        expect(log.text()).toContain(`replacing NetworkPolicy ${objectName(first.name, first.deploymentId)}`);
        const [pod] = podsOf(first.deploymentId);
        expect(connectionAllowed(policies(), pod!, { ip: '10.0.9.10' }, tcp(5432))).toBe(true);
        expect(connectionAllowed(policies(), pod!, { ip: '10.0.9.9' }, tcp(5432))).toBe(false);
      } finally {
        databaseAddresses['db.internal.example'] = ['10.0.9.9'];
      }
    });

    it("puts the previous policy back when a revision fails, and removes a failed first revision's", async () => {
      const first = contained();
      const name = objectName(first.name, first.deploymentId);
      await deployer.deploy(first, collectLog().log);
      databaseAddresses['db.internal.example'] = ['10.0.9.11'];
      try {
        await expect(deployer.deploy({ ...first, revisionId: randomUUID(), artifact: { kind: 'image', imageUri: BROKEN } }, collectLog().log)).rejects.toThrow(
          BROKEN_REASON,
        );
      } finally {
        databaseAddresses['db.internal.example'] = ['10.0.9.9'];
      }
      const [pod] = podsOf(first.deploymentId);
      expect(connectionAllowed(policies(), pod!, { ip: '10.0.9.9' }, tcp(5432))).toBe(true);
      expect(connectionAllowed(policies(), pod!, { ip: '10.0.9.11' }, tcp(5432))).toBe(false);
      expect(fake.store.find(POLICIES, NAMESPACE, name)).toBeDefined();

      const failedFirst = contained({ artifact: { kind: 'image', imageUri: BROKEN } });
      await expect(deployer.deploy(failedFirst, collectLog().log)).rejects.toThrow(BROKEN_REASON);
      expect(objectsOf(fake, failedFirst.deploymentId)).toEqual([]);
    });

    it('removes the policy with the deployment only once its last pod is gone', async () => {
      const revision = contained();
      const name = objectName(revision.name, revision.deploymentId);
      await deployer.deploy(revision, collectLog().log);
      // A pod that outlives its Deployment (ending slowly, its code ignoring SIGTERM).
      const labels = fake.store.get('apps/deployments', NAMESPACE, name)['spec'] as { template: { metadata: { labels: Record<string, string> } } };
      fake.store.create('pods', NAMESPACE, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: `${name}-lingering`, labels: labels.template.metadata.labels },
        spec: { containers: [{ name: 'agent-server', image: GOOD }] },
      });
      const impatient = deployerFor(fake, { podsGoneTimeoutMs: 200 });
      try {
        const log = collectLog();
        await expect(impatient.remove(revision.deploymentId, log.log)).rejects.toThrow(
          `pods ${name}-lingering are still there after 200ms: their NetworkPolicy stays until they are gone`,
        );
        expect(log.text()).toContain('waiting for 1 pod(s) to end before removing their NetworkPolicy');
        expect(fake.store.find('apps/deployments', NAMESPACE, name)).toBeUndefined();
        const [lingering] = podsOf(revision.deploymentId);
        expect(connectionAllowed(policies(), lingering!, { ip: '169.254.169.254' }, tcp(80))).toBe(false);
        // The removal is tried again once the pod is gone.
        fake.store.delete('pods', NAMESPACE, `${name}-lingering`);
        const again = collectLog();
        await impatient.remove(revision.deploymentId, again.log);
        expect(again.text()).toBe(`deleted NetworkPolicy ${name}`);
        expect(objectsOf(fake, revision.deploymentId)).toEqual([]);
      } finally {
        await impatient.close();
      }
    });

    it('makes none when turned off, and removes the one it made before', async () => {
      const off = deployerFor(fake, { networkPolicy: undefined });
      try {
        const plain = contained();
        await off.deploy(plain, collectLog().log);
        expect(fake.store.find(POLICIES, NAMESPACE, objectName(plain.name, plain.deploymentId))).toBeUndefined();

        const earlier = contained();
        const name = objectName(earlier.name, earlier.deploymentId);
        await deployer.deploy(earlier, collectLog().log);
        expect(fake.store.find(POLICIES, NAMESPACE, name)).toBeDefined();
        const log = collectLog();
        await off.deploy({ ...earlier, revisionId: randomUUID() }, log.log);
        expect(log.lines).toContainEqual({
          line: `deleted NetworkPolicy ${name}: the deployer makes none (BERTH_DEPLOYMENT_NETWORK_POLICY=off)`,
          level: 'warn',
        });
        expect(fake.store.find(POLICIES, NAMESPACE, name)).toBeUndefined();
        // Uncontained again: what the switch is for (clusters with their own policies).
        const [pod] = podsOf(earlier.deploymentId);
        expect(connectionAllowed(policies(), pod!, { ip: '169.254.169.254' }, tcp(80))).toBe(true);
      } finally {
        await off.close();
      }
    });
  });
});

describe('KubernetesDeployer cluster access', () => {
  it('sends the bearer token it was given; a wrong one fails the deploy with the API server’s words', async () => {
    const fake = await startFake({ token: 'cluster-token' });
    const good = deployerFor(fake, { cluster: { server: fake.url, token: 'cluster-token' } });
    const bad = deployerFor(fake, { cluster: { server: fake.url, token: 'nope' } });
    try {
      const revision = {
        deploymentId: randomUUID(),
        revisionId: randomUUID(),
        tenantId: 't',
        name: 'tok',
        deploymentType: 'dev' as const,
        artifact: { kind: 'image' as const, imageUri: GOOD },
        secrets: {},
        env: {},
        resources: { replicas: 1 },
      };
      await good.deploy(revision, collectLog().log);
      await expect(bad.deploy({ ...revision, revisionId: randomUUID() }, collectLog().log)).rejects.toThrow(
        'kubernetes: Unauthorized: the Kubernetes API rejected the credentials (HTTP 401)',
      );
    } finally {
      await good.close();
      await bad.close();
      await fake.close();
    }
  });

  it('takes a KubeConfig, and a missing namespace is a clear failure', async () => {
    const fake = await startFake({ namespaces: ['default'] });
    const kc = new KubeConfig();
    kc.loadFromOptions(fake.kubeConfigOptions());
    const deployer = new KubernetesDeployer({ cluster: kc, pollIntervalMs: 20 });
    const revision = {
      deploymentId: randomUUID(),
      revisionId: randomUUID(),
      tenantId: 't',
      name: 'kc',
      deploymentType: 'dev' as const,
      artifact: { kind: 'image' as const, imageUri: GOOD },
      secrets: {},
      env: {},
      resources: { replicas: 1 },
    };
    try {
      await expect(deployer.deploy(revision, collectLog().log)).rejects.toThrow('kubernetes: namespaces "berth" not found (HTTP 404)');
      const inDefault = new KubernetesDeployer({ cluster: kc, namespace: 'default', pollIntervalMs: 20 });
      const deployed = await inDefault.deploy(revision, collectLog().log);
      expect(deployed.url).toBe(`http://${objectName('kc', revision.deploymentId)}.default.svc.cluster.local:8000`);
      await inDefault.close();
    } finally {
      await deployer.close();
      await fake.close();
    }
  });
});
