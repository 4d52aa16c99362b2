/**
 * The gateway against a control plane that requires the internal token (real gRPC, real Postgres):
 * with the right token the API works; with a wrong or missing one the user sees a plain 503 — the
 * platform's misconfiguration, never a 401 about the user's own credentials — and /readyz names
 * a service that refuses the token as failing.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { silentLogger } from '@berth/log';
import { startGrpcService, type RunningGrpcService } from '@berth/rpc';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { FakeDeploymentService } from './__tests__/fake-deployments.js';
import { testGatewayConfig } from './__tests__/test-config.js';
import { start, type RunningGateway } from './index.js';

const TOKEN = randomBytes(32).toString('base64url');

let testDb: TestDatabase;
let fake: FakeDeploymentService;
/** A service that serves only health (as export-worker does today), for /readyz. */
let healthOnly: RunningGrpcService;
const gateways: RunningGateway[] = [];
let apiKey: string;

async function gatewayWith(internalToken: string | undefined): Promise<RunningGateway> {
  const config = testGatewayConfig(testDb.url, fake.address);
  const services = { ...config.services, 'export-worker': healthOnly.address };
  const gateway = await start({ ...config, services, internalToken }, silentLogger());
  gateways.push(gateway);
  return gateway;
}

async function get(gateway: RunningGateway, path: string) {
  const res = await fetch(`${gateway.url}${path}`, { headers: { 'x-api-key': apiKey } });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

beforeAll(async () => {
  testDb = await createTestDatabase('gw_internal_auth');
  fake = await new FakeDeploymentService().start(TOKEN);
  healthOnly = await startGrpcService({ name: 'berth.exportworker.v1', host: '127.0.0.1', port: 0, internalToken: TOKEN });
  const first = await gatewayWith(TOKEN);
  const tenant = await first.store.createTenant({ name: 'a' });
  apiKey = (await first.store.createApiKey({ tenantId: tenant.id, name: 'dev' })).key;
});
afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  await fake?.close();
  await healthOnly?.close();
  await testDb?.drop();
});

describe('internal token between gateway and control plane', () => {
  it('works when the gateway sends the token the control plane expects', async () => {
    const gateway = gateways[0]!;
    expect(await get(gateway, '/v2/deployments')).toMatchObject({ status: 200, body: { resources: [] } });
    expect((await get(gateway, '/readyz')).body.checks['export-worker']).toEqual({ status: 'ok' });
    expect(fake.callsOf('listDeployments')).toHaveLength(1);
  });

  for (const [label, token] of [
    ['a wrong token', randomBytes(32).toString('base64url')],
    ['no token', undefined],
  ] as const) {
    it(`answers 503 without internal detail, and is not ready, when the gateway sends ${label}`, async () => {
      const calls = fake.calls.length;
      const gateway = await gatewayWith(token);
      const res = await get(gateway, '/v2/deployments');
      expect(res).toEqual({ status: 503, body: { detail: "internal service refused the platform's credentials" } });
      // Refused before the handler ran.
      expect(fake.calls.length).toBe(calls);

      const ready = await get(gateway, '/readyz');
      if (token === undefined) {
        // Health stays open to callers without credentials (probes), so only the API calls fail.
        expect(ready.body.checks['export-worker']).toEqual({ status: 'ok' });
      } else {
        expect(ready.status).toBe(503);
        expect(ready.body.checks['export-worker']).toEqual({ status: 'failing', detail: expect.stringContaining("refused the platform's credentials") });
        expect(JSON.stringify(ready.body)).not.toContain(token);
      }
    });
  }
});
