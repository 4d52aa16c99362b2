/**
 * A rolling `helm upgrade` keeps Berth serving, on libs/fake-kube: the chart is installed, its pods
 * run as `berth serve --service …` processes (process-pods.ts: exactly their pods' environment) on
 * a kubelet that probes them and stops them as upstream's does (preStop hook, SIGTERM, SIGKILL at
 * the end of the grace period), the Deployment controller steps each rollout by the chart's
 * strategy, and every connection to a Service goes through a kube-proxy that learns of endpoint
 * changes late, as on a real cluster. An upgrade that changes the image tag rolls every
 * Deployment; a client with an API key calls the gateway throughout (`/v1/me`, and the deployments
 * list, which the gateway asks the control plane for over gRPC) and sees no failure; each new pod
 * started (and ran its migrations) while its Deployment's old pods still served, every old process
 * ended by itself after SIGTERM, and the traffic moved to the new pods.
 *
 * Pod time is scaled (`SECOND_MS`): probe periods, the preStop sleep and grace periods of the
 * chart pass 4 times faster; the processes themselves run in real time.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FakeKube, Kubelet, podReady, templateHash, type KubeObject } from '@berth/fake-kube';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { deploymentContainerEnv, writeKubeconfig } from './fake-cluster.js';
import { helm } from './helm-binary.js';
import { ProcessPods } from './process-pods.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const chart = join(root, 'charts/berth');
const bin = join(root, 'cli/dist/bin.js');
const NS = 'berth';
const COMPONENTS = ['gateway', 'control-plane', 'export-worker', 'sandbox-manager'];
/** One second of the pod spec, here. */
const SECOND_MS = 250;
/** How late kube-proxies learn of endpoint changes: 2 seconds of pod time. */
const PROXY_SYNC_MS = 2 * SECOND_MS;

let fake: FakeKube;
let testDb: TestDatabase;
let dir: string;
let kubeconfig: string;
let pods: ProcessPods;
let kubelet: Kubelet;

beforeAll(async () => {
  [testDb, fake] = await Promise.all([
    createTestDatabase('chart_rolling_upgrade'),
    FakeKube.start({ namespaces: ['default', NS], rollouts: { rollingUpdate: true } }),
  ]);
  dir = await mkdtemp(join(tmpdir(), 'berth-chart-roll-'));
  kubeconfig = await writeKubeconfig(dir, fake.url, NS);
  pods = new ProcessPods({ store: fake.store, namespace: NS, bin, dir, kubeconfig, proxySyncMs: PROXY_SYNC_MS });
  kubelet = new Kubelet(fake.store, { runtime: pods, selector: 'app.kubernetes.io/instance=berth', secondMs: SECOND_MS });
}, 60_000);

