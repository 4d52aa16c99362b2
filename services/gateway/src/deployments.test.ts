/**
 * The deployment API through the gateway's HTTP server, against a fake DeploymentService over
 * real gRPC and a real Postgres for API keys: what each endpoint answers, every way a request can
 * be malformed (422), how control-plane errors come out (404/409), and tarball uploads streamed
 * through in chunks.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { PassThrough } from 'node:stream';
import { listen, type RunningServer } from '@berth/http';
import { RevisionStatus } from '@berth/proto';
import { createLogger, silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { FakeDeploymentService } from './__tests__/fake-deployments.js';
import { tarGz, tarGzOfSize } from './__tests__/tarballs.js';
import { createGatewayApp } from './app.js';
import { ControlPlaneClients } from './control-plane.js';
import { start, type RunningGateway } from './index.js';
import { UPLOAD_CHUNK_BYTES } from './routes/deployment-upload.js';
import { testGatewayConfig } from './__tests__/test-config.js';

let testDb: TestDatabase;
let fake: FakeDeploymentService;
let gateway: RunningGateway;
let tenantA: string;
let keyA: string;
let keyB: string;
/** Everything the gateway logged (at debug), to check no secret is in it. */
let logged = '';

type Json = Record<string, any>;

async function call(path: string, init: { method?: string; key?: string | null; json?: unknown; raw?: string; headers?: Record<string, string> } = {}) {
  const key = init.key === undefined ? keyA : init.key;
  const res = await fetch(`${gateway.url}${path}`, {
    method: init.method ?? 'GET',
    headers: {
      ...(key ? { 'x-api-key': key } : {}),
      ...(init.json !== undefined || init.raw !== undefined ? { 'content-type': 'application/json' } : {}),
      ...init.headers,
    },
    body: init.raw ?? (init.json !== undefined ? JSON.stringify(init.json) : undefined),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json };
}

/** The `loc`s of a 422's detail entries. */
async function invalid(path: string, init: Parameters<typeof call>[1]): Promise<(string | number)[][]> {
  const res = await call(path, init);
  expect({ status: res.status, path }).toEqual({ status: 422, path });
  for (const entry of res.body.detail) expect(entry).toEqual({ loc: expect.any(Array), msg: expect.any(String), type: expect.any(String) });
  return res.body.detail.map((d: { loc: (string | number)[] }) => d.loc);
}

async function create(name: string, extra: Json = {}, key = keyA) {
  const res = await call('/v2/deployments', { method: 'POST', key, json: { name, source: 'internal_source', ...extra } });
  expect(res.status).toBe(201);
  return res.body;
}

beforeAll(async () => {
  testDb = await createTestDatabase('gw_deploy');
  fake = await new FakeDeploymentService().start();
  const logs = new PassThrough();
  logs.on('data', (chunk: Buffer) => (logged += chunk.toString('utf8')));
  gateway = await start(testGatewayConfig(testDb.url, fake.address), createLogger({ name: 'gateway', level: 'debug', destination: logs }));
  const a = await gateway.store.createTenant({ name: 'a' });
  const b = await gateway.store.createTenant({ name: 'b' });
  tenantA = a.id;
  keyA = (await gateway.store.createApiKey({ tenantId: a.id, name: 'dev' })).key;
  keyB = (await gateway.store.createApiKey({ tenantId: b.id, name: 'dev' })).key;
});
afterAll(async () => {
  await gateway.close();
  await fake.close();
  await testDb.drop();
});

describe('POST /v2/deployments', () => {
  it('creates a deployment for the caller’s tenant and answers 201 with its JSON (secret names only)', async () => {
    const body = await create('my-agent', {
      source_revision_config: { langgraph_config_path: 'langgraph.json' },
      source_config: { resource_spec: { min_scale: 1, max_scale: 2, cpu: 0.5, memory_mb: 512 } },
      secrets: [
        { name: 'OPENAI_API_KEY', value: 'sk-secret' },
        { name: 'MODE', value: 'x' },
      ],
    });
    expect(body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      tenant_id: tenantA,
      name: 'my-agent',
      source: 'internal_source',
      source_config: { deployment_type: 'dev', resource_spec: { min_scale: 1, max_scale: 2, cpu: 0.5, memory_mb: 512 } },
      source_revision_config: { langgraph_config_path: 'langgraph.json' },
      status: 'AWAITING_DEPLOY',
      latest_revision_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      active_revision_id: null,
      secrets: [{ name: 'MODE' }, { name: 'OPENAI_API_KEY' }],
      session_id: expect.any(String),
      deployment_url: `${gateway.url}/d/${body.id}`,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      health_message: null,
      status_message: null,
    });
    expect(JSON.stringify(body)).not.toContain('sk-secret');
    const sent = fake.callsOf('createDeployment').at(-1)!;
    expect(sent).toMatchObject({ tenantId: tenantA, name: 'my-agent', source: 'internal_source' });
    expect((sent.secrets as { name: string; value: string }[]).map((s) => [s.name, s.value])).toEqual([
      ['OPENAI_API_KEY', 'sk-secret'],
      ['MODE', 'x'],
    ]);

    const prod = await create('prod-one', { source_config: { deployment_type: 'prod' } });
    expect(prod.source_config).toEqual({ deployment_type: 'prod' });
  });

  it('refuses malformed bodies with 422 naming each bad field', async () => {
    const post = (json: unknown) => ({ method: 'POST', json });
    const ok = { name: 'valid-name', source: 'internal_source' };
    for (const name of ['Upper', '-leading', 'under_score', 'a'.repeat(64), '', 'dots.no', 'spa ce']) {
      expect(await invalid('/v2/deployments', post({ ...ok, name }))).toEqual([['body', 'name']]);
    }
    expect(await invalid('/v2/deployments', post({ source: 'internal_source' }))).toEqual([['body', 'name']]);
    expect(await invalid('/v2/deployments', post({ ...ok, source: 'github' }))).toEqual([['body', 'source']]);
    expect(await invalid('/v2/deployments', post({ ...ok, colour: 'red' }))).toEqual([['body', 'colour']]);
    expect(await invalid('/v2/deployments', post({ ...ok, source_config: { deployment_type: 'dev_free' } }))).toEqual([
      ['body', 'source_config', 'deployment_type'],
    ]);
    expect(await invalid('/v2/deployments', post({ ...ok, source_config: { build_on_push: true } }))).toEqual([['body', 'source_config', 'build_on_push']]);
    expect(await invalid('/v2/deployments', post({ ...ok, source_config: { resource_spec: { cpu: -1, gpus: 1 } } }))).toEqual(
      expect.arrayContaining([
        ['body', 'source_config', 'resource_spec', 'cpu'],
        ['body', 'source_config', 'resource_spec', 'gpus'],
      ]),
    );
    expect(await invalid('/v2/deployments', post({ ...ok, source_revision_config: { repo_ref: 'main' } }))).toEqual([
      ['body', 'source_revision_config', 'repo_ref'],
    ]);
    expect(await invalid('/v2/deployments', post({ ...ok, secrets: [{ name: '1BAD', value: 'x' }] }))).toEqual([['body', 'secrets', 0, 'name']]);
    expect(await invalid('/v2/deployments', post({ ...ok, secrets: [{ name: 'A', value: 'x', extra: 1 }] }))).toEqual([['body', 'secrets', 0, 'extra']]);
    expect(
      await invalid(
        '/v2/deployments',
        post({
          ...ok,
          secrets: [
            { name: 'A', value: 'x' },
            { name: 'A', value: 'y' },
          ],
        }),
      ),
    ).toEqual([['body', 'secrets', 1, 'name']]);
    expect(await invalid('/v2/deployments', post({ ...ok, source: 'external_docker' }))).toEqual([['body', 'source_revision_config', 'image_uri']]);
    expect(await invalid('/v2/deployments', { method: 'POST', raw: '{"name": ' })).toEqual([['body']]);
    // Nothing reached the control plane.
    expect(fake.callsOf('createDeployment').some((c) => c.name === 'valid-name')).toBe(false);
  });

  it('answers 409 for a name the tenant already uses, and 401 without a key', async () => {
    await create('taken');
    const again = await call('/v2/deployments', { method: 'POST', json: { name: 'taken', source: 'internal_source' } });
    expect(again).toEqual({ status: 409, body: { detail: 'A deployment named taken already exists' } });
    // Another tenant may use the same name.
    await create('taken', {}, keyB);
    expect((await call('/v2/deployments', { method: 'POST', key: null, json: { name: 'x', source: 'internal_source' } })).status).toBe(401);
  });
});

