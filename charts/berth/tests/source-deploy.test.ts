/**
 * From `helm install` to a first `berth deploy`, the way docs/install-kubernetes.md walks an
 * operator through it, against libs/fake-kube: the chart is installed, the control plane and the
 * gateway (and the export worker, home of tracing projects) run as `berth serve --service …` processes with exactly the environment Kubernetes would
 * give their pods (the chart's ConfigMap and Secret), and `berth deploy` of a plain project folder
 * goes through upload, build, archive (a real S3 server) and deploy. The agent-server Deployment it
 * makes carries the artifact init container; that container's fetch, run with its own environment,
 * unpacks the very build, and the agent server run from it with the main container's environment
 * answers a run.
 *
 * Outside a cluster only addresses differ: the services listen on loopback ports, the cluster's
 * service names are mapped to those ports, and the control plane reaches the API by KUBECONFIG.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HeadObjectCommand } from '@aws-sdk/client-s3';
import { connectionAllowed, FakeKube, podEndpoint, type KubeObject, type NetworkPolicyObject } from '@berth/fake-kube';
import { freePort } from '@berth/local-stack';
import { createTestBucket, createTestDatabase, spawnTestChild, testS3, until, type TestChild, type TestDatabase } from '@berth/testing';
import { deploymentContainerEnv, writeKubeconfig } from './fake-cluster.js';
import { helm } from './helm-binary.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const chart = join(root, 'charts/berth');
const bin = join(root, 'cli/dist/bin.js');
const NS = 'berth';
const AGENT_IMAGE = 'registry.example.com/berth/agent-server';

let fake: FakeKube;
let testDb: TestDatabase;
let bucket: string;
let dir: string;
let kubeconfig: string;
const children: TestChild[] = [];

/** `node <script> <args>` with exactly `env` (plus PATH), its output kept for failure messages. */
function startProcess(script: string, args: string[], env: Record<string, string>): TestChild {
  const started = spawnTestChild(process.execPath, [script, ...args], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env } });
  children.push(started);
  return started;
}

function runProcess(script: string, args: string[], env: Record<string, string>, cwd = root): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [script, ...args],
      { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, timeout: 240_000, maxBuffer: 16 << 20 },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Waits until `url` answers 200, failing early (with its output) when the process exits. */
async function answering(url: string, started: TestChild): Promise<void> {
  await until(
    url,
    async () => {
      if (started.child.exitCode !== null) throw new Error(`the process exited (${started.child.exitCode}):\n${started.output()}`);
      return (
        (await fetch(url).then(
          (r) => r.status === 200,
          () => false,
        )) || undefined
      );
    },
    120_000,
    250,
  );
}

/** `env` with the cluster's service URLs (`from` → `to`) replaced by where those services listen here. */
function mapped(env: Record<string, string>, addresses: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).map(([name, value]) => [name, Object.entries(addresses).reduce((v, [from, to]) => v.replaceAll(from, to), value)]),
  );
}

beforeAll(async () => {
  [testDb, bucket, fake] = await Promise.all([
    createTestDatabase('chart_source_deploy'),
    createTestBucket('berth-revisions'),
    FakeKube.start({ namespaces: ['default', NS], rollouts: { delayMs: 50 } }),
  ]);
  dir = await mkdtemp(join(tmpdir(), 'berth-chart-deploy-'));
  kubeconfig = await writeKubeconfig(dir, fake.url, NS);
}, 60_000);

