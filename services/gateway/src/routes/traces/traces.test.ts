/**
 * The LangSmith-compatible trace API end to end: the official `langsmith` client (its defaults:
 * batched, multipart, gzip) writing through a real gateway to a real export-worker over gRPC and
 * Postgres, and reading back with the same client; the JSON batch and single-run paths; runs that
 * converge whatever order their parts arrive in; malformed runs refused while their batch is kept;
 * tenants and tracing-project credentials kept apart.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { PendingPatchSweeper, type RunningExportWorker } from '@berth/export-worker';
import { listen, type RunningServer } from '@berth/http';
import { silentLogger } from '@berth/log';
import { parseMetrics, sampleSum, scrape } from '@berth/metrics';
import { Client, RunTree } from 'langsmith';
import { traceable } from 'langsmith/traceable';
import { createGatewayApp } from '../../app.js';
import { ControlPlaneClients } from '../../control-plane.js';
import type { RunningGateway } from '../../index.js';
import { boundCredentialServer, rootRun, startTraceStack, type TraceStack } from '../../__tests__/trace-stack.js';

type Json = Record<string, any>;

let stack: TraceStack;
let worker: RunningExportWorker;
let gateway: RunningGateway;
let keyA: string;
let keyB: string;
/** Every request the langsmith client made: method, path, content type and encoding. */
const seen: { method: string; path: string; type: string; encoding: string }[] = [];

const observingFetch = (async (input: any, init?: any) => {
  const headers = new Headers(init?.headers);
  seen.push({
    method: init?.method ?? 'GET',
    path: new URL(String(input)).pathname,
    type: headers.get('content-type') ?? '',
    encoding: headers.get('content-encoding') ?? '',
  });
  return fetch(input, init);
}) as typeof fetch;

function clientOf(key: string, config: Json = {}): Client {
  return new Client({ apiUrl: gateway.url, apiKey: key, fetchImplementation: observingFetch, ...config });
}

async function call(
  path: string,
  init: { method?: string; key?: string; json?: unknown; body?: Buffer | string; headers?: Record<string, string>; base?: string } = {},
) {
  const res = await fetch(`${init.base ?? gateway.url}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': init.key ?? keyA, ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}), ...init.headers },
    body: init.body ?? (init.json !== undefined ? JSON.stringify(init.json) : undefined),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : undefined) as Json };
}

function multipart(parts: { name: string; value: unknown }[]): { body: Buffer; type: string } {
  const boundary = `----berth${randomUUID()}`;
  const chunks = parts.map(
    (p) =>
      `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"\r\nContent-Type: application/json\r\n\r\n${typeof p.value === 'string' ? p.value : JSON.stringify(p.value)}\r\n`,
  );
  return { body: Buffer.from(`${chunks.join('')}--${boundary}--\r\n`), type: `multipart/form-data; boundary=${boundary}` };
}

const run = rootRun;

beforeAll(async () => {
  stack = await startTraceStack('gw_traces');
  ({ worker, gateway, keyA, keyB } = stack);
});
afterAll(async () => stack?.close());

