// Rolling updates on the fake: pods deleted gracefully, rollouts stepped by the strategy as
// upstream's controller steps them, a kubelet running the test's servers (probes, preStop, SIGTERM,
// SIGKILL after the grace period) and a kube-proxy that follows the endpoints late.
import { afterEach, describe, expect, it } from '@jest/globals';
import { createServer, request, type Server } from 'node:http';
import { until } from '@berth/testing';
import { FakeKube, Kubelet, ServiceProxy, podReady, serviceEndpoints, type KubeObject, type PodRuntime, type RunningPod } from './index.js';

const NS = 'default';
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function fakeKube(rollingUpdate = true): Promise<FakeKube> {
  const fake = await FakeKube.start({ rollouts: { rollingUpdate }, pods: { delayMs: 20 } });
  cleanups.push(() => fake.close());
  return fake;
}

function deployment(name: string, version: string, strategy: Record<string, unknown>, podSpec: Record<string, unknown> = {}): KubeObject {
  return {
    metadata: { name },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: name } },
      strategy,
      template: {
        metadata: { labels: { app: name }, annotations: { version } },
        spec: { containers: [{ name: 'main', image: `web:${version}`, ports: [{ name: 'http', containerPort: 8080 }] }], ...podSpec },
      },
    },
  };
}

const bump = (fake: FakeKube, name: string, version: string) => {
  const current = fake.store.get('apps/deployments', NS, name);
  const spec = current['spec'] as { template: { metadata: { annotations: Record<string, string> }; spec: { containers: Array<{ image: string }> } } };
  spec.template.metadata.annotations['version'] = version;
  spec.template.spec.containers[0]!.image = `web:${version}`;
  fake.store.replace('apps/deployments', NS, name, current);
};

const versionOf = (pod: KubeObject) => pod.metadata.annotations?.['version'];

describe('graceful pod deletion', () => {
  it('keeps a pod bound to a node, terminating, until it is deleted with a grace period of 0; an unbound pod goes at once', async () => {
    const fake = await fakeKube();
    const spec = { containers: [{ name: 'c', image: 'x' }], terminationGracePeriodSeconds: 7 };
    fake.store.create('pods', NS, { metadata: { name: 'bound' }, spec: { ...spec, nodeName: 'node-1' } });
    fake.store.create('pods', NS, { metadata: { name: 'unbound' }, spec });
    const terminating = fake.store.delete('pods', NS, 'bound');
    expect(terminating.metadata).toMatchObject({ deletionTimestamp: expect.any(String), deletionGracePeriodSeconds: 7 });
    expect(fake.store.find('pods', NS, 'bound')?.metadata.deletionTimestamp).toBeDefined();
    fake.store.delete('pods', NS, 'bound');
    expect(fake.store.find('pods', NS, 'bound')).toBeDefined();
    fake.store.delete('pods', NS, 'bound', { gracePeriodSeconds: 0 });
    expect(fake.store.find('pods', NS, 'bound')).toBeUndefined();
    fake.store.delete('pods', NS, 'unbound');
    expect(fake.store.find('pods', NS, 'unbound')).toBeUndefined();
  });

  it('takes the grace period of a DELETE from its query', async () => {
    const fake = await fakeKube();
    fake.store.create('pods', NS, { metadata: { name: 'p' }, spec: { containers: [{ name: 'c', image: 'x' }], nodeName: 'node-1' } });
    const res = await fetch(`${fake.url}/api/v1/namespaces/${NS}/pods/p?gracePeriodSeconds=3`, { method: 'DELETE' });
    expect(((await res.json()) as KubeObject).metadata.deletionGracePeriodSeconds).toBe(3);
    await fetch(`${fake.url}/api/v1/namespaces/${NS}/pods/p?gracePeriodSeconds=0`, { method: 'DELETE' });
    expect(fake.store.find('pods', NS, 'p')).toBeUndefined();
  });
});

