/**
 * One secret of a deployment by name (`PUT` / `DELETE /v2/deployments/{deployment_id}/secrets/{name}`),
 * through a real gateway and control plane, from the attacker's side: another tenant's key gets
 * the answer of an unknown deployment; a console session without its CSRF header changes nothing;
 * bad names, unknown fields and oversized values are 422s; the per-deployment limit is a 429; a
 * value is in no answer, no log line of either service and not in clear in the control plane's table.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SecretBox, start as startControlPlane, type RunningControlPlane } from '@berth/control-plane';
import { captureLogger, createTestDatabase, type TestDatabase } from '@berth/testing';
import { AGENT_SERVE_SCRIPT } from '../../agent-runtime/src/index.js';
import { storedSecrets } from '../../control-plane/src/__tests__/stored-secrets.js';
import { start, type RunningGateway } from './index.js';
import { testGatewayConfig } from './__tests__/test-config.js';

type Json = Record<string, any>;

const MAX = 3;
const secretKey = SecretBox.generateKey();
const gatewayLogs = captureLogger('gateway');
const controlPlaneLogs = captureLogger('control-plane');
/** Every answer's body, to look for values in. */
const answered: string[] = [];
let db: TestDatabase;
let work: string;
let controlPlane: RunningControlPlane;
let gateway: RunningGateway;
let keyA: string;
let keyB: string;

beforeAll(async () => {
  db = await createTestDatabase('gw_deploy_secrets');
  work = await mkdtemp(join(tmpdir(), 'berth-deploy-secrets-'));
  controlPlane = await startControlPlane(
    {
      databaseUrl: db.url,
      grpcHost: '127.0.0.1',
      grpcPort: 0,
      logLevel: 'debug',
      deployments: {
        secretKey,
        artifactsDir: join(work, 'artifacts'),
        processEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: work },
        agentServeScript: AGENT_SERVE_SCRIPT,
        maxSecretsPerDeployment: MAX,
      },
    },
    controlPlaneLogs.logger,
  );
  gateway = await start({ ...testGatewayConfig(db.url, controlPlane.address), logLevel: 'debug' }, gatewayLogs.logger);
  const a = await gateway.store.createTenant({ name: 'a' });
  const b = await gateway.store.createTenant({ name: 'b' });
  keyA = (await gateway.store.createApiKey({ tenantId: a.id, name: 'console', role: 'admin' })).key;
  keyB = (await gateway.store.createApiKey({ tenantId: b.id, name: 'attacker', role: 'admin' })).key;
}, 60_000);
afterAll(async () => {
  await gateway?.close();
  await controlPlane?.close();
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

async function call(method: string, path: string, init: { key?: string; json?: unknown; headers?: Record<string, string> } = {}) {
  const res = await fetch(`${gateway.url}${path}`, {
    method,
    headers: {
      ...(init.key ? { 'x-api-key': init.key } : {}),
      ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}),
      ...init.headers,
    },
    ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
  });
  const text = await res.text();
  answered.push(text);
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json };
}

const put = (deploymentId: string, name: string, json: unknown, key = keyA) => call('PUT', `/v2/deployments/${deploymentId}/secrets/${name}`, { key, json });
const remove = (deploymentId: string, name: string, key = keyA) => call('DELETE', `/v2/deployments/${deploymentId}/secrets/${name}`, { key });

/** A deployment of tenant A; its first revision waits for an upload, so nothing builds. */
async function create(name: string, secrets: { name: string; value: string }[] = []): Promise<Json> {
  const res = await call('POST', '/v2/deployments', { key: keyA, json: { name, source: 'internal_source', secrets } });
  expect(res.status).toBe(201);
  return res.body;
}

/** The `loc`s of a 422's detail. */
async function invalid(answer: Promise<{ status: number; body: Json }>): Promise<unknown[]> {
  const { status, body } = await answer;
  expect(status).toBe(422);
  for (const entry of body.detail) expect(entry).toEqual({ loc: expect.any(Array), msg: expect.any(String), type: expect.any(String) });
  return body.detail.map((d: { loc: unknown }) => d.loc);
}

