/**
 * The chart's monitoring objects (monitoring.*): rendered only when enabled, the gateway's metrics port
 * on no Service; the alerts, as
 * rendered, pass `promtool check rules` and fire — or stay quiet — on recorded series as
 * alerts.test.yaml expects (`promtool test rules`); the dashboard and the alerts use only series
 * Berth's services export (or Prometheus' and the kubelet's own).
 */
import { describe, expect, it } from '@jest/globals';
import { loadAllYaml } from '@kubernetes/client-node';
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
    expect(kinds(objects).sort()).toEqual(['ConfigMap berth', 'ConfigMap berth-dashboard', 'PodMonitor berth', 'PrometheusRule berth']);
    const monitor = objects.find((o) => o.kind === 'PodMonitor')!;
    expect(monitor.metadata.labels).toMatchObject({ release: 'prometheus' });
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
