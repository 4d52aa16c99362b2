/**
 * A deployment's tracing credential, end to end through a real control plane and gateway: the
 * control plane derives it, the gateway recognises it over gRPC (ResolveDeployment) as a
 * principal of the deployment's tenant and tracing project; it may call the routes that declare it
 * (the trace API) only (403 on every other route and on the deployment proxy), a forged or foreign
 * one is 401, and so is a deleted deployment's. The tenant's API key and bearer token pass where
 * routes declare them, and a bearer token is refused where only a key is taken.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deploymentTracingCredential, SecretBox, start as startControlPlane, type RunningControlPlane } from '@berth/control-plane';
import { DEFAULT_SESSION_LIMITS } from '@berth/auth';
import { systemClock } from '@berth/clock';
import { UnauthenticatedError } from '@berth/errors';
import { AGENT_SERVE_SCRIPT } from '../../agent-runtime/src/index.js';
import { Api, createApp, listen } from '@berth/http';
import { silentLogger } from '@berth/log';
import { z } from 'zod';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { declaredAccess, describeCredentials, type GatewayApi, type GatewayCredential } from './access.js';
import { gatewayApi } from './app.js';
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
/** The gateway's routes, for what each declares it takes. */
let api: GatewayApi;
const accessOf = (method: string, url: string) => declaredAccess(api, method, url);

beforeAll(async () => {
  db = await createTestDatabase('gw_trace_auth');
  work = await mkdtemp(join(tmpdir(), 'berth-trace-auth-'));
  controlPlane = await startControlPlane(
    {
      databaseUrl: db.url,
      grpcHost: '127.0.0.1',
      grpcPort: 0,
      logLevel: 'silent',
      deployments: {
        secretKey,
        artifactsDir: join(work, 'artifacts'),
        processEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: work },
        agentServeScript: AGENT_SERVE_SCRIPT,
      },
    },
    silentLogger(),
  );
  gateway = await start(testGatewayConfig(db.url, controlPlane.address), silentLogger());
  clients = new ControlPlaneClients(controlPlane.address);
  api = gatewayApi({ logger: silentLogger(), store: gateway.store, readiness: {}, controlPlane: clients });
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
  return new GatewayAuthenticator(gateway.store, resolver, gateway.store.consoleSessions(DEFAULT_SESSION_LIMITS, systemClock));
}

async function call(path: string, key: string, method = 'GET') {
  const res = await fetch(`${gateway.url}${path}`, { method, headers: { 'x-api-key': key } });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as { detail?: string } | undefined };
}

/** A request with an empty JSON body where the method may carry one. */
async function send(method: string, path: string, headers: Record<string, string>) {
  const withBody = method !== 'get' && method !== 'delete';
  const res = await fetch(`${gateway.url}${path}`, {
    method: method.toUpperCase(),
    headers: { ...headers, ...(withBody ? { 'content-type': 'application/json' } : {}) },
    ...(withBody ? { body: '{}' } : {}),
  });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as { detail?: unknown } | undefined };
}

describe('the tenant’s credentials', () => {
  it('an API key and a bearer token pass authentication on every route declaring them, and are refused (403) where the route takes another kind', async () => {
    const token = (
      (await (await fetch(`${gateway.url}/v1/auth/tokens`, { method: 'POST', headers: { 'x-api-key': apiKey } })).json()) as { access_token: string }
    ).access_token;
    for (const spec of api.routes) {
      if (spec.access === 'public') continue;
      const path = spec.path.replace(/\{[^}]+\}/g, () => randomUUID());
      for (const [kind, headers] of [
        ['api_key', { 'x-api-key': apiKey }],
        ['access_token', { authorization: `Bearer ${token}` }],
      ] as const) {
        const res = await send(spec.method, path, headers);
        const refused = { status: res.status, detail: res.body?.detail };
        if ((spec.access as readonly string[]).includes(kind)) {
          expect({ route: spec.path, kind, ...refused }).not.toMatchObject({ route: spec.path, kind, detail: expect.stringMatching(/^This route takes/) });
          expect({ route: spec.path, kind, status: res.status }).not.toEqual({ route: spec.path, kind, status: 401 });
        } else {
          expect({ route: spec.path, kind, ...refused }).toEqual({
            route: spec.path,
            kind,
            status: 403,
            detail: `This route takes ${describeCredentials(spec.access as readonly GatewayCredential[])}, not ${describeCredentials([kind])}`,
          });
        }
      }
    }
  });
});