describe('rollouts by strategy (rollingUpdate), with the simulated kubelet', () => {
  /** Every state of the Deployment's pods while `work` runs: [ready and not terminating, not terminating]. */
  async function watchCounts(fake: FakeKube, app: string, work: () => Promise<void>): Promise<Array<[number, number]>> {
    const seen: Array<[number, number]> = [];
    const unsubscribe = fake.store.subscribe((event) => {
      if (event.resource.resource !== 'pods') return;
      const active = fake.store.list('pods', NS, { labelSelector: `app=${app}` }).filter((p) => !p.metadata.deletionTimestamp);
      seen.push([active.filter(podReady).length, active.length]);
    });
    try {
      await work();
    } finally {
      unsubscribe();
    }
    return seen;
  }

  const settled = (fake: FakeKube, name: string, version: string) =>
    until(
      `${name} runs ${version}`,
      async () => {
        const pods = fake.store.list('pods', NS, { labelSelector: `app=${name}` });
        const status = fake.store.get('apps/deployments', NS, name)['status'] as Record<string, unknown> | undefined;
        return (
          (pods.length === 2 &&
            pods.every((p) => versionOf(p) === version && podReady(p)) &&
            status?.['updatedReplicas'] === 2 &&
            status['readyReplicas'] === 2 &&
            status['observedGeneration'] === fake.store.get('apps/deployments', NS, name).metadata.generation) ||
          undefined
        );
      },
      10_000,
      10,
    );

  it('with maxSurge 1 and maxUnavailable 0, adds a pod before removing one: never fewer than 2 ready, never more than 3', async () => {
    const fake = await fakeKube();
    fake.store.create('apps/deployments', NS, deployment('web', 'v1', { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } }));
    await settled(fake, 'web', 'v1');
    const seen = await watchCounts(fake, 'web', async () => {
      bump(fake, 'web', 'v2');
      await settled(fake, 'web', 'v2');
    });
    expect(Math.min(...seen.map(([ready]) => ready))).toBe(2);
    expect(Math.max(...seen.map(([, active]) => active))).toBe(3);
    const status = fake.store.get('apps/deployments', NS, 'web')['status'] as { conditions: Array<{ type: string; reason: string }> };
    expect(status.conditions.find((c) => c.type === 'Progressing')?.reason).toBe('NewReplicaSetAvailable');
  });

  it('with maxUnavailable 1 and no surge, removes a pod first; Recreate removes every old pod before starting new ones', async () => {
    const fake = await fakeKube();
    fake.store.create('apps/deployments', NS, deployment('lean', 'v1', { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } }));
    await settled(fake, 'lean', 'v1');
    const lean = await watchCounts(fake, 'lean', async () => {
      bump(fake, 'lean', 'v2');
      await settled(fake, 'lean', 'v2');
    });
    expect(Math.min(...lean.map(([ready]) => ready))).toBe(1);
    expect(Math.max(...lean.map(([, active]) => active))).toBe(2);

    fake.store.create('apps/deployments', NS, deployment('batch', 'v1', { type: 'Recreate' }));
    await settled(fake, 'batch', 'v1');
    const versions: string[][] = [];
    const unsubscribe = fake.store.subscribe(() => versions.push(fake.store.list('pods', NS, { labelSelector: 'app=batch' }).map((p) => versionOf(p)!)));
    bump(fake, 'batch', 'v2');
    await settled(fake, 'batch', 'v2');
    unsubscribe();
    expect(versions.some((v) => v.includes('v1') && v.includes('v2'))).toBe(false);
  });

  it('keeps the old pods serving while the new ones never get ready', async () => {
    const fake = await fakeKube();
    fake.store.create('apps/deployments', NS, deployment('web', 'v1', { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } }));
    await settled(fake, 'web', 'v1');
    fake.pods.failImage('web:v2', { reason: 'CrashLoopBackOff' });
    bump(fake, 'web', 'v2');
    await until(
      'the surge pod failed',
      async () =>
        fake.store
          .list('pods', NS, { labelSelector: 'app=web' })
          .some((p) => versionOf(p) === 'v2' && (p['status'] as { containerStatuses?: unknown }).containerStatuses) || undefined,
      10_000,
      10,
    );
    // The controller has seen the failure (its status counts the failed surge pod): it removed no old pod for it.
    await until(
      'the status counts the failed pod',
      async () => {
        const status = fake.store.get('apps/deployments', NS, 'web')['status'] as { updatedReplicas?: number; unavailableReplicas?: number };
        return (status.updatedReplicas === 1 && status.unavailableReplicas === 1) || undefined;
      },
      10_000,
      10,
    );
    const pods = fake.store.list('pods', NS, { labelSelector: 'app=web' });
    expect(pods.map((p) => [versionOf(p), podReady(p)]).sort()).toEqual([
      ['v1', true],
      ['v1', true],
      ['v2', false],
    ]);
  });
});