describe('the langsmith client with its defaults', () => {
  let client: Client;
  let rootId: string;
  const project = 'my-agent';

  beforeAll(async () => {
    client = clientOf(keyA);
    const traced = { client, project_name: project, tracingEnabled: true };
    const llm = traceable(async (q: string) => ({ content: `echo ${q}`, usage_metadata: { input_tokens: 12, output_tokens: 5, total_tokens: 17 } }), {
      name: 'fake-llm',
      run_type: 'llm',
      ...traced,
    });
    const tool = traceable(
      async (_q: string): Promise<string> => {
        throw new Error('the tool broke');
      },
      { name: 'broken-tool', run_type: 'tool', ...traced },
    );
    const agent = traceable(
      async (q: string) => {
        const answer = await llm(q);
        await tool(q).catch(() => undefined);
        return { answer: answer.content };
      },
      { name: 'agent', run_type: 'chain', tags: ['prod'], metadata: { user: 'bob' }, ...traced },
    );
    await agent('hello');
    await client.awaitPendingTraceBatches();
    const roots = await collect(client.listRuns({ projectName: project, isRoot: true }));
    rootId = roots[0]!.id;
  });

  it('sends gzip multipart batches, as /info invites', async () => {
    const info = await call('/info', { key: '' });
    expect(info.body.batch_ingest_config).toMatchObject({ use_multipart_endpoint: true });
    expect(info.body.instance_flags).toMatchObject({ gzip_body_enabled: true, zstd_compression_enabled: false });
    const ingests = seen.filter((r) => r.path === '/runs/multipart');
    expect(ingests.length).toBeGreaterThan(0);
    expect(ingests.every((r) => r.encoding === 'gzip' && r.type.startsWith('multipart/form-data'))).toBe(true);
  });

  it('stores the nested runs, read back with readRun', async () => {
    const root = await client.readRun(rootId, { loadChildRuns: true });
    expect(root).toMatchObject({ name: 'agent', run_type: 'chain', status: 'success', tags: ['prod'], outputs: { answer: 'echo hello' } });
    expect(root.inputs).toEqual({ input: 'hello' });
    expect(root.extra?.metadata).toMatchObject({ user: 'bob' });
    const children = root.child_runs!;
    expect(children.map((c) => c.name).sort()).toEqual(['broken-tool', 'fake-llm']);
    const llm = children.find((c) => c.name === 'fake-llm')!;
    expect(llm).toMatchObject({ run_type: 'llm', prompt_tokens: 12, completion_tokens: 5, total_tokens: 17, parent_run_id: rootId, trace_id: rootId });
    const tool = children.find((c) => c.name === 'broken-tool')!;
    expect(tool.status).toBe('error');
    expect(tool.error).toContain('the tool broke');
  });

  it('lists runs by project, trace, parent, run_type, error, start_time and filter', async () => {
    const names = async (props: Json) => (await collect(client.listRuns({ projectName: project, ...props }))).map((r) => r.name).sort();
    expect(await names({})).toEqual(['agent', 'broken-tool', 'fake-llm']);
    expect(await names({ traceId: rootId })).toEqual(['agent', 'broken-tool', 'fake-llm']);
    expect(await names({ parentRunId: rootId })).toEqual(['broken-tool', 'fake-llm']);
    expect(await names({ runType: 'llm' })).toEqual(['fake-llm']);
    expect(await names({ error: true })).toEqual(['broken-tool']);
    expect(await names({ error: false })).toEqual(['agent', 'fake-llm']);
    expect(await names({ startTime: new Date(Date.now() + 60_000) })).toEqual([]);
    expect(await names({ startTime: new Date(Date.now() - 600_000) })).toHaveLength(3);
    expect(await names({ filter: 'and(eq(run_type, "llm"), gt(total_tokens, 10))' })).toEqual(['fake-llm']);
    expect(await names({ filter: 'has(tags, "prod")' })).toEqual(['agent']);
    expect(await names({ limit: 2 })).toHaveLength(2);
  });

  it('a filter that does not parse is a 422 naming it', async () => {
    const res = await call('/runs/query', { method: 'POST', json: { filter: 'eq(name, ' } });
    expect(res.status).toBe(422);
    expect(res.body.detail[0].loc).toEqual(['body', 'filter']);
  });

  it('pages with cursors, newest first, each run once', async () => {
    const tracer = clientOf(keyA);
    const base = Date.now() - 3_600_000;
    for (let i = 0; i < 5; i++) {
      const tree = new RunTree({
        name: `paged-${i}`,
        run_type: 'chain',
        project_name: 'paging',
        client: tracer,
        tracingEnabled: true,
        start_time: base + i * 1000,
      });
      await tree.postRun();
      await tree.end({ i });
      await tree.patchRun();
    }
    await tracer.awaitPendingTraceBatches();
    const { id } = await tracer.readProject({ projectName: 'paging' });
    const pages: string[][] = [];
    let cursor: string | null = null;
    do {
      const res = await call('/runs/query', { method: 'POST', json: { session: [id], limit: 2, ...(cursor ? { cursor } : {}) } });
      expect(res.status).toBe(200);
      pages.push(res.body.runs.map((r: Json) => r.name));
      cursor = res.body.cursors.next;
    } while (cursor);
    expect(pages).toEqual([['paged-4', 'paged-3'], ['paged-2', 'paged-1'], ['paged-0']]);
  });
});

