/**
 * What a deployed agent server traces with, as the control plane hands it over (here: the Secret
 * of the kubernetes deployer, on the in-repo fake Kubernetes API): the gateway's URL as agent
 * servers reach it (asked for when the revision deploys), the deployment's own tracing credential
 * and its name as the project — never a tenant's API key or a platform secret.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeKube } from '@berth/fake-kube';
import { silentLogger } from '@berth/log';
import { SecretBox } from '@berth/secret-box';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { start, type RunningControlPlane } from '../index.js';
import { testControlPlaneConfig } from '../__tests__/test-config.js';
import { deploymentTracingCredential } from './service.js';

const tenant = randomUUID();
const secretKey = SecretBox.generateKey();
let db: TestDatabase;
let work: string;
let fake: FakeKube;
let plane: RunningControlPlane;
let endpointAsked = 0;

beforeAll(async () => {
  db = await createTestDatabase('cp_tracing_env');
  work = await mkdtemp(join(tmpdir(), 'berth-tracing-env-'));
  fake = await FakeKube.start({ namespaces: ['berth'], rollouts: { delayMs: 20 } });
  plane = await start(
    testControlPlaneConfig(db.url, join(work, 'artifacts'), {
      secretKey,
      deployer: { kind: 'kubernetes', server: fake.url, namespace: 'berth' },
      // As `berth up` gives it: known only once the gateway listens, asked for at deploy time.
      tracingEndpoint: async () => {
        endpointAsked += 1;
        return 'http://berth-gateway.berth.svc:8080';
      },
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

it('gives the agent server the trace API, its deployment’s tracing credential and project, and no platform secret', async () => {
  const created = await plane.deployments!.create({
    tenantId: tenant,
    name: 'support-bot',
    source: 'external_docker',
    sourceRevisionConfig: { image_uri: 'registry.test/agent:1' },
    secrets: [{ name: 'OPENAI_API_KEY', value: 'sk-test' }],
  });
  const secret = await until('the deployment’s Secret', () => fake.store.list('secrets', 'berth')[0] as { data: Record<string, string> } | undefined, 30_000);
  const env = Object.fromEntries(Object.entries(secret.data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
  expect(env).toMatchObject({
    BERTH_TRACING_ENDPOINT: 'http://berth-gateway.berth.svc:8080',
    BERTH_TRACING_API_KEY: deploymentTracingCredential(new SecretBox(secretKey), created.id),
    BERTH_TRACING_PROJECT: 'support-bot',
  });
  expect(endpointAsked).toBeGreaterThanOrEqual(1);
  // Nothing of the platform: not its key (nor anything it opens), no tenant API key or token.
  const values = Object.values(env).join('\n');
  expect(values).not.toContain(secretKey);
  expect(values).not.toMatch(/brt_key_|brt_tok_/);
  expect(Object.keys(env).filter((k) => /SECRET_KEY|INTERNAL_TOKEN|LANGSMITH_/.test(k))).toEqual([]);
}, 60_000);