afterAll(async () => {
  await Promise.all(children.map((c) => c.stop()));
  await fake?.close();
  await testDb?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

describe('helm install, then berth deploy of a folder (libs/fake-kube)', () => {
  it('builds the folder, keeps the build in the bucket, and runs it as an agent-server Deployment whose init container fetches it', async () => {
    const s3 = testS3();
    const install = await helm(
      [
        'install',
        'berth',
        chart,
        '--namespace',
        NS,
        '--set',
        `postgres.url=${testDb.url}`,
        '--set',
        `objectStorage.bucket=${bucket}`,
        '--set',
        `objectStorage.endpoint=${s3.endpoint}`,
        '--set',
        'objectStorage.forcePathStyle=true',
        '--set',
        `objectStorage.accessKeyId=${s3.accessKeyId}`,
        '--set',
        `objectStorage.secretAccessKey=${s3.secretAccessKey}`,
        '--set',
        `agentServerImage.repository=${AGENT_IMAGE}`,
        '--set',
        'deployments.imagePullSecrets[0]=registry-credentials',
      ],
      { KUBECONFIG: kubeconfig },
    );
    expect({ code: install.code, stderr: install.stderr }).toEqual({ code: 0, stderr: '' });

    // The services, with their pods' environment; only where they listen is this machine's.
    const [grpcPort, healthPort, artifactsPort, gatewayPort, exportGrpcPort, exportHealthPort] = await Promise.all([1, 2, 3, 4, 5, 6].map(() => freePort()));
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    const addresses = {
      [`http://berth-control-plane.${NS}.svc:8092`]: `http://127.0.0.1:${artifactsPort}`,
      [`http://berth-gateway.${NS}.svc:80`]: gatewayUrl,
    };
    const controlPlaneEnv = deploymentContainerEnv(fake.store, NS, 'berth-control-plane', 'control-plane');
    expect(controlPlaneEnv).toMatchObject({ BERTH_DEPLOYER: 'kubernetes', BERTH_S3_BUCKET: bucket, BERTH_AGENT_SERVER_IMAGE: `${AGENT_IMAGE}:0.1.0` });
    const controlPlane = startProcess(bin, ['serve', '--service', 'control-plane'], {
      ...controlPlaneEnv,
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(grpcPort),
      BERTH_HEALTH_HOST: '127.0.0.1',
      BERTH_HEALTH_PORT: String(healthPort),
      BERTH_ARTIFACTS_PORT: String(artifactsPort),
      BERTH_ARTIFACTS_DIR: join(dir, 'control-plane/artifacts'),
      HOME: join(dir, 'control-plane/home'),
      KUBECONFIG: kubeconfig,
    });
    // Deploys name a tracing project, which lives in the export worker.
    const exportWorker = startProcess(bin, ['serve', '--service', 'export-worker'], {
      ...deploymentContainerEnv(fake.store, NS, 'berth-export-worker', 'export-worker'),
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(exportGrpcPort),
      BERTH_HEALTH_HOST: '127.0.0.1',
      BERTH_HEALTH_PORT: String(exportHealthPort),
    });
    const gatewayEnv = deploymentContainerEnv(fake.store, NS, 'berth-gateway', 'gateway');
    const gateway = startProcess(bin, ['serve', '--service', 'gateway'], {
      ...gatewayEnv,
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: String(gatewayPort),
      CONTROL_PLANE_GRPC_ADDRESS: `127.0.0.1:${grpcPort}`,
      EXPORT_WORKER_GRPC_ADDRESS: `127.0.0.1:${exportGrpcPort}`,
      BERTH_PUBLIC_URL: gatewayUrl,
    });
    await Promise.all([
      answering(`http://127.0.0.1:${healthPort}/readyz`, controlPlane),
      answering(`http://127.0.0.1:${exportHealthPort}/readyz`, exportWorker),
      answering(`${gatewayUrl}/healthz`, gateway),
    ]);

    // NOTES.txt: the bootstrap key comes from `berth keys bootstrap` in the gateway's pod.
    const bootstrap = await runProcess(bin, ['keys', 'bootstrap'], { ...gatewayEnv, HOME: dir });
    expect(bootstrap.code).toBe(0);
    const apiKey = bootstrap.stdout.trim();

    const project = join(dir, 'echo-agent');
    await cp(join(root, 'examples/echo-agent'), project, { recursive: true, filter: (path) => !path.includes('node_modules') });
    const user = {
      HOME: join(dir, 'user'),
      XDG_CONFIG_HOME: join(dir, 'user/config'),
      BERTH_STATE_DIR: join(dir, 'user/state'),
      BERTH_HOST_URL: gatewayUrl,
      BERTH_API_KEY: apiKey,
    };
    const deploy = await runProcess(bin, ['deploy'], user, project);
    expect({ code: deploy.code, stderr: deploy.stderr, log: deploy.code ? deploy.stdout + controlPlane.output() : '' }).toEqual({
      code: 0,
      stderr: '',
      log: '',
    });
    expect(deploy.stdout).toMatch(/Revision \S+: DEPLOYED/);
    const deploymentId = /\/d\/([0-9a-f-]{36})$/m.exec(deploy.stdout)![1]!;

    // The agent server's Deployment: the agent-server image, the artifact init container, no token.
    const [agent] = fake.store.list('apps/deployments', NS, { labelSelector: `berth.dev/deployment-id=${deploymentId}` });
    expect(agent).toBeDefined();
    const pod = (agent as KubeObject & { spec: { template: { spec: Record<string, unknown> } } }).spec.template.spec as {
      initContainers: { name: string; image: string; volumeMounts: { name: string; mountPath: string }[] }[];
      containers: {
        name: string;
        image: string;
        volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
        ports: { name: string; containerPort: number }[];
      }[];
      volumes: { name: string; emptyDir?: unknown }[];
      imagePullSecrets: unknown;
      automountServiceAccountToken: boolean;
    };
    const revisionId = (agent!.metadata.annotations ?? {})['berth.dev/revision-id']!;
    expect(pod.initContainers.map((c) => [c.name, c.image])).toEqual([['fetch-artifact', `${AGENT_IMAGE}:0.1.0`]]);
    expect(pod.containers[0]!.image).toBe(`${AGENT_IMAGE}:0.1.0`);
    expect(pod.containers[0]!.volumeMounts).toContainEqual({ name: 'project', mountPath: '/srv/project', readOnly: true });
    expect(pod.volumes.find((v) => v.name === 'project')?.emptyDir).toBeDefined();
    expect(pod.imagePullSecrets).toEqual([{ name: 'registry-credentials' }]);
    expect(pod.automountServiceAccountToken).toBe(false);
    const fetchEnv = deploymentContainerEnv(fake.store, NS, agent!.metadata.name!, 'fetch-artifact');
    expect(fetchEnv['BERTH_ARTIFACT_URL']).toBe(`http://berth-control-plane.${NS}.svc:8092/v1/artifacts/${revisionId}`);
    // The init container gets its one credential, never storage keys or the platform's settings.
    expect(Object.keys(fetchEnv).sort()).toEqual(['BERTH_ARTIFACT_CREDENTIAL', 'BERTH_ARTIFACT_DIR', 'BERTH_ARTIFACT_SHA256', 'BERTH_ARTIFACT_URL']);

    // Its NetworkPolicy, from the chart's settings, against the pods of the chart's own Deployments:
    // the gateway reaches it; it reaches the gateway, the artifact endpoint and its database, and
    // none of the platform's internal services.
    const policies = fake.store.list('networking.k8s.io/networkpolicies', NS) as unknown as NetworkPolicyObject[];
    expect(policies.map((p) => p.metadata?.name)).toEqual([agent!.metadata.name]);
    const platformPod = (component: string) => {
      const [pod] = fake.store.list('pods', NS, { labelSelector: `app.kubernetes.io/instance=berth,app.kubernetes.io/component=${component}` });
      expect({ component, pod: pod !== undefined }).toEqual({ component, pod: true });
      return podEndpoint(pod!);
    };
    const [agentPod] = fake.store.list('pods', NS, { labelSelector: `berth.dev/deployment-id=${deploymentId}` }).map((p) => podEndpoint(p));
    const database = new URL(testDb.url);
    expect(connectionAllowed(policies, platformPod('gateway'), agentPod!, { port: 8000 })).toBe(true);
    expect(connectionAllowed(policies, agentPod!, platformPod('gateway'), { port: 8080 })).toBe(true);
    // (The artifact endpoint's port is where it listens: its pod's port in a cluster, a free one here.)
    expect(connectionAllowed(policies, agentPod!, platformPod('control-plane'), { port: artifactsPort! })).toBe(true);
    expect(connectionAllowed(policies, agentPod!, { ip: database.hostname.replace(/^\[|\]$/g, '') }, { port: Number(database.port) })).toBe(true);
    for (const component of ['control-plane', 'sandbox-manager', 'export-worker']) {
      expect({ component, allowed: connectionAllowed(policies, agentPod!, platformPod(component), { port: 50051 }) }).toEqual({ component, allowed: false });
    }
    expect(connectionAllowed(policies, platformPod('control-plane'), agentPod!, { port: 8000 })).toBe(false);
    expect(connectionAllowed(policies, agentPod!, { ip: '169.254.169.254' }, { port: 80 })).toBe(false);

    // The build is in the bucket under the revision.
    const client = s3.client();
    try {
      const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: `revisions/${deploymentId}/${revisionId}.tar.gz` }));
      expect(head.ContentLength).toBeGreaterThan(1000);
    } finally {
      client.destroy();
    }

    // What the pod does: the init container's fetch, then the agent server on what it unpacked.
    const unpacked = join(dir, 'pod/srv-project');
    const fetched = await runProcess(
      join(root, 'services/agent-runtime/dist/fetch-artifact.js'),
      [],
      mapped({ ...fetchEnv, BERTH_ARTIFACT_DIR: unpacked }, addresses),
    );
    expect({ code: fetched.code, stderr: fetched.stderr }).toMatchObject({ code: 0 });
    expect(JSON.parse(await readFile(join(unpacked, 'langgraph.json'), 'utf8'))).toMatchObject({ graphs: { echo: expect.anything() } });
    const serverEnv = deploymentContainerEnv(fake.store, NS, agent!.metadata.name!, 'agent-server');
    expect(serverEnv['BERTH_AGENT_CONFIG']).toBe('/srv/project/langgraph.json');
    // Its metrics on the pod's port named `metrics`, on every interface (a scraper reaches the pod's IP).
    const ports = (pod.containers[0] as { ports?: { name: string; containerPort: number }[] }).ports ?? [];
    expect([serverEnv['BERTH_METRICS_PORT'], serverEnv['BERTH_METRICS_HOST']]).toEqual([
      String(ports.find((p) => p.name === 'metrics')?.containerPort),
      '0.0.0.0',
    ]);
    const [agentPort, metricsPort] = await Promise.all([freePort(), freePort()]);
    const server = startProcess(join(root, 'services/agent-runtime/dist/serve.js'), [], {
      ...mapped(serverEnv, addresses),
      BERTH_AGENT_CONFIG: join(unpacked, 'langgraph.json'),
      HOST: '127.0.0.1',
      PORT: String(agentPort),
      BERTH_METRICS_HOST: '127.0.0.1',
      BERTH_METRICS_PORT: String(metricsPort),
      HOME: join(dir, 'pod/home'),
    });
    const credential = { 'x-berth-deployment-credential': serverEnv['BERTH_DEPLOYMENT_CREDENTIAL']! };
    await until(
      'the agent server',
      async () => {
        if (server.child.exitCode !== null) throw new Error(`the agent server exited (${server.child.exitCode}):\n${server.output()}`);
        return (
          (await fetch(`http://127.0.0.1:${agentPort}/ok`, { headers: credential }).then(
            (r) => r.ok,
            () => false,
          )) || undefined
        );
      },
      120_000,
      250,
    );
    const response = await fetch(`http://127.0.0.1:${agentPort}/runs/wait`, {
      method: 'POST',
      headers: { ...credential, 'content-type': 'application/json' },
      body: JSON.stringify({ assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'from the cluster' }] } }),
    });
    expect(((await response.json()) as { messages: { content: string }[] }).messages.at(-1)?.content).toBe('echo: from the cluster');
    // The run shows in its metrics, and they are not on the port the gateway proxies to.
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/^berth_agent_runs_finished_total\{status="success"\} 1$/m);
    expect((await fetch(`http://127.0.0.1:${agentPort}/metrics`, { headers: credential })).status).toBe(404);
    await server.stop();

    // Deleting the deployment removes its objects from the cluster.
    expect((await runProcess(bin, ['deploy', 'delete', deploymentId, '--yes'], user, project)).code).toBe(0);
    await until(
      'the agent objects are gone',
      async () => fake.store.list('apps/deployments', NS, { labelSelector: `berth.dev/deployment-id=${deploymentId}` }).length === 0 || undefined,
      30_000,
      200,
    );
    await until('its NetworkPolicy is gone', async () => fake.store.list('networking.k8s.io/networkpolicies', NS).length === 0 || undefined, 30_000, 200);
  }, 400_000);
});