describe('the other ingest paths', () => {
  it('autoBatchTracing off: POST /runs then PATCH /runs/{id}', async () => {
    const client = clientOf(keyA, { autoBatchTracing: false });
    const tree = new RunTree({ name: 'unbatched', run_type: 'tool', project_name: 'direct', client, tracingEnabled: true, inputs: { x: 1 } });
    await tree.postRun();
    await tree.end({ y: 2 });
    await tree.patchRun();
    const stored = await client.readRun(tree.id);
    expect(stored).toMatchObject({ name: 'unbatched', inputs: { x: 1 }, outputs: { y: 2 }, status: 'success' });
    expect(seen.some((r) => r.method === 'PATCH' && r.path === `/runs/${tree.id}`)).toBe(true);
  });

  it("POST /runs/batch (the client's JSON batch)", async () => {
    const client = clientOf(keyA);
    const created = run({ session_name: 'batched' });
    await client.batchIngestRuns({ runCreates: [created as any], runUpdates: [{ ...created, end_time: Date.now(), outputs: { ok: true } } as any] });
    expect(await client.readRun(created.id)).toMatchObject({
      outputs: { ok: true },
      status: 'success',
      session_id: (await client.readProject({ projectName: 'batched' })).id,
    });
  });

  it('a patch before its create, and a create delivered twice, converge to one run', async () => {
    const created = run({ session_name: 'converge' });
    const patch = { id: created.id, trace_id: created.trace_id, dotted_order: created.dotted_order, end_time: new Date().toISOString(), outputs: { done: 1 } };
    const first = await call('/runs/batch', { method: 'POST', json: { patch: [patch] } });
    expect(first).toMatchObject({ status: 202, body: { stored: 0, pending: 1, refused: [] } });
    expect((await call(`/runs/${created.id}`)).status).toBe(404);
    for (let i = 0; i < 2; i++)
      expect(await call('/runs/batch', { method: 'POST', json: { post: [created] } })).toMatchObject({ status: 202, body: { refused: [] } });
    const stored = await call(`/runs/${created.id}`);
    expect(stored.body).toMatchObject({ outputs: { done: 1 }, inputs: { q: 1 }, status: 'success' });
    const listed = await call('/runs/query', { method: 'POST', json: { trace: created.id } });
    expect(listed.body.runs).toHaveLength(1);
  });

  it('refuses a malformed run and keeps the rest of its batch; unknown fields are kept in extra', async () => {
    const good = run({ session_name: 'mixed' });
    const bad = run({ session_name: 'mixed', start_time: 'yesterday-ish' });
    const newer = run({ session_name: 'mixed', brand_new_field: { a: 1 } });
    const body = multipart([
      { name: `post.${good.id}`, value: { ...good, inputs: undefined } },
      { name: `post.${good.id}.inputs`, value: { big: 'x'.repeat(1000) } },
      { name: `post.${bad.id}`, value: bad },
      { name: `post.${newer.id}`, value: newer },
      { name: `attachment.${good.id}.image`, value: 'raw' },
    ]);
    const res = await call('/runs/multipart', {
      method: 'POST',
      body: gzipSync(body.body),
      headers: { 'content-type': body.type, 'content-encoding': 'gzip' },
    });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ stored: 2, pending: 0, ignored_parts: 1 });
    expect(res.body.refused).toEqual([{ id: bad.id, reason: expect.stringContaining('start_time') }]);
    expect((await call(`/runs/${good.id}`)).body.inputs).toEqual({ big: 'x'.repeat(1000) });
    expect((await call(`/runs/${newer.id}`)).body.extra).toEqual({ unrecognized_fields: { brand_new_field: { a: 1 } } });
    expect((await call(`/runs/${bad.id}`)).status).toBe(404);
  });

  it('keeps, cleaned, a run with a NUL or an unpaired surrogate (in values or keys), as the JSON routes do; refuses alone a run nested too deep', async () => {
    const good = run({ session_name: 'unstorable' });
    const nul = run({ session_name: 'unstorable', name: 'step\u0000one' });
    const surrogate = run({ session_name: 'unstorable' });
    // As text: too deep for JSON.stringify, not for JSON.parse.
    const deep = `${'['.repeat(5000)}"bottom"${']'.repeat(5000)}`;
    const nested = run({ session_name: 'unstorable' });
    const nulKey = run({ session_name: 'unstorable' });
    const body = multipart([
      { name: `post.${good.id}`, value: good },
      { name: `post.${nul.id}`, value: nul },
      { name: `post.${surrogate.id}`, value: surrogate },
      // JSON text with an escaped lone surrogate: JSON.parse makes it a string Postgres cannot encode.
      { name: `post.${surrogate.id}.outputs`, value: '{"answer": "half \\ud83d of a pair"}' },
      { name: `post.${nested.id}`, value: { ...nested, inputs: undefined } },
      { name: `post.${nested.id}.inputs`, value: `{"deep": ${deep}}` },
      { name: `post.${nulKey.id}`, value: { ...nulKey, inputs: { 'a\u0000b': 1 } } },
    ]);
    const res = await call('/runs/multipart', { method: 'POST', body: body.body, headers: { 'content-type': body.type } });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ stored: 4, pending: 0 });
    expect(res.body.refused).toEqual([{ id: nested.id, reason: expect.stringMatching(/^the run: .*nested deeper than 128 levels/) }]);
    expect((await call(`/runs/${good.id}`)).status).toBe(200);
    expect((await call(`/runs/${nul.id}`)).body.name).toBe('stepone');
    expect((await call(`/runs/${surrogate.id}`)).body.outputs).toEqual({ answer: 'half \ufffd of a pair' });
    expect((await call(`/runs/${nulKey.id}`)).body.inputs).toEqual({ ab: 1 });
    expect((await call(`/runs/${nested.id}`)).status).toBe(404);
  });

  it('a single malformed run is a 422 with the reason; a body that is not multipart is a 415', async () => {
    const res = await call('/runs', { method: 'POST', json: { ...run(), tags: 'not-a-list' } });
    expect(res.status).toBe(422);
    expect(res.body.detail[0].msg).toContain('tags');
    expect((await call('/runs/multipart', { method: 'POST', json: {} })).status).toBe(415);
  });

  it('a patch whose create never comes is swept', async () => {
    const lost = run({ session_name: 'sweep' });
    const pending = async () => sampleSum(parseMetrics((await scrape()).body), 'berth_trace_pending_run_patches');
    const before = await pending();
    await call('/runs/batch', { method: 'POST', json: { patch: [{ id: lost.id, outputs: { late: true } }] } });
    // The ingest backlog an operator sees: the patch waits for its run.
    expect(await pending()).toBe(before + 1);
    // A maximum age of 0: every patch received before the sweep's own statement is too old.
    expect(await new PendingPatchSweeper(worker.traces, silentLogger(), 0).sweep()).toBeGreaterThanOrEqual(1);
    expect(await pending()).toBe(0);
    await call('/runs/batch', { method: 'POST', json: { post: [lost] } });
    expect((await call(`/runs/${lost.id}`)).body.outputs).toBeNull();
  });
});