describe('GET /v2/deployments', () => {
  it('pages through the tenant’s deployments with offset, filtered by name and type', async () => {
    for (const n of ['page-1', 'page-2', 'page-3']) await create(n);
    const first = await call('/v2/deployments?name_contains=page-&limit=2');
    expect(first.status).toBe(200);
    expect(first.body.resources.map((d: Json) => d.name)).toEqual(['page-3', 'page-2']);
    expect(first.body.offset).toBe(2);
    const second = await call(`/v2/deployments?name_contains=page-&limit=2&offset=${first.body.offset}`);
    expect(second.body).toMatchObject({ resources: [{ name: 'page-1' }], offset: 3 });
    expect(second.body.resources[0].deployment_url).toBe(`${gateway.url}/d/${second.body.resources[0].id}`);
    const prod = await call('/v2/deployments?deployment_type=prod');
    expect(prod.body.resources.map((d: Json) => d.name)).toEqual(['prod-one']);
    const defaults = fake.callsOf('listDeployments').at(-1);
    expect(defaults).toMatchObject({ tenantId: tenantA, limit: 20, offset: 0 });
    // Tenant B sees only its own.
    const b = await call('/v2/deployments', { key: keyB });
    expect(b.body.resources.map((d: Json) => d.name)).toEqual(['taken']);
  });

  it('refuses bad paging and unknown query parameters with 422', async () => {
    for (const q of ['limit=0', 'limit=101', 'limit=abc', 'limit=1.5', 'limit=', 'offset=-1', 'limit=1&limit=2']) {
      const key = q.split('=')[0]!;
      expect(await invalid(`/v2/deployments?${q}`, {})).toEqual([['query', key]]);
    }
    expect(await invalid('/v2/deployments?deployment_type=free', {})).toEqual([['query', 'deployment_type']]);
    expect(await invalid('/v2/deployments?name=x', {})).toEqual([['query', 'name']]);
  });
});

