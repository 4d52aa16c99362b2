/**
 * A deployment's run-webhook signing secret: made with the deployment, sealed at rest, handed to
 * its agent servers (here: the Secret of the kubernetes deployer, on the in-repo fake Kubernetes
 * API), and replaced by a rotation that shows the new one once and deploys it.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { NotFoundError } from '@berth/errors';
import { FakeKube } from '@berth/fake-kube';
import { silentLogger } from '@berth/log';
import { DeploymentService, timestampDate } from '@berth/proto';
import { createRpcClient } from '@berth/rpc';
import { SecretBox } from '@berth/secret-box';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { start, type RunningControlPlane } from '../index.js';
import { kubeAgentEnv } from '../__tests__/kube-agent-env.js';
import { testControlPlaneConfig } from '../__tests__/test-config.js';

const tenant = randomUUID();
const secretKey = SecretBox.generateKey();
let db: TestDatabase;
let work: string;
let fake: FakeKube;
let plane: RunningControlPlane;

beforeAll(async () => {
  db = await createTestDatabase('cp_webhook_secret');
  work = await mkdtemp(join(tmpdir(), 'berth-webhook-secret-'));
  fake = await FakeKube.start({ namespaces: ['berth'], rollouts: { delayMs: 20 } });
  plane = await start(
    testControlPlaneConfig(db.url, join(work, 'artifacts'), {
      secretKey,
      deployer: { kind: 'kubernetes', server: fake.url, namespace: 'berth' },
      webhookPrivateEgress: ['10.20.0.0/16', 'fd00::/8'],
    }),
    silentLogger(),
  );
}, 60_000);

afterAll(async () => {
  await plane?.close();
  await fake?.close();
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

const agentEnv = (revisionId: string) => kubeAgentEnv(fake, secretKey, revisionId);

async function sealedAtRest(deploymentId: string): Promise<Buffer> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    const { rows } = await client.query<{ value_encrypted: Buffer }>(
      'SELECT value_encrypted FROM control_plane.deployment_webhook_secrets WHERE deployment_id = $1',
      [deploymentId],
    );
    return rows[0]!.value_encrypted;
  } finally {
    await client.end();
  }
}

it('makes a secret with the deployment, sealed at rest, and rotates it: the new one shown once, deployed, the old one gone', async () => {
  const deployments = plane.deployments!;
  const created = await deployments.create({
    tenantId: tenant,
    name: 'hooks',
    source: 'external_docker',
    sourceRevisionConfig: { image_uri: 'registry.test/agent:1' },
    secrets: [],
  });
  // Never part of a deployment's answer.
  expect(JSON.stringify(created)).not.toMatch(/whsec_/);
  const first = (await agentEnv(created.latest_revision_id!)).BERTH_WEBHOOK_SECRET!;
  expect(first).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
  // The operator's private ranges for webhook receivers reach the agent servers.
  expect((await agentEnv(created.latest_revision_id!)).BERTH_WEBHOOK_PRIVATE_EGRESS).toBe('10.20.0.0/16,fd00::/8');
  const sealed = await sealedAtRest(created.id);
  expect(sealed.toString('latin1')).not.toContain(first);
  expect(new SecretBox(secretKey).open(sealed)).toBe(first);

  await until('the first revision to serve', async () => ((await deployments.get(tenant, created.id)).active_revision_id ? true : undefined), 30_000);
  const rotated = await deployments.rotateWebhookSecret(tenant, created.id);
  expect(rotated.secret).toMatch(/^whsec_/);
  expect(rotated.secret).not.toBe(first);
  // Deployed again, as a new revision whose agent servers sign with the new secret.
  expect(rotated.deployment.latest_revision_id).not.toBe(created.latest_revision_id);
  expect((await agentEnv(rotated.deployment.latest_revision_id!)).BERTH_WEBHOOK_SECRET).toBe(rotated.secret);
  expect(new SecretBox(secretKey).open(await sealedAtRest(created.id))).toBe(rotated.secret);
  expect(JSON.stringify(await deployments.get(tenant, created.id))).not.toMatch(/whsec_/);
}, 90_000);

it('rotates over gRPC: the secret and when it was made, NOT_FOUND for another tenant or an unknown id', async () => {
  const deployments = plane.deployments!;
  const created = await deployments.create({
    tenantId: tenant,
    name: 'hooks-rpc',
    source: 'external_docker',
    sourceRevisionConfig: { image_uri: 'registry.test/agent:1' },
    secrets: [],
  });
  const client = createRpcClient(DeploymentService, plane.address);
  try {
    const before = Date.now();
    const answer = await client.rotateWebhookSecret({ tenantId: tenant, deploymentId: created.id });
    expect(answer.secret).toMatch(/^whsec_/);
    expect(timestampDate(answer.createdAt!).getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect(new SecretBox(secretKey).open(await sealedAtRest(created.id))).toBe(answer.secret);
    await expect(client.rotateWebhookSecret({ tenantId: randomUUID(), deploymentId: created.id })).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.rotateWebhookSecret({ tenantId: tenant, deploymentId: randomUUID() })).rejects.toBeInstanceOf(NotFoundError);
    // Still the one the first call made.
    expect(new SecretBox(secretKey).open(await sealedAtRest(created.id))).toBe(answer.secret);
  } finally {
    client.close();
  }
}, 60_000);
