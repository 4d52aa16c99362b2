// The NetworkPolicy of a deployment's pods: golden files (as the client sends them), then what it
// lets through, asked from an attacker's side (a deployed graph probing the cluster) of an
// evaluator that decides as a policy-enforcing network plugin does (libs/fake-kube). After an
// intended change, regenerate the golden files with
//   UPDATE_GOLDEN=1 node scripts/run-tests.mjs services/control-plane/src/deployers/kubernetes/network-policy
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import type { V1NetworkPolicy } from '@kubernetes/client-node';
// The client's own serializer (not exported from its index): what it puts on the wire.
import { ObjectSerializer } from '@kubernetes/client-node/dist/serializer.js';
import { connectionAllowed, type Connection, type Endpoint, type NetworkPolicyObject, type PodEndpoint } from '@berth/fake-kube';
import type { RevisionSpec } from '../deployer.js';
import { loadControlPlaneConfig } from '../../env.js';
import { AGENT_METRICS_PORT, AGENT_PORT, buildDeployment, type ImageRevisionSpec } from './manifests.js';
import { buildNetworkPolicy, describeEndpoint, resolveEndpoints, type AgentNetworkPolicy, type Lookup, type PlatformEndpoint } from './network-policy.js';

const GOLDEN_DIR = new URL('./__golden__/network-policy/', import.meta.url);
// Test-only switch (the golden workflow), not service configuration.
const UPDATE = process.env['UPDATE_GOLDEN'] === '1';

/** The chart's labels of a platform pod (release `berth`): the selector labels and the rest. */
function platformLabels(component: string, instance = 'berth'): Record<string, string> {
  return {
    'helm.sh/chart': 'berth-0.1.0',
    'app.kubernetes.io/name': 'berth',
    'app.kubernetes.io/instance': instance,
    'app.kubernetes.io/version': '0.1.0',
    'app.kubernetes.io/managed-by': 'Helm',
    'app.kubernetes.io/component': component,
  };
}
const selectorOf = (component: string) => ({
  'app.kubernetes.io/name': 'berth',
  'app.kubernetes.io/instance': 'berth',
  'app.kubernetes.io/component': component,
});

const PLATFORM_NS = 'berth';
const AGENTS_NS = 'berth-agents';
const POLICY: AgentNetworkPolicy = {
  gateway: { namespace: PLATFORM_NS, labels: selectorOf('gateway'), port: 8080 },
  controlPlane: { namespace: PLATFORM_NS, labels: selectorOf('control-plane'), port: 8092 },
};

function spec(deploymentId: string, env: Record<string, string>): ImageRevisionSpec {
  return {
    deploymentId,
    revisionId: '5d0c8f9e-1b2a-4c3d-8e9f-0a1b2c3d4e5f',
    tenantId: 'c2a8e0f4-7b6d-4e5f-9a1b-3c4d5e6f7a8b',
    name: 'my-agent',
    deploymentType: 'dev',
    artifact: { kind: 'image', imageUri: 'ghcr.io/acme/my-agent:1.0.0' },
    secrets: {},
    env,
    resources: { replicas: 1 },
  };
}

/** A resolver with fixed answers; any other name fails as an unknown host does. */
function fixedLookup(answers: Record<string, string[]>): Lookup {
  return async (host) => {
    const addresses = answers[host];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return addresses;
  };
}

/** The chart's default: Postgres as an in-cluster Service (a cluster IP), no Redis. */
const IN_CLUSTER = {
  spec: spec('0b6f6c1e-4a39-4a8e-9d0e-2f1f3c1d5a10', {
    DATABASE_URL: 'postgres://agent_0b6f_a:pw@postgres.db.svc.cluster.local:5432/berth_agent_0b6f',
    LOG_LEVEL: 'info',
  }),
  policy: POLICY,
  lookup: fixedLookup({ 'postgres.db.svc.cluster.local': ['10.96.12.34'] }),
};
/**
 * A VPC database and Redis at private addresses, the operator's ranges (one wide enough to hold the
 * metadata address), and a metrics scraper.
 */
