/**
 * Deployments of images (`external_docker`) on the kubernetes deployer, through the whole control
 * plane (store, revision jobs, deployer) against the in-repo fake Kubernetes API server: the
 * revision is DEPLOYED once the rollout finished, the route points at the Service, a failing
 * rollout is DEPLOY_FAILED with the reason, and delete removes the objects.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeKube } from '@berth/fake-kube';
import { silentLogger } from '@berth/log';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { start, type RunningControlPlane } from '../index.js';
import { testControlPlaneConfig } from '../__tests__/test-config.js';
import type { Deployments } from './service.js';

const tenant = randomUUID();
let db: TestDatabase;
let work: string;
let fake: FakeKube;
let plane: RunningControlPlane;
let deployments: Deployments;

beforeAll(async () => {
  db = await createTestDatabase('cp_kube');
  work = await mkdtemp(join(tmpdir(), 'berth-kube-deployments-'));
  fake = await FakeKube.start({ namespaces: ['berth'], rollouts: { delayMs: 50 } });
  fake.rollouts.failImage('registry.test/agent:broken', { logs: 'loading graph agent\nError: OPENAI_API_KEY is not set\n' });
  plane = await start(
    testControlPlaneConfig(db.url, join(work, 'artifacts'), { deployer: { kind: 'kubernetes', server: fake.url, namespace: 'berth' } }),
    silentLogger(),
  );
  deployments = plane.deployments!;
}, 60_000);

afterAll(async () => {
  await plane?.close();
  await fake?.close();
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

function settled(deploymentId: string, revisionId: string): Promise<string> {
  return until(
    `revision ${revisionId} to settle`,
    async () => {
      const { status } = await deployments.revision(tenant, deploymentId, revisionId);
      return ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'INTERRUPTED'].includes(status) ? status : undefined;
    },
    30_000,
  );
}

it('deploys an image, fails a broken one with the reason and keeps the old one, and deletes everything', async () => {
  const created = await deployments.create({
    tenantId: tenant,
    name: 'agent',
    source: 'external_docker',
    sourceConfig: { deployment_type: 'prod' },
    sourceRevisionConfig: { image_uri: 'registry.test/agent:1' },
    secrets: [{ name: 'OPENAI_API_KEY', value: 'sk-test' }],
  });
  expect(await settled(created.id, created.latest_revision_id!)).toBe('DEPLOYED');
  const route = await deployments.resolve(created.id);
  expect(route.upstream_url).toMatch(/^http:\/\/[a-z0-9-]+\.berth\.svc\.cluster\.local:8000$/);
  const [deployment] = fake.store.list('deployments', 'berth');
  expect(deployment!.spec).toMatchObject({ replicas: 2 }); // prod: two replicas by default
  const container = (deployment!.spec as { template: { spec: { containers: { image: string; env: { name: string; value: string }[] }[] } } }).template.spec
    .containers[0]!;
  expect(container.image).toBe('registry.test/agent:1');
  // The secret's value, and the platform's values for the agent server (its own database login and
  // credential among them), live in the deployment's Secret, not in the Deployment.
  expect(container.env.map((e) => e.name).sort()).toEqual(['BERTH_METRICS_HOST', 'BERTH_METRICS_PORT', 'HOME', 'HOST', 'N_JOBS_PER_WORKER', 'PORT']);
  expect(container.env.find((e) => e.name === 'HOST')!.value).toBe('0.0.0.0');
  expect(JSON.stringify(deployment)).not.toContain('sk-test');
  const secrets = fake.store.list('secrets', 'berth');
  expect(secrets).toHaveLength(1);
  const data = secrets[0] as { data?: Record<string, string>; stringData?: Record<string, string> };
  expect(Object.keys({ ...data.data, ...data.stringData })).toEqual(
    expect.arrayContaining(['OPENAI_API_KEY', 'BERTH_AGENT_SCHEMA', 'DATABASE_URL', 'BERTH_DEPLOYMENT_CREDENTIAL']),
  );

  const broken = await deployments.update({ tenantId: tenant, deploymentId: created.id, sourceRevisionConfig: { image_uri: 'registry.test/agent:broken' } });
  expect(await settled(created.id, broken.latest_revision_id!)).toBe('DEPLOY_FAILED');
  const failed = await deployments.revision(tenant, created.id, broken.latest_revision_id!);
  const { logs } = await plane.revisionLogs!.read(tenant, created.id, { revisionId: failed.id, type: 'deploy', offset: 0, limit: 1000 });
  expect(logs.map((l) => l.message).join('\n')).toContain('OPENAI_API_KEY is not set');
  expect(await deployments.resolve(created.id)).toMatchObject({ upstream_url: route.upstream_url, status: 'LATEST_FAILED' });
  expect((await deployments.get(tenant, created.id)).status_message).toContain(`the latest revision ${failed.id} failed to deploy (DEPLOY_FAILED`);
  const image = (d: unknown) => (d as { spec: { template: { spec: { containers: { image: string }[] } } } }).spec.template.spec.containers[0]!.image;
  expect(image(fake.store.list('deployments', 'berth')[0])).toBe('registry.test/agent:1');

  await deployments.delete(tenant, created.id);
  const left = () => ['deployments', 'secrets', 'services'].flatMap((kind) => fake.store.list(kind, 'berth'));
  // The deployer deletes the Deployment, then the Service, then the Secret.
  await until("the deployment's objects to be deleted", () => (left().length === 0 ? true : undefined), 10_000);
  expect(fake.store.list('deployments', 'berth')).toEqual([]);
  expect(fake.store.list('secrets', 'berth')).toEqual([]);
  expect(fake.store.list('services', 'berth')).toEqual([]);
}, 60_000);

it('fails to start with an unreadable kubeconfig, naming it, and frees the artifact port it had opened', async () => {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  const config = testControlPlaneConfig(db.url, join(work, 'artifacts-bad'), {
    deployer: { kind: 'kubernetes', kubeconfig: join(work, 'no-such-kubeconfig') },
    archives: { storage: { bucket: 'unused', region: 'us-east-1' }, host: '127.0.0.1', port },
  });
  await expect(start(config, silentLogger())).rejects.toThrow(/no-such-kubeconfig/);
  // The listener did not outlive the failed start: the port can be taken again.
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
  await new Promise((resolve) => server.close(resolve));
}, 30_000);

it('runs as many agent-server replicas as resource_spec.min_scale asks', async () => {
  const created = await deployments.create({
    tenantId: tenant,
    name: 'scaled',
    source: 'external_docker',
    sourceConfig: { deployment_type: 'dev', resource_spec: { min_scale: 3 } },
    sourceRevisionConfig: { image_uri: 'registry.test/agent:1' },
    secrets: [],
  });
  expect(await settled(created.id, created.latest_revision_id!)).toBe('DEPLOYED');
  const [deployment] = fake.store.list('deployments', 'berth', { labelSelector: `berth.dev/deployment-id=${created.id}` });
  expect(deployment!.spec).toMatchObject({ replicas: 3 });
  expect(deployment!['status']).toMatchObject({ readyReplicas: 3 });
  await deployments.delete(tenant, created.id);
}, 60_000);