describe('a deployment’s tracing credential', () => {
  it('is a principal of the deployment’s tenant, scoped to its tracing project, on the trace API', async () => {
    expect(credential).toMatch(new RegExp(`^brt_trace_${deployment.id}_`));
    for (const [method, url] of [
      ['POST', '/runs/multipart'],
      ['POST', '/runs/batch'],
      ['PATCH', '/runs/0b5a2c1e-8a4e-4a8e-9a43-2d6f0f0b1a11'],
      ['POST', '/runs/query'],
      ['GET', `/sessions/${deployment.session_id}`],
    ] as const) {
      const principal = await authenticator().authenticate({ headers: { 'x-api-key': credential } }, accessOf(method, url));
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
    await expect(
      authenticator().authenticate({ headers: { 'x-api-key': credential } }, accessOf('DELETE', `/sessions/${deployment.session_id}`)),
    ).rejects.toMatchObject({
      name: 'PermissionDeniedError',
    });
    // The tenant's own key still works there.
    expect((await call('/v2/deployments', apiKey)).status).toBe(200);
  });

  it('is refused with 403 by every route that does not declare it, and passes authentication where declared', async () => {
    let declared = 0;
    for (const spec of api.routes) {
      if (spec.access === 'public') continue;
      const path = spec.path.replace(/\{[^}]+\}/g, () => randomUUID());
      const res = await send(spec.method, path, { 'x-api-key': credential });
      if (spec.access.includes('tracing_credential')) {
        declared++;
        expect({ route: spec.path, detail: res.body?.detail }).not.toEqual({
          route: spec.path,
          detail: expect.stringMatching(/tracing credential may only call/),
        });
        expect(res.status).not.toBe(401);
      } else {
        expect({ method: spec.method, route: spec.path, status: res.status, detail: res.body?.detail }).toEqual({
          method: spec.method,
          route: spec.path,
          status: 403,
          detail:
            'A deployment’s tracing credential may only call the trace API (/info, /runs, /sessions, /feedback, /api/v1/sessions, /api/v2/runs, /api/v2/traces, /api/v2/threads)',
        });
      }
    }
    expect(declared).toBe(25); // the trace API's routes in route-access.txt: classic (stats, filter check, feedback among them), /api/v1/sessions… and /api/v2 reads
  });

  it('is refused by a route under /runs that does not declare it (authorization is by declaration, not by path)', async () => {
    // What a later route beside the trace API looks like: it takes tenant credentials only.
    const admin: GatewayApi = new Api({ authenticate: (req, accepts) => authenticator().authenticate(req, accepts) });
    admin.route({
      method: 'get',
      path: '/runs/stats',
      access: ['api_key', 'access_token'],
      summary: 'Stats',
      response: z.object({ ok: z.boolean() }),
      handler: () => ({ ok: true }),
    });
    const served = await listen(createApp({ logger: silentLogger(), routes: [admin.router()] }), '127.0.0.1', 0);
    try {
      const traced = await fetch(`${served.url}/runs/stats`, { headers: { 'x-api-key': credential } });
      expect(traced.status).toBe(403);
      expect(await traced.json()).toEqual({
        detail:
          'A deployment’s tracing credential may only call the trace API (/info, /runs, /sessions, /feedback, /api/v1/sessions, /api/v2/runs, /api/v2/traces, /api/v2/threads)',
      });
      const tenant = await fetch(`${served.url}/runs/stats`, { headers: { 'x-api-key': apiKey } });
      expect(tenant.status).toBe(200);
    } finally {
      await served.close();
    }
  });

  it('is 401 when forged, when it names another deployment, or with another tenant in X-Tenant-Id', async () => {
    const other = await controlPlane.deployments!.create({ tenantId, name: 'other-bot', source: 'internal_source', secrets: [] });
    const forged = credential.slice(0, -4) + (credential.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    const foreign = credential.replace(deployment.id, other.id);
    for (const key of [forged, foreign]) {
      expect((await call('/v1/me', key)).status).toBe(401);
      await expect(authenticator().authenticate({ headers: { 'x-api-key': key } }, accessOf('POST', '/runs/multipart'))).rejects.toBeInstanceOf(
        UnauthenticatedError,
      );
    }
    await expect(
      authenticator().authenticate({ headers: { 'x-api-key': credential, 'x-tenant-id': randomUUID() } }, accessOf('POST', '/runs/multipart')),
    ).rejects.toMatchObject({ name: 'PermissionDeniedError' });
  });

  it('stops working once its deployment is deleted', async () => {
    const doomed = await controlPlane.deployments!.create({ tenantId, name: 'doomed-bot', source: 'internal_source', secrets: [] });
    const key = deploymentTracingCredential(new SecretBox(secretKey), doomed.id);
    await expect(authenticator().authenticate({ headers: { 'x-api-key': key } }, accessOf('POST', '/runs/multipart'))).resolves.toMatchObject({
      tracingProject: { name: 'doomed-bot' },
    });
    expect((await call(`/v2/deployments/${doomed.id}`, apiKey, 'DELETE')).status).toBe(204);
    await expect(authenticator().authenticate({ headers: { 'x-api-key': key } }, accessOf('POST', '/runs/multipart'))).rejects.toBeInstanceOf(
      UnauthenticatedError,
    );
    // The gateway's own cache lets it lapse as a deleted deployment's routes do (exact instants: proxy/resolver.test.ts).
    await until('the gateway to refuse the credential', async () => ((await call('/v1/me', key)).status === 401 ? true : undefined), 10_000, 50);
  });
});