const VPC = {
  spec: spec('9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a', {
    DATABASE_URL: 'postgres://agent_9e8d_a:pw@agents.cluster-abc.eu-west-1.rds.amazonaws.com:6543/berth_agent_9e8d',
    REDIS_URL: 'rediss://agent_9e8d:pw@redis.internal.example',
    LOG_LEVEL: 'info',
  }),
  policy: {
    ...POLICY,
    privateEgress: ['10.20.0.0/16', '169.254.0.0/16', 'fd00::/8', '192.168.7.7'],
    // A kube-prometheus-stack Prometheus.
    metricsScraper: { namespace: 'monitoring', labels: { 'app.kubernetes.io/name': 'prometheus' } },
  },
  lookup: fixedLookup({ 'agents.cluster-abc.eu-west-1.rds.amazonaws.com': ['10.0.3.4', 'fd12:3456::4'], 'redis.internal.example': ['10.0.5.6'] }),
};
const CASES = { 'in-cluster-database': IN_CLUSTER, 'vpc-database-and-private-egress': VPC };

async function policyOf(c: typeof IN_CLUSTER | typeof VPC): Promise<V1NetworkPolicy> {
  return buildNetworkPolicy(c.spec, AGENTS_NS, c.policy, await resolveEndpoints(c.spec.env, AGENTS_NS, c.lookup));
}

/** The policy as the client sends it (and the API server stores it). */
function wire(policy: V1NetworkPolicy): NetworkPolicyObject {
  return ObjectSerializer.serialize(policy, 'V1NetworkPolicy') as NetworkPolicyObject;
}

describe('the NetworkPolicy of a deployment (golden)', () => {
  for (const [name, c] of Object.entries(CASES)) {
    it(`matches __golden__/network-policy/${name}.json`, async () => {
      const actual = JSON.stringify(wire(await policyOf(c)), null, 2) + '\n';
      const file = new URL(`${name}.json`, GOLDEN_DIR);
      if (UPDATE) writeFileSync(file, actual);
      expect(JSON.parse(actual)).toEqual(JSON.parse(readFileSync(file, 'utf8')));
      expect(actual).toBe(readFileSync(file, 'utf8'));
    });
  }

  it('has a golden file for every case and no stale ones', () => {
    expect(readdirSync(GOLDEN_DIR).sort()).toEqual(
      Object.keys(CASES)
        .map((c) => `${c}.json`)
        .sort(),
    );
  });
});

/** A pod of a deployment, labelled as its Deployment's template labels it. */
function agentPod(s: RevisionSpec, ip: string): { pod: PodEndpoint } {
  return { pod: { namespace: AGENTS_NS, labels: buildDeployment(s as ImageRevisionSpec, { namespace: AGENTS_NS }).spec!.template.metadata!.labels!, ip } };
}
const platformPod = (component: string, ip: string, instance = 'berth'): Endpoint => ({
  pod: { namespace: PLATFORM_NS, labels: platformLabels(component, instance), ip },
});
const tcp = (port: number): Connection => ({ port });

