/**
 * Share links through the `langsmith` SDK's own methods (`client.runs.share`,
 * `client.threads.share`, `client.public.runs`) against a real gateway, export-worker and Postgres:
 * a token reads its trace or thread and nothing else, read-only and without a credential, until it
 * is revoked; another tenant can neither make, revoke nor guess one; public reads are rate-limited.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { listen, type RunningServer } from '@berth/http';
import { silentLogger } from '@berth/log';
import { Client, Langsmith } from 'langsmith';
import { traceable } from 'langsmith/traceable';
import { createGatewayApp } from '../../app.js';
import { ControlPlaneClients } from '../../control-plane.js';
import { ExportWorkerClients } from '../../export-worker.js';
import { boundCredentialServer, startTraceStack, type TraceStack } from '../../__tests__/trace-stack.js';

let stack: TraceStack;
let client: Client;
let projectId: string;
/** Each turn's root run id and its llm run's id. */
const turns: { thread: string; root: string; llm: string }[] = [];
const PROJECT = 'shared-agent';

/** Someone with a link and no credential (the SDK wants some key; the public routes ignore it). */
const reader = (baseURL = stack.gateway.url) => new Langsmith({ baseURL, apiKey: 'no-key', maxRetries: 0 });

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

beforeAll(async () => {
  stack = await startTraceStack('gw_trace_share');
  client = new Client({ apiUrl: stack.gateway.url, apiKey: stack.keyA });
  for (const thread of ['thread-one', 'thread-one', 'thread-two']) {
    const llm = traceable(async (q: string) => `echo ${q}`, { name: 'fake-llm', run_type: 'llm', client, project_name: PROJECT, tracingEnabled: true });
    await traceable(async (q: string) => ({ answer: await llm(q) }), {
      name: 'agent',
      client,
      project_name: PROJECT,
      tracingEnabled: true,
      metadata: { thread_id: thread },
    })(`to ${thread}`);
  }
  await client.awaitPendingTraceBatches();
  projectId = (await client.readProject({ projectName: PROJECT })).id;
  const runs = await collect(client.runs.query({ project_ids: [projectId], selects: ['NAME', 'TRACE_ID', 'THREAD_ID', 'START_TIME', 'IS_ROOT'] }));
  for (const root of runs.filter((r) => r.is_root).sort((a, b) => a.start_time!.localeCompare(b.start_time!))) {
    turns.push({ thread: root.thread_id!, root: root.id!, llm: runs.find((r) => !r.is_root && r.trace_id === root.id)!.id! });
  }
}, 60_000);
afterAll(async () => stack?.close());

