/**
 * A deployment's tracing credential, end to end through a real control plane and gateway: the
 * control plane derives it, the gateway recognises it over gRPC (ResolveDeployment) as a
 * principal of the deployment's tenant and tracing project; it may call the trace API only (403
 * on every other route and on the deployment proxy), a forged or foreign one is 401, and so is a
 * deleted deployment's.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deploymentTracingCredential, SecretBox, start as startControlPlane, type RunningControlPlane } from '@berth/control-plane';
import { UnauthenticatedError } from '@berth/errors';
import { AGENT_SERVE_SCRIPT } from '../../agent-runtime/src/index.js';
import { silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { ControlPlaneClients } from './control-plane.js';
import { start, type RunningGateway } from './index.js';
import { DeploymentResolver } from './proxy/resolver.js';
import { GatewayAuthenticator } from './trace-auth.js';
import { testGatewayConfig } from './__tests__/test-config.js';

const secretKey = SecretBox.generateKey();
let db: TestDatabase;
let work: string;
let controlPlane: RunningControlPlane;
let gateway: RunningGateway;
let clients: ControlPlaneClients;
let tenantId: string;
let apiKey: string;
let deployment: { id: string; name: string; session_id: string };
let credential: string;

beforeAll(async () => {
  db = await createTestDatabase('gw_trace_auth');
  work = await mkdtemp(join(tmpdir(), 'berth-trace-auth-'));
  controlPlane = await startControlPlane(
    {
      databaseUrl: db.url,
      grpcHost: '127.0.0.1',
      grpcPort: 0,
      logLevel: 'silent',
      deployments: { secretKey, artifactsDir: join(work, 'artifacts'), processEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: work }, agentServeScript: AGENT_SERVE_SCRIPT },
    },
    silentLogger(),
  );
  gateway = await start(testGatewayConfig(db.url, controlPlane.address), silentLogger());
  clients = new ControlPlaneClients(controlPlane.address);
  tenantId = (await gateway.store.createTenant({ name: 'traced' })).id;
  apiKey = (await gateway.store.createApiKey({ tenantId, name: 'dev', role: 'admin' })).key;
  // Waits for its source: no build, no agent server — the credential exists from creation on.
  deployment = await controlPlane.deployments!.create({ tenantId, name: 'support-bot', source: 'internal_source', secrets: [] });
  credential = deploymentTracingCredential(new SecretBox(secretKey), deployment.id);
}, 60_000);
afterAll(async () => {
  clients?.close();
  await gateway?.close();
  await controlPlane?.close();
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

/** The gateway's authenticator on the real control plane, without caching. */
function authenticator(): GatewayAuthenticator {
  const resolver = new DeploymentResolver(async (deploymentId) => clients.deployments.resolveDeployment({ deploymentId }), { ttlMs: 0 });
  return new GatewayAuthenticator(gateway.store, resolver);
}

async function call(path: string, key: string, method = 'GET') {
  const res = await fetch(`${gateway.url}${path}`, { method, headers: { 'x-api-key': key } });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as { detail?: string } | undefined };
}

describe('a deployment’s tracing credential', () => {
  it('is a principal of the deployment’s tenant, scoped to its tracing project, on the trace API', async () => {
    expect(credential).toMatch(new RegExp(`^brt_trace_${deployment.id}_`));
    for (const [method, url] of [
      ['POST', '/runs/multipart'],
      ['POST', '/runs/batch'],
      ['PATCH', '/runs/0b5a2c1e-8a4e-4a8e-9a43-2d6f0f0b1a11'],
      ['POST', '/runs/query'],
      ['GET', '/info'],
      ['GET', `/sessions/${deployment.session_id}`],
    ] as const) {
      const principal = await authenticator().authenticate({ method, url, headers: { 'x-api-key': credential } });
      expect(principal).toMatchObject({
        tenantId,
        role: 'member',
        platformAdmin: false,
        tracingProject: { id: deployment.session_id, name: 'support-bot' },
      });
    }
  });

  it('is refused with 403 by every other route, and by the deployment proxy', async () => {
    for (const [path, method] of [
      ['/v1/me', 'GET'],
      ['/v2/deployments', 'GET'],
      [`/v2/deployments/${deployment.id}`, 'DELETE'],
      [`/v1/tenants/${tenantId}/api-keys`, 'GET'],
      [`/d/${deployment.id}/ok`, 'GET'],
    ] as const) {
      const res = await call(path, credential, method);
      expect({ path, status: res.status }).toEqual({ path, status: 403 });
      expect(res.body?.detail).toMatch(/tracing credential may only call the trace API/);
    }
    await expect(authenticator().authenticate({ method: 'DELETE', url: `/sessions/${deployment.session_id}`, headers: { 'x-api-key': credential } })).rejects.toMatchObject({
      name: 'PermissionDeniedError',
    });
    // The tenant's own key still works there.
    expect((await call('/v2/deployments', apiKey)).status).toBe(200);
  });

  it('is 401 when forged, when it names another deployment, or with another tenant in X-Tenant-Id', async () => {
    const other = await controlPlane.deployments!.create({ tenantId, name: 'other-bot', source: 'internal_source', secrets: [] });
    const forged = credential.slice(0, -4) + (credential.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    const foreign = credential.replace(deployment.id, other.id);
    for (const key of [forged, foreign]) {
      expect((await call('/v1/me', key)).status).toBe(401);
      await expect(authenticator().authenticate({ method: 'POST', url: '/runs/multipart', headers: { 'x-api-key': key } })).rejects.toBeInstanceOf(UnauthenticatedError);
    }
    await expect(
      authenticator().authenticate({ method: 'POST', url: '/runs/multipart', headers: { 'x-api-key': credential, 'x-tenant-id': randomUUID() } }),
    ).rejects.toMatchObject({ name: 'PermissionDeniedError' });
  });

  it('stops working once its deployment is deleted', async () => {
    const doomed = await controlPlane.deployments!.create({ tenantId, name: 'doomed-bot', source: 'internal_source', secrets: [] });
    const key = deploymentTracingCredential(new SecretBox(secretKey), doomed.id);
    await expect(authenticator().authenticate({ method: 'POST', url: '/runs/multipart', headers: { 'x-api-key': key } })).resolves.toMatchObject({
      tracingProject: { name: 'doomed-bot' },
    });
    expect((await call(`/v2/deployments/${doomed.id}`, apiKey, 'DELETE')).status).toBe(204);
    await expect(authenticator().authenticate({ method: 'POST', url: '/runs/multipart', headers: { 'x-api-key': key } })).rejects.toBeInstanceOf(UnauthenticatedError);
    // The gateway's own cache (1 s) lets it lapse as fast as a deleted deployment's routes.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await call('/v1/me', key)).status).toBe(401);
  });
});
