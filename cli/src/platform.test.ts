/**
 * The embedded platform's internal services answer only the platform: a process on this machine
 * (a deployed graph, say) that dials their loopback ports gets UNAUTHENTICATED, while the gateway,
 * given the per-start token, works. Real Postgres, real gRPC.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '@berth/log';
import { AuthFlowService, DeploymentService, Health } from '@berth/proto';
import { checkHealth, createRpcClient, RpcCredentialsRefusedError } from '@berth/rpc';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import grpc from '@grpc/grpc-js';
import { startPlatform, type RunningPlatform } from './platform.js';
import { bootstrapKey } from './__tests__/bootstrap-key.js';

let testDb: TestDatabase;
let platform: RunningPlatform;
let temp: string;
let apiKey: string;

beforeAll(async () => {
  testDb = await createTestDatabase('cli_platform_auth');
  temp = await mkdtemp(join(tmpdir(), 'berth-platform-auth-'));
  platform = await startPlatform({ databaseUrl: testDb.url, host: '127.0.0.1', port: 0, logLevel: 'silent', stateDir: join(temp, 'state') }, silentLogger());
  apiKey = await bootstrapKey(testDb.url);
}, 120_000);
afterAll(async () => {
  await platform?.close();
  await testDb?.drop();
  if (temp) await rm(temp, { recursive: true, force: true });
});

/** The gRPC status a call ended with, as a local process without the platform's token sees it. */
async function statusOf(call: () => Promise<unknown>): Promise<number | undefined> {
  try {
    await call();
    return grpc.status.OK;
  } catch (error) {
    expect(error).toBeInstanceOf(RpcCredentialsRefusedError);
    return ((error as Error).cause as grpc.ServiceError).code;
  }
}

describe('the embedded platform', () => {
  it('refuses calls to the control plane without its token, or with a guessed one', async () => {
    const address = platform.services['control-plane']!;
    for (const options of [{}, { internalToken: randomBytes(32).toString('base64url') }]) {
      const deployments = createRpcClient(DeploymentService, address, options);
      const flows = createRpcClient(AuthFlowService, address, options);
      try {
        expect(await statusOf(() => deployments.resolveDeployment({ deploymentId: '00000000-0000-4000-8000-000000000000' }))).toBe(grpc.status.UNAUTHENTICATED);
        expect(await statusOf(() => deployments.listDeployments({ tenantId: 'any' }))).toBe(grpc.status.UNAUTHENTICATED);
        expect(await statusOf(() => flows.getFlow({ id: { case: 'authId', value: 'any' } }))).toBe(grpc.status.UNAUTHENTICATED);
      } finally {
        deployments.close();
        flows.close();
      }
    }
  });

  it('gives every internal service the token, leaving only health open to callers without one', async () => {
    expect(Object.keys(platform.services).sort()).toEqual(['control-plane', 'export-worker', 'sandbox-manager']);
    for (const address of Object.values(platform.services)) {
      expect(await checkHealth(address)).toBe('SERVING');
      // A caller that presents a token must present the platform's: proof the service checks one.
      const guessed = createRpcClient(Health, address, { internalToken: randomBytes(32).toString('base64url') });
      try {
        expect(await statusOf(() => guessed.check({}))).toBe(grpc.status.UNAUTHENTICATED);
      } finally {
        guessed.close();
      }
    }
  });

  it('lets its own gateway through', async () => {
    const ready = await fetch(`${platform.url}/readyz`);
    expect(ready.status).toBe(200);
    const list = await fetch(`${platform.url}/v2/deployments`, { headers: { 'x-api-key': apiKey } });
    expect(list.status).toBe(200);
  });
});