/** A runtime whose pods are in-process HTTP servers on the pod IP: /readyz answers what the test sets. */
function serverRuntime(): PodRuntime & { pods: Map<string, { ready: boolean; signals: string[]; ignoreTerm: boolean; server: Server }> } {
  const pods = new Map<string, { ready: boolean; signals: string[]; ignoreTerm: boolean; server: Server }>();
  return {
    pods,
    async start(pod, ip): Promise<RunningPod> {
      const state = {
        ready: false,
        signals: [] as string[],
        ignoreTerm: false,
        server: createServer((req, res) => res.writeHead(req.url === '/readyz' && !state.ready ? 503 : 200).end(pod.metadata.name)),
      };
      pods.set(pod.metadata.name!, state);
      await new Promise<void>((resolve) => state.server.listen(8080, ip, resolve));
      let exit!: () => void;
      const exited = new Promise<void>((resolve) => (exit = resolve));
      const stop = () => {
        state.server.closeAllConnections();
        state.server.close(() => exit());
      };
      return {
        exited,
        terminate: () => {
          state.signals.push(`TERM@${Date.now()}`);
          if (!state.ignoreTerm) stop();
        },
        kill: () => {
          state.signals.push(`KILL@${Date.now()}`);
          stop();
        },
      };
    },
  };
}

describe('a kubelet running the test’s pods', () => {
  const podSpec = {
    terminationGracePeriodSeconds: 10,
    containers: [
      {
        name: 'main',
        image: 'web:v1',
        ports: [{ name: 'http', containerPort: 8080 }],
        readinessProbe: { httpGet: { path: '/readyz', port: 'http' }, periodSeconds: 1, failureThreshold: 1 },
        lifecycle: { preStop: { exec: { command: ['sleep', '3'] } } },
      },
    ],
  };

  it('binds and starts the pods its selector takes, sets Ready from the readiness probe, and leaves the others to the simulated kubelet', async () => {
    const fake = await fakeKube();
    const runtime = serverRuntime();
    const kubelet = new Kubelet(fake.store, { runtime, selector: 'runs=here', secondMs: 20 });
    cleanups.push(() => kubelet.close());
    fake.store.create('pods', NS, { metadata: { name: 'mine', labels: { runs: 'here' } }, spec: podSpec });
    fake.store.create('pods', NS, { metadata: { name: 'theirs' }, spec: podSpec });
    await until('it runs', async () => runtime.pods.get('mine') ?? undefined, 5000, 10);
    const mine = fake.store.get('pods', NS, 'mine');
    expect((mine['spec'] as { nodeName: string }).nodeName).toBe('fake-node');
    const ip = (mine['status'] as { podIP: string }).podIP;
    expect(ip).toMatch(/^127\.42\./);
    expect(podReady(mine)).toBe(false);
    runtime.pods.get('mine')!.ready = true;
    await until('Ready', async () => podReady(fake.store.get('pods', NS, 'mine')) || undefined, 5000, 10);
    runtime.pods.get('mine')!.ready = false;
    await until('not Ready again', async () => !podReady(fake.store.get('pods', NS, 'mine')) || undefined, 5000, 10);
    await until('the other is the simulated kubelet’s', async () => podReady(fake.store.get('pods', NS, 'theirs')) || undefined, 5000, 10);
    expect(runtime.pods.has('theirs')).toBe(false);
  });

  it('stops a deleted pod as upstream: preStop sleep, SIGTERM, SIGKILL when the grace period ends; the pod goes once it ended; at once with a grace period of 0', async () => {
    const fake = await fakeKube();
    const runtime = serverRuntime();
    const secondMs = 20;
    const kubelet = new Kubelet(fake.store, { runtime, selector: 'runs=here', secondMs });
    cleanups.push(() => kubelet.close());
    for (const name of ['polite', 'stubborn', 'abrupt']) fake.store.create('pods', NS, { metadata: { name, labels: { runs: 'here' } }, spec: podSpec });
    await until('all run', async () => (runtime.pods.size === 3 ? true : undefined), 5000, 10);
    // Deleted with a grace period of 0, a pod goes at once and its containers are killed.
    fake.store.delete('pods', NS, 'abrupt', { gracePeriodSeconds: 0 });
    expect(fake.store.find('pods', NS, 'abrupt')).toBeUndefined();
    await until('abrupt is killed', async () => (runtime.pods.get('abrupt')!.signals.length > 0 ? true : undefined), 5000, 10);
    expect(runtime.pods.get('abrupt')!.signals.map((s) => s.split('@')[0])).toEqual(['KILL']);
    runtime.pods.get('stubborn')!.ignoreTerm = true;
    const deleted = Date.now();
    fake.store.delete('pods', NS, 'polite');
    fake.store.delete('pods', NS, 'stubborn');
    expect(fake.store.get('pods', NS, 'polite').metadata.deletionTimestamp).toBeDefined();
    await until('both are gone', async () => (!fake.store.find('pods', NS, 'polite') && !fake.store.find('pods', NS, 'stubborn')) || undefined, 5000, 10);
    const at = (signal: string) => Number(signal.split('@')[1]) - deleted;
    const polite = runtime.pods.get('polite')!.signals;
    const stubborn = runtime.pods.get('stubborn')!.signals;
    expect(polite.map((s) => s.split('@')[0])).toEqual(['TERM']);
    expect(at(polite[0]!)).toBeGreaterThanOrEqual(3 * secondMs);
    expect(stubborn.map((s) => s.split('@')[0])).toEqual(['TERM', 'KILL']);
    expect(at(stubborn[1]!)).toBeGreaterThanOrEqual(10 * secondMs);
  });
});

