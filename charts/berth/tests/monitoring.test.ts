/**
 * The chart's monitoring objects (monitoring.*): rendered only when enabled, the gateway's metrics port
 * on no Service; the agent servers' PodMonitor selecting the pods the control plane's deployer makes,
 * on their metrics port, which their NetworkPolicy opens to the scraper the chart names and no one
 * else; the alerts, as rendered, pass `promtool check rules` and fire — or stay quiet — on recorded
 * series as alerts.test.yaml expects (`promtool test rules`); the dashboard and the alerts use only
 * series Berth's services export (or Prometheus' and the kubelet's own).
 */
import { describe, expect, it } from '@jest/globals';
import { loadAllYaml } from '@kubernetes/client-node';
// The client's own serializer (not exported from its index): what it puts on the wire.
import { ObjectSerializer } from '@kubernetes/client-node/dist/serializer.js';
import { buildManifests, buildNetworkPolicy, loadControlPlaneConfig, type SourceRevisionSpec } from '@berth/control-plane';
import { connectionAllowed, type Endpoint, type NetworkPolicyObject } from '@berth/fake-kube';
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { helm } from './helm-binary.js';

const chart = fileURLToPath(new URL('..', import.meta.url));
const repo = fileURLToPath(new URL('../../..', import.meta.url));
const REQUIRED = ['--set', 'postgres.url=postgres://berth:secret@postgres.db.svc:5432/berth'];
const ENABLED = [
  '--set',
  'monitoring.podMonitor.enabled=true',
  '--set',
  'monitoring.prometheusRule.enabled=true',
  '--set',
  'monitoring.grafanaDashboard.enabled=true',
];
/** Debian's `prometheus` package (make test-tools installs it). */
const PROMTOOL = '/usr/bin/promtool';

interface KubeObject {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec?: Record<string, any>;
  data?: Record<string, string>;
}

async function render(args: string[]): Promise<KubeObject[]> {
  const result = await helm(['template', 'berth', chart, '--namespace', 'berth', ...REQUIRED, ...args]);
  if (result.code !== 0) throw new Error(`helm template failed:\n${result.stderr}`);
  return (loadAllYaml(result.stdout) as KubeObject[]).filter(Boolean);
}

async function promtool(cwd: string, args: string[]): Promise<{ code: number; output: string }> {
  return promisify(execFile)(PROMTOOL, args, { cwd }).then(
    ({ stdout, stderr }) => ({ code: 0, output: stdout + stderr }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({ code: error.code ?? 1, output: `${error.stdout ?? ''}${error.stderr ?? ''}` }),
  );
}

/** The names of the series Berth's code registers (`name: 'berth_…'` in its sources). */
async function registeredMetrics(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const top of ['libs', 'services']) {
    for (const entry of await readdir(join(repo, top), { recursive: true, withFileTypes: true })) {
      const path = join(entry.parentPath, entry.name);
      if (!entry.isFile() || !/\/src\/.*\.ts$/.test(path) || path.endsWith('.test.ts') || relative(repo, path).includes('node_modules')) continue;
      for (const match of (await readFile(path, 'utf8')).matchAll(/name: '(berth_[a-z_]+)'/g)) names.add(match[1]!);
    }
  }
  return names;
}

/**
 * The Berth series a PromQL text uses, without the histogram's suffixes (comments left out; `berth_dev_*` are the
 * labels Prometheus makes of pods' `berth.dev/*` labels, not series).
 */
