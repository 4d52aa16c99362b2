/**
 * The chart as helm sees it: `helm lint`, `helm template` against golden files (the default values
 * with only the required database URL, and examples/values-production.yaml; UPDATE_GOLDEN=1
 * rewrites them), values the schema must refuse with a message naming the value, and invariants
 * every rendered workload must keep (restrictive securityContext, probes, resources).
 */
import { describe, expect, it } from '@jest/globals';
import { loadAllYaml } from '@kubernetes/client-node';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { helm } from './helm-binary.js';

const chart = fileURLToPath(new URL('..', import.meta.url));
const goldenDir = fileURLToPath(new URL('./__golden__', import.meta.url));
const production = join(chart, 'examples', 'values-production.yaml');
const REQUIRED = ['--set', 'postgres.url=postgres://berth:secret@postgres.db.svc:5432/berth'];
const UPDATE_GOLDEN = process.env.UPDATE_GOLDEN === '1';

/** `helm template` of the chart as release `berth` in namespace `berth`; throws with helm's stderr on failure. */
async function render(args: string[]): Promise<string> {
  const result = await helm(['template', 'berth', chart, '--namespace', 'berth', ...args]);
  if (result.code !== 0) throw new Error(`helm template failed:\n${result.stderr}`);
  return result.stdout;
}

/** Generated secrets (and the checksum over them) differ at every render: golden files show a placeholder. */
function withoutGenerated(manifests: string): string {
  return manifests
    .replace(/^(\s+(?:BERTH_SECRET_KEY|BERTH_INTERNAL_TOKEN): )"[^"]*"$/gm, '$1"<generated>"')
    .replace(/^(\s+checksum\/secret: ).*$/gm, '$1<generated>');
}

async function matchesGolden(name: string, text: string): Promise<void> {
  const file = join(goldenDir, name);
  if (UPDATE_GOLDEN) {
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, text);
  }
  if (!existsSync(file)) throw new Error(`no golden file ${file}: run the test with UPDATE_GOLDEN=1 to write it`);
  // On a difference: review it, then UPDATE_GOLDEN=1 rewrites the file.
  expect(text).toBe(await readFile(file, 'utf8'));
}

interface KubeObject {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: Record<string, unknown>;
}