describe('projects', () => {
  it('create, conflict, upsert, read by id and name, list, update, delete with its runs', async () => {
    const client = clientOf(keyA);
    const created = await client.createProject({ projectName: 'crud', description: 'mine', metadata: { team: 'x' } });
    expect(created).toMatchObject({ name: 'crud', description: 'mine', extra: { metadata: { team: 'x' } } });
    await expect(client.createProject({ projectName: 'crud' })).rejects.toThrow(/409|already exists/);
    expect((await client.createProject({ projectName: 'crud', upsert: true })).id).toBe(created.id);
    expect((await client.readProject({ projectId: created.id })).name).toBe('crud');
    expect((await client.readProject({ projectName: 'crud' })).id).toBe(created.id);
    expect(await client.hasProject({ projectName: 'crud' })).toBe(true);
    const all = await collect(client.listProjects());
    expect(all.map((p) => p.name)).toEqual(expect.arrayContaining(['crud', 'my-agent']));
    expect((await collect(client.listProjects({ nameContains: 'CRU' }))).map((p) => p.name)).toEqual(['crud']);
    expect(await client.updateProject(created.id, { description: 'renamed' })).toMatchObject({ description: 'renamed' });

    const r = run({ session_id: created.id });
    expect((await call('/runs/batch', { method: 'POST', json: { post: [r] } })).body.stored).toBe(1);
    await client.deleteProject({ projectId: created.id });
    expect(await client.hasProject({ projectName: 'crud' })).toBe(false);
    expect((await call(`/runs/${r.id}`)).status).toBe(404);
    // The deleted run's id is free again: a new create stores it.
    expect((await call('/runs/batch', { method: 'POST', json: { post: [{ ...r, session_id: undefined, session_name: 'crud-again' }] } })).body.stored).toBe(1);
  });
});