describe('a shared trace', () => {
  it('reads its runs with the token and no credential, previews and not full payloads; nothing of another trace', async () => {
    const [first, second] = turns;
    const { share_token: token } = await client.runs.share.create(first!.llm, { session_id: projectId, trace_id: first!.root });
    expect(token).toEqual(expect.any(String));
    // Sharing again (the root this time: a child shares its trace) answers the same link.
    expect((await client.runs.share.create(first!.root, { session_id: projectId, trace_id: first!.root })).share_token).toBe(token);

    const { items } = await reader().public.runs.query(token!, { selects: ['NAME', 'PARENT_RUN_ID', 'INPUTS_PREVIEW'] });
    expect(items).toEqual([
      { id: first!.root, name: 'agent', inputs_preview: 'to thread-one' },
      { id: first!.llm, name: 'fake-llm', parent_run_id: first!.root, inputs_preview: 'to thread-one' },
    ]);
    const run = await reader().public.runs.retrieve(first!.llm, { share_token: token!, selects: ['NAME', 'TRACE_ID'], start_time: new Date().toISOString() });
    expect(run).toEqual({ id: first!.llm, name: 'fake-llm', trace_id: first!.root });
    await expect(
      reader().public.runs.retrieve(second!.root, { share_token: token!, selects: ['NAME'], start_time: new Date().toISOString() }),
    ).rejects.toMatchObject({
      status: 404,
    });
    // Full inputs are not for a link's reader.
    const full = await fetch(`${stack.gateway.url}/api/v2/public/${token}/runs/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ selects: ['INPUTS'] }),
    });
    expect(full.status).toBe(422);
  });

  it('unsharing revokes the link for good; sharing again makes a new one', async () => {
    const [, second] = turns;
    const { share_token: old } = await client.runs.share.create(second!.root, { session_id: projectId, trace_id: second!.root });
    expect((await reader().public.runs.query(old!, {})).items).toHaveLength(2);
    await client.runs.share.delete(second!.root, { session_id: projectId });
    await expect(reader().public.runs.query(old!, {})).rejects.toMatchObject({ status: 404 });
    await client.runs.share.delete(second!.root, { session_id: projectId }); // idempotent
    const { share_token: renewed } = await client.runs.share.create(second!.root, { session_id: projectId, trace_id: second!.root });
    expect(renewed).not.toBe(old);
    expect((await reader().public.runs.query(renewed!, {})).items).toHaveLength(2);
    await expect(reader().public.runs.query(old!, {})).rejects.toMatchObject({ status: 404 });
  });
});

describe('a shared thread', () => {
  it("reads the runs of the thread's traces, not another thread's; retrieve answers the token until it is unshared", async () => {
    const ones = turns.filter((t) => t.thread === 'thread-one');
    const two = turns.find((t) => t.thread === 'thread-two')!;
    const { share_token: token } = await client.threads.share.create('thread-one', { project_id: projectId });
    expect((await client.threads.share.retrieve('thread-one', { project_id: projectId })).share_token).toBe(token);
    const { items } = await reader().public.runs.query(token!, { selects: ['NAME'] });
    expect(items!.map((r) => r.id).sort()).toEqual(ones.flatMap((t) => [t.root, t.llm]).sort());
    const opts = { share_token: token!, selects: ['NAME'], start_time: new Date().toISOString() };
    expect(await reader().public.runs.retrieve(ones[1]!.llm, opts)).toEqual({ id: ones[1]!.llm, name: 'fake-llm' });
    await expect(reader().public.runs.retrieve(two.llm, opts)).rejects.toMatchObject({ status: 404 });

    await client.threads.share.delete('thread-one', { project_id: projectId });
    await expect(client.threads.share.retrieve('thread-one', { project_id: projectId })).rejects.toMatchObject({ status: 404 });
    await expect(reader().public.runs.query(token!, {})).rejects.toMatchObject({ status: 404 });
    await expect(client.threads.share.create('no-such-thread', { project_id: projectId })).rejects.toMatchObject({ status: 404 });
  });
});

describe('from the attacker’s side', () => {
  let bound: RunningServer | undefined;
  afterAll(async () => bound?.close());

  it('another tenant can neither share nor unshare the trace; a tracing credential may not share; a made-up token reads nothing', async () => {
    const [first] = turns;
    const { share_token: token } = await client.runs.share.create(first!.root, { session_id: projectId, trace_id: first!.root });
    const other = new Client({ apiUrl: stack.gateway.url, apiKey: stack.keyB });
    await expect(other.runs.share.create(first!.root, { session_id: projectId, trace_id: first!.root })).rejects.toMatchObject({ status: 404 });
    await expect(other.threads.share.create('thread-one', { project_id: projectId })).rejects.toMatchObject({ status: 404 });
    await expect(other.threads.share.retrieve('thread-one', { project_id: projectId })).rejects.toMatchObject({ status: 404 });
    await other.runs.share.delete(first!.root, { session_id: projectId }); // answers as always, and revokes nothing of A's
    expect((await reader().public.runs.query(token!, {})).items).toHaveLength(2);
    // A run id and a trace of the project that do not go together.
    await expect(client.runs.share.create(turns[2]!.llm, { session_id: projectId, trace_id: first!.root })).rejects.toMatchObject({ status: 404 });

    bound = await boundCredentialServer(stack, { id: projectId, name: PROJECT });
    const deployment = new Client({ apiUrl: bound.url, apiKey: stack.keyA });
    await expect(deployment.runs.share.create(first!.root, { session_id: projectId, trace_id: first!.root })).rejects.toMatchObject({ status: 403 });

    for (const guess of [randomUUID(), 'not-a-token', token!.toUpperCase()]) {
      await expect(reader().public.runs.query(guess, {})).rejects.toMatchObject({ status: 404 });
    }
  });

  it('public reads are rate-limited per address (429), before the token is even looked at', async () => {
    const app = createGatewayApp({
      logger: silentLogger(),
      store: stack.gateway.store,
      readiness: {},
      controlPlane: new ControlPlaneClients(undefined),
      exportWorker: new ExportWorkerClients(stack.worker.address),
      publicTraceReadRateLimit: 3,
    });
    const server = await listen(app, '127.0.0.1', 0);
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++)
        statuses.push(
          (
            await fetch(`${server.url}/api/v2/public/${randomUUID()}/runs/query`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: '{}',
            })
          ).status,
        );
      expect(statuses).toEqual([404, 404, 404, 429]);
    } finally {
      await server.close();
    }
  });
});