describe('GET/PATCH/DELETE /v2/deployments/{id}', () => {
  it('gets a deployment; another tenant’s, an unknown or a malformed id is 404', async () => {
    const d = await create('get-me');
    expect(await call(`/v2/deployments/${d.id}`)).toEqual({ status: 200, body: d });
    expect(await call(`/v2/deployments/${d.id.toUpperCase()}`)).toMatchObject({ status: 200, body: { id: d.id } });
    expect(await call(`/v2/deployments/${d.id}`, { key: keyB })).toEqual({ status: 404, body: { detail: `Deployment ID ${d.id} not found.` } });
    const unknown = randomUUID();
    expect(await call(`/v2/deployments/${unknown}`)).toEqual({ status: 404, body: { detail: `Deployment ID ${unknown} not found.` } });
    const calls = fake.calls.length;
    expect(await call('/v2/deployments/not-a-uuid')).toEqual({ status: 404, body: { detail: 'Deployment ID not-a-uuid not found.' } });
    expect(fake.calls.length).toBe(calls);
  });

  it('patches: new revision from source_revision_config, secrets replaced, null leaves a field alone', async () => {
    const d = await create('patch-me', { secrets: [{ name: 'OLD', value: '1' }] });
    const patched = await call(`/v2/deployments/${d.id}`, {
      method: 'PATCH',
      json: {
        source_revision_config: { langgraph_config_path: 'langgraph.json', source_tarball_path: 'uploads/x.tgz' },
        secrets: [{ name: 'NEW', value: '2' }],
      },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.latest_revision_id).not.toBe(d.latest_revision_id);
    expect(patched.body.secrets).toEqual([{ name: 'NEW' }]);
    expect(fake.callsOf('updateDeployment').at(-1)).toMatchObject({ tenantId: tenantA, deploymentId: d.id, replaceSecrets: true });

    const untouched = await call(`/v2/deployments/${d.id}`, { method: 'PATCH', json: { source_revision_config: null, secrets: null } });
    expect(untouched.body).toMatchObject({ latest_revision_id: patched.body.latest_revision_id, secrets: [{ name: 'NEW' }] });
    const sent = fake.callsOf('updateDeployment').at(-1)!;
    expect(sent.replaceSecrets).toBe(false);
    expect(sent.sourceRevisionConfig).toBeUndefined();

    const cleared = await call(`/v2/deployments/${d.id}`, { method: 'PATCH', json: { secrets: [] } });
    expect(cleared.body.secrets).toEqual([]);

    expect(await invalid(`/v2/deployments/${d.id}`, { method: 'PATCH', json: { name: 'rename' } })).toEqual([['body', 'name']]);
    expect(await invalid(`/v2/deployments/${d.id}`, { method: 'PATCH', json: { source_revision_config: { image: 'x' } } })).toEqual([
      ['body', 'source_revision_config', 'image'],
    ]);
    expect(await invalid(`/v2/deployments/${d.id}`, { method: 'PATCH', json: { secrets: {} } })).toEqual([['body', 'secrets']]);
    // A control-plane conflict is a 409 with its message.
    expect(await call(`/v2/deployments/${d.id}`, { method: 'PATCH', json: { source_config: { deployment_type: 'prod' } } })).toEqual({
      status: 409,
      body: { detail: 'deployment_type cannot change' },
    });
    expect((await call(`/v2/deployments/${randomUUID()}`, { method: 'PATCH', json: {} })).status).toBe(404);
  });

  it('deletes with 204; then the deployment is 404', async () => {
    const d = await create('delete-me');
    expect((await call(`/v2/deployments/${d.id}`, { method: 'DELETE', key: keyB })).status).toBe(404);
    const res = await fetch(`${gateway.url}/v2/deployments/${d.id}`, { method: 'DELETE', headers: { 'x-api-key': keyA } });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
    expect((await call(`/v2/deployments/${d.id}`)).status).toBe(404);
    expect((await call(`/v2/deployments/${d.id}`, { method: 'DELETE' })).status).toBe(404);
  });
});

describe('deployment status', () => {
  it('shows the status the control plane derived, with its message: FAILED when the only revision failed', async () => {
    const d = await create('only-failed');
    const why = `the latest revision ${d.latest_revision_id} failed to build (BUILD_FAILED: npm ci failed) and no revision serves`;
    Object.assign(fake.deployments.get(d.id)!, { status: 'FAILED', statusMessage: why });
    expect((await call(`/v2/deployments/${d.id}`)).body).toMatchObject({ status: 'FAILED', status_message: why, active_revision_id: null });
    const listed = await call('/v2/deployments?name_contains=only-failed');
    expect(listed.body.resources).toMatchObject([{ name: 'only-failed', status: 'FAILED', status_message: why }]);
    // A status this gateway does not know (a newer control plane's) reads UNKNOWN, not a 500.
    Object.assign(fake.deployments.get(d.id)!, { status: 'UNSPECIFIED', statusMessage: '' });
    expect((await call(`/v2/deployments/${d.id}`)).body).toMatchObject({ status: 'UNKNOWN', status_message: null });
  });
});

describe('revisions', () => {
  it('lists newest first with paging and a status filter, gets one, redeploys it', async () => {
    const d = await create('revs', { source_revision_config: { langgraph_config_path: 'langgraph.json' } });
    const second = await call(`/v2/deployments/${d.id}`, { method: 'PATCH', json: { source_revision_config: { source_tarball_path: 'uploads/2.tgz' } } });
    const list = await call(`/v2/deployments/${d.id}/revisions`);
    expect(list.status).toBe(200);
    expect(list.body.resources.map((r: Json) => r.id)).toEqual([second.body.latest_revision_id, d.latest_revision_id]);
    expect(list.body.offset).toBe(2);
    expect(list.body.resources[1]).toEqual({
      id: d.latest_revision_id,
      deployment_id: d.id,
      status: 'AWAITING_SOURCE',
      source: 'internal_source',
      source_revision_config: { langgraph_config_path: 'langgraph.json' },
      status_message: '',
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const page = await call(`/v2/deployments/${d.id}/revisions?limit=1&offset=1`);
    expect(page.body).toMatchObject({ resources: [{ id: d.latest_revision_id }], offset: 2 });
    const queued = await call(`/v2/deployments/${d.id}/revisions?status=QUEUED,%20DEPLOYED`);
    expect(queued.body.resources.map((r: Json) => r.id)).toEqual([second.body.latest_revision_id]);
    expect(fake.callsOf('listRevisions').at(-1)).toMatchObject({ statuses: [RevisionStatus.QUEUED, RevisionStatus.DEPLOYED] });

    expect(await invalid(`/v2/deployments/${d.id}/revisions?status=QUEUED,NOPE`, {})).toEqual([['query', 'status', 1]]);
    expect(await invalid(`/v2/deployments/${d.id}/revisions?limit=500`, {})).toEqual([['query', 'limit']]);
    expect(await invalid(`/v2/deployments/${d.id}/revisions?remote_reconciled=true`, {})).toEqual([['query', 'remote_reconciled']]);

    const one = await call(`/v2/deployments/${d.id}/revisions/${d.latest_revision_id}`);
    expect(one).toMatchObject({ status: 200, body: { id: d.latest_revision_id, status: 'AWAITING_SOURCE' } });
    expect((await call(`/v2/deployments/${d.id}/revisions/${d.latest_revision_id}`, { key: keyB })).status).toBe(404);
    expect(await call(`/v2/deployments/${d.id}/revisions/nope`)).toEqual({ status: 404, body: { detail: 'Revision ID nope not found.' } });
    expect((await call(`/v2/deployments/${d.id}/revisions/${randomUUID()}`)).status).toBe(404);

    const redeployed = await call(`/v2/deployments/${d.id}/revisions/${d.latest_revision_id}/redeploy`, { method: 'POST' });
    expect(redeployed).toMatchObject({ status: 200, body: { id: d.id, active_revision_id: d.latest_revision_id, deployment_url: `${gateway.url}/d/${d.id}` } });
    fake.revisions.get(d.latest_revision_id)!.status = 'BUILD_FAILED';
    expect(await call(`/v2/deployments/${d.id}/revisions/${d.latest_revision_id}/redeploy`, { method: 'POST' })).toEqual({
      status: 409,
      body: { detail: `Revision ${d.latest_revision_id} failed; it cannot be redeployed` },
    });
    expect((await call(`/v2/deployments/${d.id}/revisions/${randomUUID()}/redeploy`, { method: 'POST' })).status).toBe(404);
  });
});

describe('logs', () => {
  it('reads a revision’s logs from an offset, by type, and the latest revision’s', async () => {
    const d = await create('logs');
    const rev = d.latest_revision_id as string;
    const entries = [fake.addLog(rev, 'build', 'npm ci'), fake.addLog(rev, 'build', 'added 3 packages'), fake.addLog(rev, 'deploy', 'listening', 'info')];
    const all = await call(`/v2/deployments/${d.id}/revisions/${rev}/logs`);
    expect(all.status).toBe(200);
    expect(all.body).toEqual({
      logs: entries.map((e) => ({ id: Number(e.id), timestamp: expect.any(String), level: 'info', message: e.message, type: e.type })),
      next_offset: Number(entries[2]!.id),
      revision_id: rev,
    });
    const after = await call(`/v2/deployments/${d.id}/revisions/${rev}/logs?offset=${entries[0]!.id}&limit=1`);
    expect(after.body).toMatchObject({ logs: [{ message: 'added 3 packages' }], next_offset: Number(entries[1]!.id) });
    const deploy = await call(`/v2/deployments/${d.id}/logs?type=deploy`);
    expect(deploy.body).toMatchObject({ logs: [{ message: 'listening', type: 'deploy' }], revision_id: rev });
    expect(fake.callsOf('getRevisionLogs').at(-1)).toMatchObject({ revisionId: '', type: 'deploy', limit: 100, offset: 0n });
    const none = await call(`/v2/deployments/${d.id}/logs?offset=${entries[2]!.id}`);
    expect(none.body).toEqual({ logs: [], next_offset: Number(entries[2]!.id), revision_id: rev });

    for (const q of ['limit=0', 'limit=1001', 'offset=-5', 'type=runtime', 'level=error']) {
      expect(await invalid(`/v2/deployments/${d.id}/logs?${q}`, {})).toEqual([['query', q.split('=')[0]]]);
      expect(await invalid(`/v2/deployments/${d.id}/revisions/${rev}/logs?${q}`, {})).toEqual([['query', q.split('=')[0]]]);
    }
    expect((await call(`/v2/deployments/${d.id}/logs`, { key: keyB })).status).toBe(404);
    expect((await call(`/v2/deployments/${d.id}/revisions/${randomUUID()}/logs`)).status).toBe(404);
  });
});

/** Sends `body` as a raw upload; `chunked` streams it in pieces without a Content-Length. */
function upload(base: string, id: string, body: Buffer, options: { type?: string; chunked?: boolean; key?: string; contentLength?: number } = {}) {
  return new Promise<{ status: number; body: Json }>((resolve, reject) => {
    const req = http.request(`${base}/v2/deployments/${id}/upload`, {
      method: 'POST',
      headers: {
        'x-api-key': options.key ?? keyA,
        'content-type': options.type ?? 'application/gzip',
        ...(options.chunked ? {} : { 'content-length': String(options.contentLength ?? body.length) }),
      },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString() || 'null') }));
    });
    // The gateway may answer (413) and close before the whole body is sent.
    req.on('error', (error) => (req.writableEnded ? undefined : reject(error)));
    if (options.contentLength !== undefined) {
      req.end(body);
      return;
    }
    if (!options.chunked) {
      req.end(body);
      return;
    }
    let at = 0;
    const step = 300_000;
    const next = () => {
      if (req.destroyed) return;
      if (at >= body.length) return void req.end();
      req.write(body.subarray(at, at + step), next);
      at += step;
    };
    next();
  });
}