describe('tenants', () => {
  it("a second tenant sees none of the first one's projects or runs", async () => {
    const a = clientOf(keyA);
    const b = clientOf(keyB);
    const project = await a.readProject({ projectName: 'my-agent' });
    const [someRun] = await collect(a.listRuns({ projectId: project.id, limit: 1 }));
    expect((await collect(b.listProjects())).map((p) => p.name)).not.toContain('my-agent');
    await expect(b.readProject({ projectName: 'my-agent' })).rejects.toThrow(/not found/);
    expect((await call(`/sessions/${project.id}`, { key: keyB })).status).toBe(404);
    expect((await call(`/runs/${someRun!.id}`, { key: keyB })).status).toBe(404);
    expect((await call('/runs/query', { method: 'POST', key: keyB, json: { session: [project.id] } })).body.runs).toEqual([]);
    expect((await call(`/sessions/${project.id}`, { method: 'DELETE', key: keyB })).status).toBe(404);
    // Its own runs under the same project name go to its own project.
    const r = run({ session_name: 'my-agent' });
    await call('/runs/batch', { method: 'POST', key: keyB, json: { post: [r] } });
    expect((await call(`/runs/${r.id}`, { key: keyB })).body.session_id).not.toBe(project.id);
  });
});

describe('a tracing-project credential', () => {
  let server: RunningServer;
  const bound = { id: randomUUID(), name: 'deployment-x' };

  beforeAll(async () => {
    server = await boundCredentialServer(stack, bound);
  });
  afterAll(async () => server?.close());

  it('writes every run into its project, whatever the run names, and reads only that project', async () => {
    const base = server.url;
    const client = new Client({ apiUrl: base, apiKey: keyA });
    const escaped = run({ session_name: 'my-agent' });
    await client.batchIngestRuns({ runCreates: [escaped as any] });
    const stored = await call(`/runs/${escaped.id}`, { base });
    expect(stored.body.session_id).toBe(bound.id);
    expect((await call(`/sessions/${bound.id}`, { base })).body).toMatchObject({ id: bound.id, name: 'deployment-x' });

    const other = await clientOf(keyA).readProject({ projectName: 'my-agent' });
    const [otherRun] = await collect(clientOf(keyA).listRuns({ projectId: other.id, limit: 1 }));
    expect((await call(`/runs/${otherRun!.id}`, { base })).status).toBe(404);
    expect((await call('/runs/query', { method: 'POST', base, json: { session: [other.id] } })).status).toBe(403);
    const mine = await call('/runs/query', { method: 'POST', base, json: {} });
    expect(mine.body.runs.map((r: Json) => r.id)).toEqual([escaped.id]);
    // A patch cannot reach a run of another project either.
    const patched = await call('/runs/batch', { method: 'POST', base, json: { patch: [{ id: otherRun!.id, outputs: { hijacked: true } }] } });
    expect(patched.body.refused).toHaveLength(1);

    expect((await call('/sessions', { base })).body.map((s: Json) => s.id)).toEqual([bound.id]);
    expect((await call(`/sessions/${other.id}`, { base })).status).toBe(403);
    expect((await call('/sessions', { method: 'POST', base, json: { name: 'new' } })).status).toBe(403);
    expect((await call(`/sessions/${bound.id}`, { method: 'DELETE', base })).status).toBe(403);
  });

  it('without an export-worker, the trace routes answer 503 with Retry-After', async () => {
    const app = createGatewayApp({ logger: silentLogger(), store: gateway.store, readiness: {}, controlPlane: new ControlPlaneClients(undefined) });
    const bare = await listen(app, '127.0.0.1', 0);
    try {
      const res = await call('/runs/query', { method: 'POST', base: bare.url, json: {} });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBeTruthy();
    } finally {
      await bare.close();
    }
  });
});

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}