afterAll(async () => {
  await kubelet?.close();
  await pods?.close();
  await fake?.close();
  await testDb?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

const deploymentOf = (component: string) => fake.store.get('apps/deployments', NS, `berth-${component}`);
const componentPods = (component: string) => fake.store.list('pods', NS, { labelSelector: `app.kubernetes.io/component=${component}` });
const hashOf = (deployment: KubeObject) => templateHash((deployment['spec'] as { template: unknown }).template);

/** Every Deployment runs its current template only, all Ready, nothing left terminating. */
function rolledOut(): boolean {
  return COMPONENTS.every((component) => {
    const deployment = deploymentOf(component);
    const replicas = (deployment['spec'] as { replicas: number }).replicas;
    const current = componentPods(component);
    return (
      current.length === replicas &&
      current.every((p) => podReady(p) && !p.metadata.deletionTimestamp && p.metadata.labels?.['pod-template-hash'] === hashOf(deployment))
    );
  });
}

/** What the platform's processes printed, for failure messages. */
const logs = () => [...pods.processes].map(([name, p]) => `--- ${name}\n${p.output().slice(-3000)}`).join('\n');

function runCli(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

interface Answer {
  path: string;
  at: number;
  status?: number;
  error?: string;
}

/** Calls the gateway, through its Service, until `stop()`: two clients at once, each keeping its connection alive. */
function callThroughout(gateway: string, apiKey: string): { answers: Answer[]; stop: () => Promise<void> } {
  const answers: Answer[] = [];
  let running = true;
  const client = async (paths: string[]) => {
    for (let n = 0; running; n++) {
      const path = paths[n % paths.length]!;
      const answer: Answer = { path, at: Date.now() };
      try {
        const res = await fetch(`http://${gateway}${path}`, { headers: { 'x-api-key': apiKey } });
        answer.status = res.status;
        const body = await res.text();
        if (res.status !== 200) answer.error = body.slice(0, 300);
      } catch (error) {
        answer.error = `${String(error)} (${String((error as { cause?: unknown }).cause)})`;
      }
      answers.push(answer);
    }
  };
  const done = Promise.all([client(['/v1/me', '/v2/deployments']), client(['/v2/deployments', '/v1/me'])]);
  return {
    answers,
    stop: async () => {
      running = false;
      await done;
    },
  };
}

describe('helm upgrade rolls the platform while it serves (libs/fake-kube)', () => {
  it('a client calling through the whole roll sees no failure; new pods start while the old serve, and the old ones drain and exit', async () => {
    const values = [
      '--set',
      `postgres.url=${testDb.url}`,
      // One replica of the services the client does not call: fewer processes, still rolled.
      '--set',
      'exportWorker.replicas=1',
      '--set',
      'sandboxManager.replicas=1',
      '--set',
      'sandboxes.driver=none',
    ];
    const install = await helm(['install', 'berth', chart, '--namespace', NS, ...values], { KUBECONFIG: kubeconfig });
    expect({ code: install.code, stderr: install.stderr }).toEqual({ code: 0, stderr: '' });
    // Disruption budgets for the services with more than one pod: a budget keeping a single pod would block node drains.
    expect(fake.store.list('policy/poddisruptionbudgets', NS).map((b) => b.metadata.name)).toEqual(['berth-control-plane', 'berth-gateway']);
    await until('the platform serves', async () => rolledOut() || undefined, 180_000, 100).catch((error: unknown) => {
      throw new Error(`${String(error)}\n${logs()}`);
    });

    // NOTES.txt: the bootstrap key comes from `berth keys bootstrap` in the gateway's pod.
    const bootstrap = await runCli(['keys', 'bootstrap'], { ...deploymentContainerEnv(fake.store, NS, 'berth-gateway', 'gateway'), HOME: dir });
    expect({ code: bootstrap.code, stderr: bootstrap.stderr }).toEqual({ code: 0, stderr: '' });
    const gateway = pods.proxies.get('berth-gateway:80')!;
    const calls = callThroughout(gateway.address, bootstrap.stdout.trim());
    await until('answers before the upgrade', async () => calls.answers.length >= 10 || undefined, 30_000, 20);

    // Ready pods of each Deployment (not terminating) after every change of the pods, and when each process started.
    const oldPods = new Set(fake.store.list('pods', NS).map((p) => p.metadata.name!));
    const oldHashes = new Map(COMPONENTS.map((c) => [c, hashOf(deploymentOf(c))]));
    const fewestReady = new Map<string, number>(COMPONENTS.map((c) => [c, Infinity]));
    /** For each new pod: how many old pods of its Deployment were Ready when it was started. */
    const oldReadyAtStart = new Map<string, number>();
    const unsubscribe = fake.store.subscribe((event) => {
      if (event.resource.resource !== 'pods') return;
      const component = event.object.metadata.labels?.['app.kubernetes.io/component'];
      if (!component || !fewestReady.has(component)) return;
      const current = componentPods(component);
      const ready = current.filter((p) => podReady(p) && !p.metadata.deletionTimestamp).length;
      fewestReady.set(component, Math.min(fewestReady.get(component)!, ready));
      const started = event.object;
      if (!oldPods.has(started.metadata.name!) && (started['status'] as { podIP?: string }).podIP && !oldReadyAtStart.has(started.metadata.name!)) {
        oldReadyAtStart.set(
          started.metadata.name!,
          current.filter((p) => p.metadata.labels?.['pod-template-hash'] === oldHashes.get(component) && podReady(p) && !p.metadata.deletionTimestamp).length,
        );
      }
    });

    const upgrade = await helm(['upgrade', 'berth', chart, '--namespace', NS, '--reuse-values', '--set', 'image.tag=0.1.1'], { KUBECONFIG: kubeconfig });
    expect({ code: upgrade.code, stderr: upgrade.stderr }).toEqual({ code: 0, stderr: '' });
    for (const component of COMPONENTS) expect(hashOf(deploymentOf(component))).not.toBe(oldHashes.get(component));
    await until(
      'the roll is over',
      async () => (rolledOut() && [...oldPods].every((name) => !fake.store.find('pods', NS, name))) || undefined,
      240_000,
      100,
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\n${logs()}`);
    });
    unsubscribe();
    const upgradedAt = Date.now();
    await until('answers after the roll', async () => calls.answers.filter((a) => a.at > upgradedAt).length >= 10 || undefined, 30_000, 20);
    await calls.stop();

    // The client: no failure, before, during or after.
    expect(calls.answers.filter((a) => a.status !== 200)).toEqual([]);
    expect(calls.answers.length).toBeGreaterThan(40);
    // Each Deployment kept its replicas Ready throughout (maxUnavailable 0), and every new pod
    // started (migrating its schemas) while old pods of its Deployment were still serving.
    const replicas = Object.fromEntries(COMPONENTS.map((c) => [c, (deploymentOf(c)['spec'] as { replicas: number }).replicas]));
    expect(Object.fromEntries(fewestReady)).toEqual(replicas);
    expect(oldReadyAtStart.size).toBe(Object.values(replicas).reduce((a, b) => a + b, 0));
    expect([...oldReadyAtStart].filter(([, ready]) => ready === 0)).toEqual([]);
    // Every old process stopped by itself once told to (SIGTERM), within its grace period.
    const oldExits = pods.exits.filter((e) => oldPods.has(e.pod));
    expect(oldExits.map((e) => ({ pod: e.pod, code: e.code, signal: e.signal })).sort((a, b) => a.pod.localeCompare(b.pod))).toEqual(
      [...oldPods].sort().map((pod) => ({ pod, code: 0, signal: null })),
    );
    // The traffic moved: the client reached old and new gateways, the gateways new control planes.
    const reached = (service: string) => new Set(pods.proxies.get(service)!.connections.map((c) => (oldPods.has(c.pod) ? 'old' : 'new')));
    expect(reached('berth-gateway:80')).toEqual(new Set(['old', 'new']));
    expect(reached('berth-control-plane:50051')).toEqual(new Set(['old', 'new']));
  }, 600_000);
});