describe('POST /v2/deployments/{id}/upload', () => {
  it('streams a multi-MiB tarball to the control plane in ≤ 1 MiB chunks and answers 201', async () => {
    const d = await create('upload-me');
    const body = tarGzOfSize(5 * UPLOAD_CHUNK_BYTES + 12345);
    for (const chunked of [false, true]) {
      const before = new Set(fake.uploads.keys());
      const res = await upload(gateway.url, d.id, body, { chunked });
      expect(res.status).toBe(201);
      const stored = [...fake.uploads.values()].find((u) => !before.has(u.id))!;
      expect(res.body).toEqual({ object_path: `uploads/${stored.id}.tgz`, revision_id: chunked ? null : d.latest_revision_id });
      expect(stored.chunks).toEqual([...Array(5).fill(UPLOAD_CHUNK_BYTES), 12345]);
      expect(Buffer.concat(stored.sha).equals(body)).toBe(true);
      expect(stored.complete).toBe(true);
      expect(stored.tenantId).toBe(tenantA);
    }
    // Only the last call says last; later calls carry the upload_id of the first answer.
    const calls = fake.callsOf('uploadSource').slice(-6);
    expect(calls.map((c) => c.last)).toEqual([false, false, false, false, false, true]);
    expect(calls[0]!.uploadId).toBe('');
    expect(new Set(calls.slice(1).map((c) => c.uploadId)).size).toBe(1);

    // Exactly one chunk's worth: one call, marked last.
    const exact = await upload(gateway.url, d.id, tarGzOfSize(UPLOAD_CHUNK_BYTES), { type: 'application/octet-stream' });
    expect(exact.status).toBe(201);
    expect(fake.callsOf('uploadSource').at(-1)).toMatchObject({ last: true, data: UPLOAD_CHUNK_BYTES });
  });

  it('refuses an empty body (422), other content types (415), unknown deployments (404), too large (413)', async () => {
    const d = await create('upload-bad');
    expect(await upload(gateway.url, d.id, Buffer.alloc(0))).toMatchObject({ status: 422, body: { detail: [{ loc: ['body'] }] } });
    expect(await upload(gateway.url, d.id, Buffer.from('{}'), { type: 'application/json' })).toMatchObject({ status: 415 });
    expect(await upload(gateway.url, d.id, tarGz(), { key: keyB })).toEqual({ status: 404, body: { detail: `Deployment ID ${d.id} not found.` } });
    expect(await upload(gateway.url, 'nope', tarGz())).toMatchObject({ status: 404 });
    const calls = fake.callsOf('uploadSource').length;
    // A declared length beyond 200 MB is refused before anything is read.
    expect(await upload(gateway.url, d.id, Buffer.from('x'), { contentLength: 200 * 1024 * 1024 + 1 })).toMatchObject({ status: 413 });
    expect(fake.callsOf('uploadSource').length).toBe(calls);
  });

  it('stops a streamed body at the limit with 413, without completing the upload', async () => {
    const d = await create('upload-big');
    const controlPlane = new ControlPlaneClients(fake.address);
    const small: RunningServer = await listen(
      createGatewayApp({
        logger: silentLogger(),
        store: gateway.store,
        readiness: {},
        controlPlane,
        maxUploadBytes: 3 * UPLOAD_CHUNK_BYTES,
      }),
      '127.0.0.1',
      0,
    );
    try {
      const before = new Set(fake.uploads.keys());
      const res = await upload(small.url, d.id, tarGzOfSize(6 * UPLOAD_CHUNK_BYTES), { chunked: true });
      expect(res.status).toBe(413);
      expect(res.body.detail).toContain(`larger than ${3 * UPLOAD_CHUNK_BYTES} bytes`);
      const started = [...fake.uploads.values()].filter((u) => !before.has(u.id));
      expect(started.every((u) => !u.complete && u.bytes <= 3 * UPLOAD_CHUNK_BYTES)).toBe(true);
    } finally {
      await small.close();
      controlPlane.close();
    }
  });
});