describe('charts/berth', () => {
  it('passes helm lint with the default and the production values', async () => {
    for (const args of [REQUIRED, ['-f', production]]) {
      const result = await helm(['lint', chart, '--strict', ...args]);
      expect({ code: result.code, output: result.stdout + result.stderr }).toMatchObject({ code: 0 });
    }
  });

  it('renders the default values as in its golden file', async () => {
    await matchesGolden('default.yaml', withoutGenerated(await render(REQUIRED)));
  });

  it('renders the production values as in its golden file', async () => {
    await matchesGolden('production.yaml', await render(['-f', production]));
  });

  it.each([
    ['no database', [], "at '/postgres/url': minLength"],
    ['a negative replica count', [...REQUIRED, '--set', 'gateway.replicas=-1'], "at '/gateway/replicas': minimum: got -1, want 0"],
    ['a misspelled setting', [...REQUIRED, '--set', 'gateway.replica=2'], "additional properties 'replica' not allowed"],
    [
      'an unknown pull policy',
      [...REQUIRED, '--set', 'image.pullPolicy=Sometimes'],
      "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'",
    ],
    ['a bad resource quantity', [...REQUIRED, '--set', 'controlPlane.resources.requests.memory=lots'], "at '/controlPlane/resources/requests/memory'"],
    [
      'a writable root filesystem',
      [...REQUIRED, '--set', 'securityContext.readOnlyRootFilesystem=false'],
      "at '/securityContext/readOnlyRootFilesystem': value must be true",
    ],
    ['pods running as root', [...REQUIRED, '--set', 'podSecurityContext.runAsNonRoot=false'], "at '/podSecurityContext/runAsNonRoot': value must be true"],
    ['an ingress without a host', [...REQUIRED, '--set', 'ingress.enabled=true'], "at '/ingress/host'"],
    ['an unknown sandbox driver', [...REQUIRED, '--set', 'sandboxes.driver=docker'], "at '/sandboxes/driver': value must be one of 'kubernetes', 'none'"],
    ['a secret key that is not 32 bytes of base64', [...REQUIRED, '--set', 'secrets.secretKey=short'], "at '/secrets/secretKey'"],
    [
      'a pull secret name that is not an object name',
      [...REQUIRED, '--set', 'deployments.imagePullSecrets[0]=My_Secret'],
      "at '/deployments/imagePullSecrets/0'",
    ],
    ['a database URL that is not postgres', [...REQUIRED, '--set', 'postgres.url=mysql://db/berth'], "at '/postgres/url'"],
    ['a private egress range that is not a CIDR', [...REQUIRED, '--set', 'deployments.privateEgress[0]=ten/8'], "at '/deployments/privateEgress/0'"],
    ['a metrics scraper in no namespace', [...REQUIRED, '--set', 'monitoring.agents.scraper.namespace='], "at '/monitoring/agents/scraper/namespace'"],
    [
      'a metrics scraper of any pod (no pod labels)',
      [...REQUIRED, '--set', 'monitoring.agents.scraper.podLabels.app\\.kubernetes\\.io/name=null'],
      "at '/monitoring/agents/scraper/podLabels': minProperties: got 0, want 1",
    ],
    [
      'a network policy switch that is not a boolean',
      [...REQUIRED, '--set-string', 'deployments.networkPolicy.enabled=maybe'],
      "at '/deployments/networkPolicy/enabled'",
    ],
  ])('refuses %s, naming the value', async (_what, args, message) => {
    const result = await helm(['template', 'berth', chart, ...args]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("values don't meet the specifications of the schema");
    expect(result.stderr).toContain(message);
  });

  it.each([
    ['default', REQUIRED],
    ['production', ['-f', production]],
  ])('renders with the %s values only workloads that are locked down, probed and sized', async (_name, args) => {
    const objects = loadAllYaml(await render(args)).filter(Boolean) as KubeObject[];
    const deployments = objects.filter((o) => o.kind === 'Deployment');
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual(['berth-control-plane', 'berth-export-worker', 'berth-gateway', 'berth-sandbox-manager']);
    for (const deployment of deployments) {
      const pod = (deployment as unknown as { spec: { template: { spec: import('@kubernetes/client-node').V1PodSpec } } }).spec.template.spec;
      expect({ name: deployment.metadata.name, runAsNonRoot: pod.securityContext?.runAsNonRoot, seccomp: pod.securityContext?.seccompProfile?.type }).toEqual({
        name: deployment.metadata.name,
        runAsNonRoot: true,
        seccomp: 'RuntimeDefault',
      });
      for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
        const where = `${deployment.metadata.name}/${container.name}`;
        expect({ where, ...container.securityContext }).toMatchObject({
          where,
          runAsNonRoot: true,
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
          capabilities: { drop: ['ALL'] },
          seccompProfile: { type: 'RuntimeDefault' },
        });
        expect({ where, add: container.securityContext?.capabilities?.add }).toEqual({ where, add: undefined });
        expect({ where, liveness: container.livenessProbe?.httpGet?.path, readiness: container.readinessProbe?.httpGet?.path }).toEqual({
          where,
          liveness: '/healthz',
          readiness: '/readyz',
        });
        expect({
          where,
          cpu: container.resources?.requests?.cpu,
          memory: container.resources?.requests?.memory,
          memoryLimit: container.resources?.limits?.memory,
        }).toEqual({
          where,
          cpu: expect.any(String),
          memory: expect.any(String),
          memoryLimit: expect.any(String),
        });
        expect(container.args?.slice(0, 2)).toEqual(['serve', '--service']);
      }
    }
    // Every service has a PodDisruptionBudget and a Service; only the API callers get a token.
    for (const kind of ['PodDisruptionBudget', 'Service']) {
      expect(
        objects
          .filter((o) => o.kind === kind)
          .map((o) => o.metadata.name)
          .sort(),
      ).toEqual(deployments.map((d) => d.metadata.name).sort());
    }
    const tokens = Object.fromEntries(
      deployments.map((d) => [
        d.metadata.name,
        (d.spec as { template: { spec: { automountServiceAccountToken?: boolean } } }).template.spec.automountServiceAccountToken,
      ]),
    );
    expect(tokens).toEqual({ 'berth-control-plane': true, 'berth-sandbox-manager': true, 'berth-gateway': false, 'berth-export-worker': false });
  });

  it("names in the agent pods' NetworkPolicy settings exactly the pods of its gateway and control plane, and turns it off on request", async () => {
    for (const args of [REQUIRED, ['-f', production]]) {
      const objects = loadAllYaml(await render(args)).filter(Boolean) as Array<KubeObject & { data?: Record<string, string> }>;
      const settings = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'berth')!.data!;
      expect(settings['BERTH_DEPLOYMENT_NETWORK_POLICY']).toBe('on');
      expect(settings['BERTH_PLATFORM_NAMESPACE']).toBe('berth');
      const podLabels = Object.fromEntries(
        objects
          .filter((o) => o.kind === 'Deployment')
          .map((d) => [d.metadata.name, (d.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels]),
      );
      for (const [setting, selected] of [
        ['BERTH_GATEWAY_POD_LABELS', 'berth-gateway'],
        ['BERTH_CONTROL_PLANE_POD_LABELS', 'berth-control-plane'],
      ]) {
        const wanted = Object.fromEntries(settings[setting!]!.split(',').map((item) => item.split('=') as [string, string]));
        const matching = Object.entries(podLabels)
          .filter(([, labels]) => Object.entries(wanted).every(([k, v]) => labels[k] === v))
          .map(([name]) => name);
        expect({ setting, matching }).toEqual({ setting, matching: [selected] });
      }
      // The ports the policy opens are the pods' own: the gateway's HTTP port, the artifact endpoint's.
      const containerPort = (deployment: string, name: string) => {
        const pod = (
          objects.find((o) => o.kind === 'Deployment' && o.metadata.name === deployment)!.spec as {
            template: { spec: import('@kubernetes/client-node').V1PodSpec };
          }
        ).template.spec;
        return String(pod.containers[0]!.ports!.find((p) => p.name === name)!.containerPort);
      };
      expect([settings['GATEWAY_PORT'], settings['BERTH_ARTIFACTS_PORT']]).toEqual([
        containerPort('berth-gateway', 'http'),
        containerPort('berth-control-plane', 'artifacts'),
      ]);
    }
    const policySetting = async (args: string[]) =>
      (loadAllYaml(await render([...REQUIRED, ...args])).filter(Boolean) as Array<KubeObject & { data?: Record<string, string> }>).find(
        (o) => o.kind === 'ConfigMap',
      )!.data!['BERTH_DEPLOYMENT_NETWORK_POLICY'];
    expect(await policySetting(['--set', 'deployments.networkPolicy.enabled=false'])).toBe('off');
    // `helm upgrade --reuse-values` of a release from before the setting: the values have none.
    expect(await policySetting(['--set', 'deployments.networkPolicy=null'])).toBe('on');
  });
});