describe('what a deployed graph can reach from its pod', () => {
  const me = agentPod(VPC.spec, '10.244.3.7');
  const neighbour = spec('3c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a99', { DATABASE_URL: 'postgres://x:y@postgres.db.svc.cluster.local/z' });
  const neighbourPod = agentPod(neighbour, '10.244.3.8');
  let policies: NetworkPolicyObject[];
  const reach = (to: Endpoint, connection: Connection) => connectionAllowed(policies, me, to, connection);

  it('not the cloud metadata endpoint, even inside a range the operator allowed', async () => {
    policies = [wire(await policyOf(VPC))];
    for (const ip of ['169.254.169.254', 'fd00:ec2::254', '100.100.100.200']) {
      for (const port of [80, 443]) expect({ ip, port, allowed: reach({ ip }, tcp(port)) }).toEqual({ ip, port, allowed: false });
    }
    // The rest of the ranges the operator allowed is open.
    expect(reach({ ip: '169.254.10.1' }, tcp(80))).toBe(true);
    expect(reach({ ip: 'fd00::1' }, tcp(80))).toBe(true);
    expect(reach({ ip: '192.168.7.7' }, tcp(22))).toBe(true);
  });

  it('no private, loopback, link-local or otherwise non-public address but those', async () => {
    const nonPublic = [
      '10.0.0.1',
      '10.96.0.1',
      '172.16.0.1',
      '192.168.7.8',
      '100.64.0.1',
      '127.0.0.1',
      '169.254.0.1',
      '0.0.0.0',
      '224.0.0.251',
      '::1',
      'fe80::1',
      'fc00::1',
      'fd00::1',
      '::ffff:10.0.0.1',
      '64:ff9b::a9fe:a9fe',
    ];
    // Without operator ranges: none of them; with VPC's, only what its ranges hold.
    for (const [c, open] of [
      [IN_CLUSTER, []],
      [VPC, ['169.254.0.1', 'fd00::1']],
    ] as const) {
      const pod = agentPod(c.spec, '10.244.3.7');
      policies = [wire(await policyOf(c))];
      for (const ip of nonPublic) {
        expect({ ip, allowed: connectionAllowed(policies, pod, { ip }, tcp(443)) }).toEqual({ ip, allowed: (open as readonly string[]).includes(ip) });
      }
      expect(connectionAllowed(policies, pod, { ip: '93.184.216.34' }, tcp(443))).toBe(true);
      expect(connectionAllowed(policies, pod, { ip: '2606:2800:220:1::1' }, tcp(443))).toBe(true);
    }
  });

  it("not the platform's internal services: the gateway and the artifact endpoint on their ports only", async () => {
    policies = [wire(await policyOf(VPC))];
    expect(reach(platformPod('gateway', '10.244.0.5'), tcp(8080))).toBe(true);
    expect(reach(platformPod('control-plane', '10.244.0.6'), tcp(8092))).toBe(true);
    for (const [component, port] of [
      ['gateway', 8081],
      ['control-plane', 50051],
      ['control-plane', 8081],
      ['sandbox-manager', 50051],
      ['sandbox-manager', 8092],
      ['export-worker', 50051],
      ['export-worker', 8080],
    ] as const) {
      expect({ component, port, allowed: reach(platformPod(component, '10.244.0.9'), tcp(port)) }).toEqual({ component, port, allowed: false });
    }
    // Another release's gateway is not this platform's.
    expect(reach(platformPod('gateway', '10.244.0.10', 'other'), tcp(8080))).toBe(false);
  });

  it("not another deployment's pods (another tenant's), in either direction, nor sandboxes", async () => {
    const mine = wire(await policyOf(VPC));
    const theirs = wire(buildNetworkPolicy(neighbour, AGENTS_NS, POLICY, []));
    policies = [mine, theirs];
    expect(connectionAllowed(policies, me, neighbourPod, tcp(8000))).toBe(false);
    expect(connectionAllowed(policies, neighbourPod, me, tcp(8000))).toBe(false);
    // Their policy alone refuses them too: a deployment made before mine is still contained.
    expect(connectionAllowed([theirs], me, neighbourPod, tcp(8000))).toBe(false);
    const sandbox = { pod: { namespace: 'berth-sandboxes', labels: { 'app.kubernetes.io/component': 'sandbox' }, ip: '10.244.4.4' } };
    expect(reach(sandbox, tcp(3128))).toBe(false);
  });

  it('its database and Redis, on their ports only', async () => {
    policies = [wire(await policyOf(VPC))];
    expect(reach({ ip: '10.0.3.4' }, tcp(6543))).toBe(true);
    expect(reach({ ip: 'fd12:3456::4' }, tcp(6543))).toBe(true);
    expect(reach({ ip: '10.0.5.6' }, tcp(6379))).toBe(true);
    for (const [ip, port] of [
      ['10.0.3.4', 22],
      ['10.0.3.4', 5432],
      ['10.0.5.6', 6543],
      ['10.0.3.5', 6543],
    ] as const) {
      expect({ ip, port, allowed: reach({ ip }, tcp(port)) }).toEqual({ ip, port, allowed: false });
    }
  });

  it("an in-cluster database by its Service's pods, in its namespace and on its port only", async () => {
    policies = [wire(await policyOf(IN_CLUSTER))];
    const mine = agentPod(IN_CLUSTER.spec, '10.244.3.9');
    const postgres = { pod: { namespace: 'db', labels: { app: 'postgres' }, ip: '10.244.5.5' } };
    expect(connectionAllowed(policies, mine, postgres, tcp(5432))).toBe(true);
    // Policies see the pod behind a cluster IP; where a plugin checks the cluster IP itself, it is allowed too.
    expect(connectionAllowed(policies, mine, { ip: '10.96.12.34' }, tcp(5432))).toBe(true);
    expect(connectionAllowed(policies, mine, postgres, tcp(22))).toBe(false);
    expect(connectionAllowed(policies, mine, { pod: { namespace: 'other', labels: { app: 'postgres' }, ip: '10.244.6.6' } }, tcp(5432))).toBe(false);
  });

  it('the cluster DNS, and no other name server', async () => {
    policies = [wire(await policyOf(VPC))];
    const dns = { pod: { namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' }, ip: '10.244.0.2' } };
    expect(reach(dns, { port: 53, protocol: 'UDP' })).toBe(true);
    expect(reach(dns, tcp(53))).toBe(true);
    expect(reach(dns, tcp(9153))).toBe(false);
    expect(reach({ pod: { namespace: 'kube-system', labels: { component: 'kube-apiserver' }, ip: '10.244.0.3' } }, tcp(6443))).toBe(false);
    expect(reach({ ip: '10.0.0.10' }, { port: 53, protocol: 'UDP' })).toBe(false);
  });
});

describe("who can reach a deployed graph's pod", () => {
  const me = agentPod(IN_CLUSTER.spec, '10.244.3.7');

  it("the gateway's pods, on the agent server's port, and nothing else", async () => {
    const policies = [wire(await policyOf(IN_CLUSTER))];
    expect(connectionAllowed(policies, platformPod('gateway', '10.244.0.5'), me, tcp(8000))).toBe(true);
    expect(connectionAllowed(policies, platformPod('gateway', '10.244.0.5'), me, tcp(9229))).toBe(false);
    for (const from of [
      platformPod('control-plane', '10.244.0.6'),
      platformPod('sandbox-manager', '10.244.0.7'),
      platformPod('gateway', '10.244.0.8', 'other'),
      { ip: '10.0.0.1' },
      { ip: '93.184.216.34' },
    ] as Endpoint[]) {
      expect({ from, allowed: connectionAllowed(policies, from, me, tcp(8000)) }).toEqual({ from, allowed: false });
    }
  });
});

describe("who can reach a deployed graph's metrics port", () => {
  const prometheus = (namespace: string, labels: Record<string, string>, ip = '10.244.7.7'): Endpoint => ({ pod: { namespace, labels, ip } });
  const scraper = prometheus('monitoring', { 'app.kubernetes.io/name': 'prometheus', 'app.kubernetes.io/instance': 'k8s' });

  it("the operator's scraper, on the metrics port only: never the agent server's API", async () => {
    const me = agentPod(VPC.spec, '10.244.3.7');
    const policies = [wire(await policyOf(VPC))];
    expect(connectionAllowed(policies, scraper, me, tcp(AGENT_METRICS_PORT))).toBe(true);
    for (const port of [AGENT_PORT, 8080, 9229]) {
      expect({ port, allowed: connectionAllowed(policies, scraper, me, tcp(port)) }).toEqual({ port, allowed: false });
    }
    // Neither the gateway (whose proxy a tenant drives) nor any other pod: only the scraper's labels, in its namespace.
    for (const from of [
      platformPod('gateway', '10.244.0.5'),
      platformPod('control-plane', '10.244.0.6'),
      prometheus('monitoring', { 'app.kubernetes.io/name': 'grafana' }),
      prometheus('tenant-tools', { 'app.kubernetes.io/name': 'prometheus' }),
      { ip: '10.0.0.1' },
    ] as Endpoint[]) {
      expect({ from, allowed: connectionAllowed(policies, from, me, tcp(AGENT_METRICS_PORT)) }).toEqual({ from, allowed: false });
    }
  });

  it("not another deployment's pods (another tenant's)", async () => {
    const me = agentPod(VPC.spec, '10.244.3.7');
    const neighbour = spec('3c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a99', {});
    const policies = [wire(await policyOf(VPC)), wire(buildNetworkPolicy(neighbour, AGENTS_NS, VPC.policy, []))];
    expect(connectionAllowed(policies, agentPod(neighbour, '10.244.3.8'), me, tcp(AGENT_METRICS_PORT))).toBe(false);
  });

  it('nobody, when no scraper is set', async () => {
    const me = agentPod(IN_CLUSTER.spec, '10.244.3.7');
    const policies = [wire(await policyOf(IN_CLUSTER))];
    for (const from of [scraper, platformPod('gateway', '10.244.0.5')]) {
      expect({ from, allowed: connectionAllowed(policies, from, me, tcp(AGENT_METRICS_PORT)) }).toEqual({ from, allowed: false });
    }
  });
});

describe('resolveEndpoints', () => {
  const lookup = fixedLookup({
    'postgres.db.svc.cluster.local': ['10.96.1.1'],
    'redis.cache.svc': ['10.96.2.2'],
    postgres: ['10.96.3.3'],
    'db.example.com': ['203.0.113.9', '2001:db8::9'],
  });
  const resolve = (env: Record<string, string>) => resolveEndpoints(env, AGENTS_NS, lookup);

  it("resolves the hosts of DATABASE_URL and REDIS_URL, with their schemes' default ports", async () => {
    expect(await resolve({ DATABASE_URL: 'postgres://u:p@db.example.com/x', REDIS_URL: 'redis://:p@redis.cache.svc', LOG_LEVEL: 'info' })).toEqual([
      { setting: 'DATABASE_URL', host: 'db.example.com', port: 5432, addresses: ['2001:db8::9', '203.0.113.9'] },
      { setting: 'REDIS_URL', host: 'redis.cache.svc', port: 6379, addresses: ['10.96.2.2'], serviceNamespace: 'cache' },
    ]);
  });

  it("knows an in-cluster Service by its name, a bare name in the agent pods' own namespace", async () => {
    expect((await resolve({ DATABASE_URL: 'postgres://u@postgres.db.svc.cluster.local:6432/x' }))[0]).toMatchObject({ port: 6432, serviceNamespace: 'db' });
    expect((await resolve({ DATABASE_URL: 'postgres://u@postgres/x' }))[0]).toMatchObject({ serviceNamespace: AGENTS_NS });
    expect((await resolve({ DATABASE_URL: 'postgres://u@db.example.com/x' }))[0]).not.toHaveProperty('serviceNamespace');
  });

  it('takes addresses as they are, and says when a host does not resolve', async () => {
    expect(await resolve({ DATABASE_URL: 'postgres://u@[fd00::5]:5433/x', REDIS_URL: 'redis://10.1.1.1:6380' })).toEqual([
      { setting: 'DATABASE_URL', host: 'fd00::5', port: 5433, addresses: ['fd00::5'] },
      { setting: 'REDIS_URL', host: '10.1.1.1', port: 6380, addresses: ['10.1.1.1'] },
    ]);
    const [missing] = await resolve({ DATABASE_URL: 'postgres://u@gone.example.com/x' });
    expect(missing).toMatchObject({ addresses: [], error: expect.any(Error) });
    expect(describeEndpoint(missing!)).toBe(
      'network policy: DATABASE_URL (gone.example.com:5432) did not resolve (getaddrinfo ENOTFOUND gone.example.com): agent pods may reach it only if it is public or inside BERTH_DEPLOYMENT_PRIVATE_EGRESS',
    );
    // No rule for it: the policy does not open anything it could not name.
    const policy = buildNetworkPolicy(IN_CLUSTER.spec, AGENTS_NS, POLICY, [missing as PlatformEndpoint]);
    expect(policy.spec!.egress!.some((rule) => rule.ports?.some((p) => p.port === 5432))).toBe(false);
  });
});

describe('settings (env)', () => {
  const env = { DATABASE_URL: 'postgres://x@127.0.0.1/x', BERTH_SECRET_KEY: 'k', BERTH_DEPLOYER: 'kubernetes', KUBERNETES_NAMESPACE: AGENTS_NS };
  const labels = 'app.kubernetes.io/name=berth,app.kubernetes.io/instance=berth,app.kubernetes.io/component=gateway';

  it("are on by default, and need the gateway's pod labels then", () => {
    expect(() => loadControlPlaneConfig(env)).toThrow(
      /BERTH_GATEWAY_POD_LABELS: required with BERTH_DEPLOYER=kubernetes while BERTH_DEPLOYMENT_NETWORK_POLICY is on/,
    );
    const config = loadControlPlaneConfig({ ...env, BERTH_GATEWAY_POD_LABELS: labels, BERTH_PLATFORM_NAMESPACE: PLATFORM_NS });
    expect(config.deployments?.deployer).toMatchObject({ networkPolicy: { gateway: { namespace: PLATFORM_NS, labels: selectorOf('gateway'), port: 8080 } } });
    expect(config.deployments?.deployer).not.toHaveProperty('networkPolicy.controlPlane');
    // The platform in the agents' namespace unless told otherwise; the gateway's port is its own setting.
    expect(loadControlPlaneConfig({ ...env, BERTH_GATEWAY_POD_LABELS: labels, GATEWAY_PORT: '9000' }).deployments?.deployer).toMatchObject({
      networkPolicy: { gateway: { namespace: AGENTS_NS, port: 9000 } },
    });
  });

  it("name the control plane's pods on the artifact port when source revisions are fetched from it", () => {
    const withBucket = {
      ...env,
      BERTH_S3_BUCKET: 'builds',
      BERTH_ARTIFACTS_URL: 'http://berth-control-plane.berth.svc:8092',
      BERTH_GATEWAY_POD_LABELS: labels,
    };
    expect(() => loadControlPlaneConfig(withBucket)).toThrow(/BERTH_CONTROL_PLANE_POD_LABELS: required with BERTH_DEPLOYER=kubernetes and BERTH_S3_BUCKET/);
    const config = loadControlPlaneConfig({ ...withBucket, BERTH_CONTROL_PLANE_POD_LABELS: 'app.kubernetes.io/component=control-plane' });
    expect(config.deployments?.deployer).toMatchObject({
      networkPolicy: { controlPlane: { namespace: AGENTS_NS, labels: { 'app.kubernetes.io/component': 'control-plane' }, port: 8092 } },
    });
  });

  it('name the metrics scraper by its namespace and labels, both or neither', () => {
    const on = { ...env, BERTH_GATEWAY_POD_LABELS: labels };
    expect(loadControlPlaneConfig(on).deployments?.deployer).not.toHaveProperty('networkPolicy.metricsScraper');
    const config = loadControlPlaneConfig({
      ...on,
      BERTH_AGENT_METRICS_SCRAPER_NAMESPACE: 'monitoring',
      BERTH_AGENT_METRICS_SCRAPER_POD_LABELS: 'app.kubernetes.io/name=prometheus',
    });
    expect(config.deployments?.deployer).toMatchObject({
      networkPolicy: { metricsScraper: { namespace: 'monitoring', labels: { 'app.kubernetes.io/name': 'prometheus' } } },
    });
    // A namespace alone would admit every pod in it.
    for (const half of [{ BERTH_AGENT_METRICS_SCRAPER_NAMESPACE: 'monitoring' }, { BERTH_AGENT_METRICS_SCRAPER_POD_LABELS: 'app=prometheus' }]) {
      expect(() => loadControlPlaneConfig({ ...on, ...half })).toThrow(
        /BERTH_AGENT_METRICS_SCRAPER_POD_LABELS: set together with BERTH_AGENT_METRICS_SCRAPER_NAMESPACE/,
      );
    }
    expect(() =>
      loadControlPlaneConfig({ ...on, BERTH_AGENT_METRICS_SCRAPER_NAMESPACE: 'monitoring', BERTH_AGENT_METRICS_SCRAPER_POD_LABELS: 'prometheus' }),
    ).toThrow(/BERTH_AGENT_METRICS_SCRAPER_POD_LABELS: a comma-separated list of Kubernetes labels/);
    expect(() =>
      loadControlPlaneConfig({ ...on, BERTH_AGENT_METRICS_SCRAPER_NAMESPACE: 'Monitoring NS', BERTH_AGENT_METRICS_SCRAPER_POD_LABELS: 'app=prometheus' }),
    ).toThrow(/BERTH_AGENT_METRICS_SCRAPER_NAMESPACE: a namespace name/);
  });

  it('turn off with BERTH_DEPLOYMENT_NETWORK_POLICY=off, and refuse labels that are not labels', () => {
    expect(loadControlPlaneConfig({ ...env, BERTH_DEPLOYMENT_NETWORK_POLICY: 'off' }).deployments?.deployer).not.toHaveProperty('networkPolicy');
    expect(() => loadControlPlaneConfig({ ...env, BERTH_DEPLOYMENT_NETWORK_POLICY: 'no' })).toThrow(/BERTH_DEPLOYMENT_NETWORK_POLICY/);
    for (const bad of ['component', 'a=b=c', 'bad key=x', 'k=has space']) {
      expect(() => loadControlPlaneConfig({ ...env, BERTH_GATEWAY_POD_LABELS: bad })).toThrow(
        /BERTH_GATEWAY_POD_LABELS: a comma-separated list of Kubernetes labels/,
      );
    }
  });
});