describe('POST /v2/deployments/{id}/webhook-secret', () => {
  it('answers a new whsec_ secret each time, 404 for another tenant or an unknown id, 422 for any field; never logs it', async () => {
    const d = await create('hooked');
    const first = await call(`/v2/deployments/${d.id}/webhook-secret`, { method: 'POST' });
    expect(first).toEqual({
      status: 201,
      body: { secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]+=*$/), created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) },
    });
    expect(first.body.secret).toBe(fake.webhookSecrets.get(d.id));
    expect(fake.callsOf('rotateWebhookSecret').at(-1)).toMatchObject({ tenantId: tenantA, deploymentId: d.id });
    const second = await call(`/v2/deployments/${d.id}/webhook-secret`, { method: 'POST', json: {} });
    expect(second.status).toBe(201);
    expect(second.body.secret).toMatch(/^whsec_/);
    expect(second.body.secret).not.toBe(first.body.secret);
    // It is in no other answer about the deployment.
    expect(JSON.stringify((await call(`/v2/deployments/${d.id}`)).body)).not.toContain('whsec_');

    const calls = fake.callsOf('rotateWebhookSecret').length;
    expect(await call(`/v2/deployments/${d.id}/webhook-secret`, { method: 'POST', key: keyB })).toEqual({
      status: 404,
      body: { detail: `Deployment ID ${d.id} not found.` },
    });
    const unknown = randomUUID();
    expect(await call(`/v2/deployments/${unknown}/webhook-secret`, { method: 'POST' })).toEqual({
      status: 404,
      body: { detail: `Deployment ID ${unknown} not found.` },
    });
    expect((await call('/v2/deployments/not-an-id/webhook-secret', { method: 'POST' })).status).toBe(404);
    expect(await invalid(`/v2/deployments/${d.id}/webhook-secret`, { method: 'POST', json: { secret: 'whsec_mine' } })).toEqual([['body', 'secret']]);
    // The 422 rotated nothing.
    expect(fake.callsOf('rotateWebhookSecret').length).toBe(calls + 2);

    expect(logged).toContain('webhook-secret');
    expect(logged).not.toContain(first.body.secret);
    expect(logged).not.toContain(second.body.secret);
    expect(logged).not.toContain('whsec_');
  });
});

