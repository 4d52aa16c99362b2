/**
 * Deployments that are down, as the gateway shows them (against a fake DeploymentService over real
 * gRPC, real Postgres for keys): the REST deployment says UNHEALTHY and why; the public /readyz
 * stays 200 (the platform is ready) and shows how many deployments are down, without their ids.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { FakeDeploymentService } from './__tests__/fake-deployments.js';
import { testGatewayConfig } from './__tests__/test-config.js';
import { start, type RunningGateway } from './index.js';

let testDb: TestDatabase;
let fake: FakeDeploymentService;
let gateway: RunningGateway;
let key: string;
let fakeClosed = false;

beforeAll(async () => {
  testDb = await createTestDatabase('gw_health');
  fake = await new FakeDeploymentService().start();
  gateway = await start(testGatewayConfig(testDb.url, fake.address), silentLogger());
  const tenant = await gateway.store.createTenant({ name: 'a' });
  key = (await gateway.store.createApiKey({ tenantId: tenant.id, name: 'dev' })).key;
});
afterAll(async () => {
  await gateway?.close();
  if (!fakeClosed) await fake?.close();
  await testDb?.drop();
});

async function call(path: string, init: { method?: string; json?: unknown; key?: string } = {}) {
  const res = await fetch(`${gateway.url}${path}`, {
    method: init.method ?? 'GET',
    headers: { ...(init.key ? { 'x-api-key': init.key } : {}), ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

it('shows a deployment whose agent server is down as UNHEALTHY with why; /readyz stays 200 and counts it without ids', async () => {
  const created = await call('/v2/deployments', { method: 'POST', key, json: { name: 'crashy', source: 'internal_source' } });
  const id = created.body.id as string;
  expect(created.body).toMatchObject({ status: 'AWAITING_DEPLOY', health_message: null });
  expect(await call('/readyz')).toMatchObject({ status: 200, body: { status: 'ok', unhealthy_deployments: 0 } });

  const reason = 'the agent server exited with signal SIGKILL; restarting in 2 s';
  Object.assign(fake.deployments.get(id)!, { status: 'UNHEALTHY', healthMessage: reason, activeRevisionId: fake.deployments.get(id)!.latestRevisionId });
  expect(await call(`/v2/deployments/${id}`, { key })).toMatchObject({ status: 200, body: { status: 'UNHEALTHY', health_message: reason } });
  const ready = await call('/readyz');
  expect(ready).toEqual({
    status: 200,
    body: {
      status: 'ok',
      checks: { postgres: { status: 'ok' }, queue: { status: 'ok', detail: 'redis' }, 'control-plane': { status: 'ok' } },
      unhealthy_deployments: 1,
      instance_id: expect.any(String),
    },
  });

  // Without the control plane the gateway is not ready, and the count is left out.
  await fake.close();
  fakeClosed = true;
  const down = await call('/readyz');
  expect(down.status).toBe(503);
  expect(down.body).not.toHaveProperty('unhealthy_deployments');
});