describe('secrets by name', () => {
  const first = `sk-first-${randomUUID()}`;
  const second = `sk-second-${randomUUID()}`;
  const kept = `kept-${randomUUID()}`;
  const stolen = `stolen-${randomUUID()}`;
  const forged = `forged-${randomUUID()}`;
  const typed = `typed-${randomUUID()}`;

  it('sets, replaces and removes one secret, answering the deployment with names only and leaving the others alone', async () => {
    const d = await create('by-name', [{ name: 'KEEP_ME', value: kept }]);

    const set = await put(d.id, 'OPENAI_API_KEY', { value: first });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ id: d.id, secrets: [{ name: 'KEEP_ME' }, { name: 'OPENAI_API_KEY' }], latest_revision_id: d.latest_revision_id });
    const replaced = await put(d.id, 'OPENAI_API_KEY', { value: second });
    expect(replaced.body.secrets).toEqual([{ name: 'KEEP_ME' }, { name: 'OPENAI_API_KEY' }]);
    // No revision: the revisions list is what it was.
    const revisions = await call('GET', `/v2/deployments/${d.id}/revisions`, { key: keyA });
    expect(revisions.body.resources.map((r: Json) => r.id)).toEqual([d.latest_revision_id]);

    const box = new SecretBox(secretKey);
    let rows = await storedSecrets(db.url, d.id);
    expect(box.open(rows.get('OPENAI_API_KEY')!)).toBe(second);
    expect(box.open(rows.get('KEEP_ME')!)).toBe(kept);
    for (const sealed of rows.values()) expect(sealed.toString('latin1')).not.toMatch(/sk-first|sk-second|kept-/);

    expect((await remove(d.id, 'OPENAI_API_KEY')).status).toBe(204);
    expect((await call('GET', `/v2/deployments/${d.id}`, { key: keyA })).body.secrets).toEqual([{ name: 'KEEP_ME' }]);
    rows = await storedSecrets(db.url, d.id);
    expect([...rows.keys()]).toEqual(['KEEP_ME']);
    expect(await remove(d.id, 'OPENAI_API_KEY')).toEqual({ status: 404, body: { detail: `Deployment ID ${d.id} has no secret OPENAI_API_KEY.` } });
  });

  it('answers another tenant’s key exactly as it answers an unknown deployment, and changes nothing', async () => {
    const d = await create('victim', [{ name: 'TOKEN', value: kept }]);
    const unknown = randomUUID();
    const notFound = (id: string) => ({ status: 404, body: { detail: `Deployment ID ${id} not found.` } });
    expect(await put(d.id, 'TOKEN', { value: stolen }, keyB)).toEqual(notFound(d.id));
    expect(await put(unknown, 'TOKEN', { value: stolen }, keyB)).toEqual(notFound(unknown));
    expect(await put(d.id, 'NEW_ONE', { value: stolen }, keyB)).toEqual(notFound(d.id));
    expect(await remove(d.id, 'TOKEN', keyB)).toEqual(notFound(d.id));
    expect(await remove(unknown, 'TOKEN', keyB)).toEqual(notFound(unknown));
    // A malformed id is an unknown one too.
    expect(await put('not-a-uuid', 'TOKEN', { value: 'x' })).toEqual(notFound('not-a-uuid'));
    // Without any credential: 401, for any id.
    expect((await put(d.id, 'TOKEN', { value: 'x' }, '')).status).toBe(401);

    const rows = await storedSecrets(db.url, d.id);
    expect([...rows.keys()]).toEqual(['TOKEN']);
    expect(new SecretBox(secretKey).open(rows.get('TOKEN')!)).toBe(kept);
  });

  it('refuses a console session without its X-CSRF-Token (a cross-site request), and takes it with one', async () => {
    const d = await create('from-console');
    const signIn = await fetch(`${gateway.url}/v1/auth/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: keyA }),
    });
    expect(signIn.status).toBe(200);
    const session = /^berth_session=([^;]+)/.exec(signIn.headers.getSetCookie()[0] ?? '')![1]!;
    const csrf = ((await signIn.json()) as { csrf_token: string }).csrf_token;
    const cookie = { cookie: `berth_session=${session}` };
    const path = `/v2/deployments/${d.id}/secrets/FROM_CONSOLE`;
    for (const headers of [cookie, { ...cookie, 'x-csrf-token': '' }, { ...cookie, 'x-csrf-token': csrf.slice(0, -1) }]) {
      const refused = await call('PUT', path, { json: { value: forged }, headers });
      expect(refused.status).toBe(403);
      expect(refused.body.detail).toMatch(/X-CSRF-Token/i);
    }
    expect((await call('GET', `/v2/deployments/${d.id}`, { key: keyA })).body.secrets).toEqual([]);
    expect((await call('PUT', path, { json: { value: typed }, headers: { ...cookie, 'x-csrf-token': csrf } })).status).toBe(200);
    expect((await call('DELETE', path, { headers: cookie })).status).toBe(403);
    expect((await call('DELETE', path, { headers: { ...cookie, 'x-csrf-token': csrf } })).status).toBe(204);
  });

  it('refuses names that are not environment variable names, unknown fields and oversized values with 422', async () => {
    const d = await create('bad-input');
    for (const name of ['1ABC', 'BAD-NAME', 'has%20space', '%C3%89T%C3%89', 'A.B', 'A'.repeat(256)]) {
      expect(await invalid(put(d.id, name, { value: 'x' }))).toEqual([['path', 'name']]);
      expect(await invalid(remove(d.id, name))).toEqual([['path', 'name']]);
    }
    expect(await invalid(put(d.id, 'OK', { value: 'x', name: 'OTHER' }))).toEqual([['body', 'name']]);
    expect(await invalid(put(d.id, 'OK', {}))).toEqual([['body', 'value']]);
    expect(await invalid(put(d.id, 'OK', { value: 42 }))).toEqual([['body', 'value']]);
    expect(await invalid(put(d.id, 'OK', { value: 'x'.repeat(65_537) }))).toEqual([['body', 'value']]);
    expect((await put(d.id, 'A'.repeat(255), { value: 'x'.repeat(65_536) })).status).toBe(200);
    expect((await call('GET', `/v2/deployments/${d.id}`, { key: keyA })).body.secrets).toEqual([{ name: 'A'.repeat(255) }]);
  });

  it(`holds a deployment to ${MAX} secrets: a new name past it is a 429 naming the limit; replacing one is not`, async () => {
    const d = await create('full', [
      { name: 'ONE', value: '1' },
      { name: 'TWO', value: '2' },
    ]);
    expect((await put(d.id, 'THREE', { value: '3' })).status).toBe(200);
    const refused = await put(d.id, 'FOUR', { value: '4' });
    expect(refused).toEqual({
      status: 429,
      body: { detail: `Deployment ${d.id} has ${MAX} secrets, the most this platform allows per deployment (${MAX}): remove one before adding another` },
    });
    expect((await put(d.id, 'THREE', { value: 'three' })).status).toBe(200);
    expect((await remove(d.id, 'ONE')).status).toBe(204);
    expect((await put(d.id, 'FOUR', { value: '4' })).status).toBe(200);
    // A whole list longer than the limit is a request that can never pass.
    const tooMany = Array.from({ length: MAX + 1 }, (_, i) => ({ name: `S${i}`, value: 'v' }));
    expect(await invalid(call('PATCH', `/v2/deployments/${d.id}`, { key: keyA, json: { secrets: tooMany } }))).toEqual([['body', 'secrets']]);
  });

  it('never shows a value: not in any answer, nor in a log line of the gateway or the control plane', () => {
    const everything = [...answered, JSON.stringify(gatewayLogs.lines()), JSON.stringify(controlPlaneLogs.lines())].join('\n');
    // The logs did record the calls (they are not empty by accident).
    expect(JSON.stringify(gatewayLogs.lines())).toContain('/secrets/OPENAI_API_KEY');
    for (const value of [first, second, kept, stolen, forged, typed]) expect(everything).not.toContain(value);
  });
});