describe('OpenAPI', () => {
  it('documents every deployment endpoint, the upload as a binary body', async () => {
    const doc = (await (await fetch(`${gateway.url}/openapi.json`)).json()) as Json;
    const paths = doc.paths as Json;
    expect(
      Object.keys(paths.paths ?? paths)
        .filter((p) => p.startsWith('/v2/deployments'))
        .sort(),
    ).toEqual([
      '/v2/deployments',
      '/v2/deployments/{deployment_id}',
      '/v2/deployments/{deployment_id}/events',
      '/v2/deployments/{deployment_id}/logs',
      '/v2/deployments/{deployment_id}/revisions',
      '/v2/deployments/{deployment_id}/revisions/{revision_id}',
      '/v2/deployments/{deployment_id}/revisions/{revision_id}/logs',
      '/v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy',
      '/v2/deployments/{deployment_id}/secrets/{name}',
      '/v2/deployments/{deployment_id}/upload',
      '/v2/deployments/{deployment_id}/webhook-secret',
    ]);
    expect(paths['/v2/deployments/{deployment_id}/webhook-secret'].post.responses['201']).toBeDefined();
    expect(Object.keys(paths['/v2/deployments'])).toEqual(['post', 'get']);
    expect(Object.keys(paths['/v2/deployments/{deployment_id}']).sort()).toEqual(['delete', 'get', 'patch']);
    expect(paths['/v2/deployments/{deployment_id}/upload'].post.requestBody.content['application/gzip']).toEqual({
      schema: { type: 'string', format: 'binary' },
    });
    expect(paths['/v2/deployments'].post.responses['201']).toBeDefined();
    expect(paths['/v2/deployments'].post.security).toBeDefined();
    // A log answers a JSON page, or with follow=true a stream of events.
    expect(Object.keys(paths['/v2/deployments/{deployment_id}/revisions/{revision_id}/logs'].get.responses['200'].content).sort()).toEqual([
      'application/json',
      'text/event-stream',
    ]);
    expect(Object.keys(paths['/v2/deployments/{deployment_id}/events'].get.responses['200'].content)).toEqual(['text/event-stream']);
  });
});