describe('a kube-proxy of a Service', () => {
  const get = (address: string) =>
    new Promise<string>((resolve, reject) => {
      const [host, port] = address.split(':');
      request({ host, port: Number(port), path: '/', agent: false }, (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => resolve(body));
      })
        .on('error', reject)
        .end();
    });

  it('sends connections to the ready endpoints only, learns of changes up to syncMs late, and resets a connection when none is ready', async () => {
    const fake = await fakeKube();
    const runtime = serverRuntime();
    const kubelet = new Kubelet(fake.store, { runtime, selector: 'app=web', secondMs: 10 });
    cleanups.push(() => kubelet.close());
    fake.store.create('services', NS, {
      metadata: { name: 'web' },
      spec: { selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 'http' }] },
    });
    const syncMs = 200;
    const proxy = await ServiceProxy.start(fake.store, { namespace: NS, service: 'web', port: 'http', syncMs });
    cleanups.push(() => proxy.close());
    await expect(get(proxy.address)).rejects.toThrow();
    expect(proxy.refused).toBe(1);

    const spec = {
      containers: [
        {
          name: 'main',
          image: 'web',
          ports: [{ name: 'http', containerPort: 8080 }],
          readinessProbe: { httpGet: { path: '/readyz', port: 8080 }, periodSeconds: 1 },
        },
      ],
    };
    for (const name of ['a', 'b']) fake.store.create('pods', NS, { metadata: { name, labels: { app: 'web' } }, spec });
    await until('both run', async () => (runtime.pods.size === 2 ? true : undefined), 5000, 10);
    runtime.pods.get('a')!.ready = true;
    await until('a is an endpoint', async () => serviceEndpoints(fake.store, NS, 'web', 'http').find((e) => e.pod === 'a' && e.ready) ?? undefined, 5000, 10);
    expect(serviceEndpoints(fake.store, NS, 'web', 80).map((e) => [e.pod, e.port, e.ready])).toEqual([
      ['a', 8080, true],
      ['b', 8080, false],
    ]);
    await until('the proxy sends to a', async () => (await get(proxy.address).catch(() => undefined)) === 'a' || undefined, 5000, 20);
    runtime.pods.get('b')!.ready = true;
    await until('b is an endpoint', async () => serviceEndpoints(fake.store, NS, 'web', 'http').every((e) => e.ready) || undefined, 5000, 10);
    const answers = new Set<string>();
    await until('the proxy sends to both', async () => (answers.add(await get(proxy.address)), answers.size === 2) || undefined, 5000, 20);

    // A terminating pod is no endpoint for new connections, but the proxy learns it late.
    const kubeletless = fake.store.get('pods', NS, 'a');
    expect((kubeletless['spec'] as { nodeName?: string }).nodeName).toBe('fake-node');
    runtime.pods.get('a')!.ignoreTerm = true;
    fake.store.delete('pods', NS, 'a', { gracePeriodSeconds: 100 });
    expect(serviceEndpoints(fake.store, NS, 'web', 'http').find((e) => e.pod === 'a')).toMatchObject({ ready: false, serving: true, terminating: true });
    expect(proxy.endpoints.map((e) => e.pod)).toEqual(['a', 'b']);
    // Once it has read the endpoints again, new connections go to b alone.
    await until('the proxy learned a is terminating', async () => (proxy.endpoints.every((e) => e.pod !== 'a') ? true : undefined), 5000, 10);
    expect([await get(proxy.address), await get(proxy.address), await get(proxy.address)]).toEqual(['b', 'b', 'b']);
  });
});