const seriesIn = (text: string) =>
  [...text.replace(/^\s*#.*$/gm, '').matchAll(/\bberth_[a-z_]*[a-z]\b/g)]
    .map((m) => m[0].replace(/_(bucket|count|sum)$/, ''))
    .filter((name) => !name.startsWith('berth_dev_'));

describe('the chart’s monitoring', () => {
  it('renders nothing of it by default, and the PodMonitor, PrometheusRule and dashboard when enabled', async () => {
    const kinds = (objects: KubeObject[]) =>
      objects.filter((o) => ['PodMonitor', 'PrometheusRule', 'ConfigMap'].includes(o.kind)).map((o) => `${o.kind} ${o.metadata.name}`);
    expect(kinds(await render([]))).toEqual(['ConfigMap berth']);
    const objects = await render([...ENABLED, '--set', 'monitoring.podMonitor.labels.release=prometheus']);
    expect(kinds(objects).sort()).toEqual([
      'ConfigMap berth',
      'ConfigMap berth-dashboard',
      'PodMonitor berth',
      'PodMonitor berth-agents',
      'PrometheusRule berth',
    ]);
    for (const podMonitor of objects.filter((o) => o.kind === 'PodMonitor')) expect(podMonitor.metadata.labels).toMatchObject({ release: 'prometheus' });
    const monitor = objects.find((o) => o.kind === 'PodMonitor' && o.metadata.name === 'berth')!;
    // The gateway's metrics port and the gRPC services' health port; neither is on a Service.
    expect(monitor.spec!.podMetricsEndpoints.map((e: { port: string }) => e.port)).toEqual(['metrics', 'health']);
    const gateway = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'berth-gateway')!;
    const container = gateway.spec!.template.spec.containers[0];
    expect(container.ports).toContainEqual({ name: 'metrics', containerPort: 9464, protocol: 'TCP' });
    expect(container.env).toEqual(expect.arrayContaining([{ name: 'BERTH_METRICS_PORT', value: '9464' }]));
    const gatewayService = objects.find((o) => o.kind === 'Service' && o.metadata.name === 'berth-gateway')!;
    expect(gatewayService.spec!.ports.map((p: { targetPort: string }) => p.targetPort)).toEqual(['http']);
    const dashboard = objects.find((o) => o.metadata.name === 'berth-dashboard')!;
    expect(dashboard.metadata.labels).toMatchObject({ grafana_dashboard: '1' });
    expect(JSON.parse(dashboard.data!['berth.json']!)).toMatchObject({ uid: 'berth-overview', title: 'Berth' });
  });

  describe("the agent servers' scrape", () => {
    const AGENTS_NS = 'berth-agents';
    /** A deployment's revision, as the control plane deploys it. */
    const revision: SourceRevisionSpec = {
      deploymentId: '0b6f6c1e-4a39-4a8e-9d0e-2f1f3c1d5a10',
      revisionId: '5d0c8f9e-1b2a-4c3d-8e9f-0a1b2c3d4e5f',
      tenantId: 'c2a8e0f4-7b6d-4e5f-9a1b-3c4d5e6f7a8b',
      name: 'my-agent',
      deploymentType: 'dev',
      artifact: { kind: 'directory', path: '/tmp/x', configPath: 'langgraph.json', archive: { url: 'http://a/b', sha256: '0', credential: 'c' } },
      secrets: {},
      env: {},
      resources: { replicas: 1 },
    };
    /** kube-prometheus-stack's Prometheus pod, labelled as the Prometheus Operator labels it. */
    const prometheus: Endpoint = {
      pod: {
        namespace: 'monitoring',
        labels: {
          'app.kubernetes.io/name': 'prometheus',
          'app.kubernetes.io/instance': 'kube-prometheus-stack-prometheus',
          'app.kubernetes.io/managed-by': 'prometheus-operator',
          prometheus: 'kube-prometheus-stack-prometheus',
        },
        ip: '10.244.7.7',
      },
    };

    /** The chart's objects, the control plane's settings from its ConfigMap, and an agent pod with its NetworkPolicy. */
    async function installed(args: string[]) {
      const objects = await render(['--set', `deployments.namespace=${AGENTS_NS}`, ...args]);
      const settings = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'berth')!.data!;
      const deployer = loadControlPlaneConfig({ ...settings, DATABASE_URL: 'postgres://berth@db/berth', BERTH_SECRET_KEY: 'key' }).deployments?.deployer;
      if (deployer?.kind !== 'kubernetes' || !deployer.networkPolicy) throw new Error('the chart configures no kubernetes deployer with a NetworkPolicy');
      const { deployment } = buildManifests(revision, { namespace: deployer.namespace!, agentServerImage: 'berth/agent-server:0.1.0' });
      const policy = buildNetworkPolicy(revision, deployer.namespace!, deployer.networkPolicy, []);
      const policies = [ObjectSerializer.serialize(policy, 'V1NetworkPolicy') as NetworkPolicyObject];
      const pod = { namespace: deployer.namespace!, labels: deployment.spec!.template.metadata!.labels!, ip: '10.244.3.7' };
      const ports = Object.fromEntries(deployment.spec!.template.spec!.containers[0]!.ports!.map((p) => [p.name, p.containerPort]));
      return { objects, settings, policies, pod: { pod }, ports };
    }

    it("selects the deployer's pods in the deployments' namespace, on their metrics port, labelled with their deployment's id", async () => {
      const { objects, pod, ports } = await installed(ENABLED);
      const monitor = objects.find((o) => o.kind === 'PodMonitor' && o.metadata.name === 'berth-agents')!;
      expect(monitor.spec!.namespaceSelector).toEqual({ matchNames: [AGENTS_NS] });
      expect(pod.pod.namespace).toBe(AGENTS_NS);
      const selector = monitor.spec!.selector.matchLabels as Record<string, string>;
      expect(Object.entries(selector).filter(([key, value]) => pod.pod.labels[key] !== value)).toEqual([]);
      // Not the platform's pods (the other PodMonitor's), whose labels the selector does not match.
      expect(selector['app.kubernetes.io/name']).not.toBe('berth');
      expect(monitor.spec!.podTargetLabels).toEqual(['berth.dev/deployment-id']);
      // The series' own labels never replace the target's (the deployment id among them), and their number is bounded.
      expect(monitor.spec!.podMetricsEndpoints[0].honorLabels).toBeUndefined();
      expect(monitor.spec!.sampleLimit).toBe(10000);
      expect(pod.pod.labels['berth.dev/deployment-id']).toBe(revision.deploymentId);
      const [endpoint, ...others] = monitor.spec!.podMetricsEndpoints as Array<{ port: string; path: string }>;
      expect(others).toEqual([]);
      expect(endpoint).toMatchObject({ port: 'metrics', path: '/metrics' });
      expect(ports).toEqual({ http: 8000, metrics: 9464 });
    });

    it('lets the scraper the chart names reach the metrics port and nothing else; nobody without the PodMonitor', async () => {
      const { settings, policies, pod } = await installed(ENABLED);
      expect(settings).toMatchObject({
        BERTH_AGENT_METRICS_SCRAPER_NAMESPACE: 'monitoring',
        BERTH_AGENT_METRICS_SCRAPER_POD_LABELS: 'app.kubernetes.io/name=prometheus',
      });
      expect(connectionAllowed(policies, prometheus, pod, { port: 9464 })).toBe(true);
      expect(connectionAllowed(policies, prometheus, pod, { port: 8000 })).toBe(false);
      const gateway: Endpoint = {
        pod: {
          namespace: 'berth',
          labels: { 'app.kubernetes.io/name': 'berth', 'app.kubernetes.io/instance': 'berth', 'app.kubernetes.io/component': 'gateway' },
          ip: '10.244.0.5',
        },
      };
      expect(connectionAllowed(policies, gateway, pod, { port: 8000 })).toBe(true);
      expect(connectionAllowed(policies, gateway, pod, { port: 9464 })).toBe(false);

      // Another Prometheus, named by the values.
      const custom = await installed([
        ...ENABLED,
        '--set',
        'monitoring.agents.scraper.namespace=observability',
        '--set',
        'monitoring.agents.scraper.podLabels.app=vmagent',
      ]);
      const vmagent: Endpoint = { pod: { namespace: 'observability', labels: { app: 'vmagent', 'app.kubernetes.io/name': 'prometheus' }, ip: '10.244.7.8' } };
      expect(connectionAllowed(custom.policies, vmagent, custom.pod, { port: 9464 })).toBe(true);
      expect(connectionAllowed(custom.policies, prometheus, custom.pod, { port: 9464 })).toBe(false);

      for (const off of [[], [...ENABLED, '--set', 'monitoring.agents.enabled=false']]) {
        const { objects, settings: without, policies: closed, pod: agent } = await installed(off);
        expect(objects.filter((o) => o.metadata.name === 'berth-agents')).toEqual([]);
        expect(Object.keys(without).filter((key) => key.includes('SCRAPER'))).toEqual([]);
        expect(connectionAllowed(closed, prometheus, agent, { port: 9464 })).toBe(false);
      }
    });
  });

  it('has alerts that promtool accepts and that fire on recorded series as expected (and only then)', async () => {
    const rule = (await render(ENABLED)).find((o) => o.kind === 'PrometheusRule')!;
    const dir = await mkdtemp(join(tmpdir(), 'berth-alerts-'));
    try {
      await writeFile(join(dir, 'rules.yaml'), JSON.stringify(rule.spec));
      await copyFile(join(chart, 'tests', 'alerts.test.yaml'), join(dir, 'alerts.test.yaml'));
      const checked = await promtool(dir, ['check', 'rules', 'rules.yaml']);
      expect(checked).toMatchObject({ code: 0 });
      const alerts = (rule.spec as { groups: { rules: { alert: string }[] }[] }).groups.flatMap((g) => g.rules.map((r) => r.alert));
      expect(checked.output).toContain(`SUCCESS: ${alerts.length} rules found`);
      // Every alert has a case in which it fires.
      const [cases] = loadAllYaml(await readFile(join(dir, 'alerts.test.yaml'), 'utf8')) as {
        tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
      }[];
      const firing = new Set(cases!.tests.flatMap((t) => t.alert_rule_test.filter((a) => a.exp_alerts.length).map((a) => a.alertname)));
      expect(alerts.filter((alert) => !firing.has(alert))).toEqual([]);
      const tested = await promtool(dir, ['test', 'rules', 'alerts.test.yaml']);
      expect(tested).toEqual({ code: 0, output: expect.stringContaining('SUCCESS') });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('uses only series Berth exports in its dashboard and alerts', async () => {
    const registered = await registeredMetrics();
    const dashboard = await readFile(join(chart, 'files', 'grafana', 'berth.json'), 'utf8');
    const alerts = await readFile(join(chart, 'files', 'alerts.yaml'), 'utf8');
    const used = new Set([...seriesIn(dashboard), ...seriesIn(alerts)]);
    expect(used.size).toBeGreaterThan(10);
    expect([...used].filter((name) => !registered.has(name))).toEqual([]);
  });
});
