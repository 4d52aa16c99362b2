/**
 * Feedback end to end: the official `langsmith` client giving, listing, reading, updating and
 * deleting feedback through a real gateway and export-worker on Postgres; feedback sent as parts of
 * a multipart batch; each run's `feedback_stats` read back with the run and filtered on; another
 * tenant, and a credential bound to another project, kept out. (The exported column: feedback-store.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { RunningServer } from '@berth/http';
import { Client, type Run } from 'langsmith';
import { traceable } from 'langsmith/traceable';
import { boundCredentialServer, startTraceStack, type TraceStack } from '../../__tests__/trace-stack.js';

type Json = Record<string, any>;

let stack: TraceStack;
let root: Run;
let child: Run;
/** Requests the langsmith client made (method and path). */
const seen: string[] = [];

const observingFetch = (async (input: any, init?: any) => {
  seen.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`);
  return fetch(input, init);
}) as typeof fetch;

function clientOf(key: string, apiUrl = stack.gateway.url): Client {
  return new Client({ apiUrl, apiKey: key, fetchImplementation: observingFetch, callerOptions: { maxRetries: 0 } });
}

async function call(path: string, init: { method?: string; key?: string; json?: unknown; body?: Buffer; type?: string } = {}) {
  const res = await fetch(`${stack.gateway.url}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': init.key ?? stack.keyA, ...(init.json !== undefined || init.type ? { 'content-type': init.type ?? 'application/json' } : {}) },
    body: init.body ?? (init.json !== undefined ? JSON.stringify(init.json) : undefined),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json };
}

function multipart(parts: { name: string; value: unknown }[]): { body: Buffer; type: string } {
  const boundary = `----berth${randomUUID()}`;
  const chunks = parts.map(
    (p) => `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"\r\nContent-Type: application/json\r\n\r\n${JSON.stringify(p.value)}\r\n`,
  );
  return { body: Buffer.from(`${chunks.join('')}--${boundary}--\r\n`), type: `multipart/form-data; boundary=${boundary}` };
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** The stats of a run as `client.readRun` answers them. */
async function statsOf(client: Client, runId: string): Promise<Json | undefined> {
  return (await client.readRun(runId)).feedback_stats as Json | undefined;
}

beforeAll(async () => {
  stack = await startTraceStack('gw_feedback', { worker: { feedbackLimits: { maxPerRun: 4 } } });
  const client = clientOf(stack.keyA);
  const traced = { client, project_name: 'support-bot', tracingEnabled: true };
  const llm = traceable(async (q: string) => `echo ${q}`, { name: 'llm', run_type: 'llm', ...traced });
  const agent = traceable(async (q: string) => ({ answer: await llm(q) }), { name: 'agent', run_type: 'chain', ...traced });
  await agent('hello');
  await client.awaitPendingTraceBatches();
  const runs = await collect(client.listRuns({ projectName: 'support-bot' }));
  root = runs.find((r) => r.name === 'agent')!;
  child = runs.find((r) => r.name === 'llm')!;
});
afterAll(async () => stack?.close());

describe('feedback through the langsmith client', () => {
  it('is created, listed by run and by key, read, updated and deleted, with the run’s feedback_stats following', async () => {
    const client = clientOf(stack.keyA);
    const good = await client.createFeedback(root.id, 'correctness', {
      score: 1,
      comment: 'right answer',
      sourceInfo: { reviewer: 'ana' },
      sessionId: root.session_id,
    });
    const label = await client.createFeedback(root.id, 'tone', { value: 'friendly', sessionId: root.session_id });
    await client.createFeedback(child.id, 'correctness', { score: 0, sessionId: child.session_id });

    expect(await client.readFeedback(good.id)).toMatchObject({
      id: good.id,
      run_id: root.id,
      trace_id: root.trace_id,
      session_id: root.session_id,
      key: 'correctness',
      score: 1,
      comment: 'right answer',
      feedback_source: { type: 'api', metadata: { reviewer: 'ana' } },
    });
    const ofRoot = await collect(client.listFeedback({ runIds: [root.id] }));
    expect(ofRoot.map((f) => f.key).sort()).toEqual(['correctness', 'tone']);
    const correctness = await collect(client.listFeedback({ feedbackKeys: ['correctness'] }));
    expect(correctness.map((f) => [f.run_id, f.score]).sort()).toEqual(
      [
        [root.id, 1],
        [child.id, 0],
      ].sort(),
    );
    expect(await statsOf(client, root.id)).toEqual({
      correctness: { n: 1, avg: 1, stdev: 0, values: {} },
      tone: { n: 1, avg: null, stdev: null, values: { friendly: 1 } },
    });

    await client.updateFeedback(good.id, { score: 0.25, comment: null });
    expect(await client.readFeedback(good.id)).toMatchObject({ score: 0.25, comment: null });
    expect((await statsOf(client, root.id))?.correctness).toMatchObject({ n: 1, avg: 0.25 });

    await client.deleteFeedback(label.id);
    await expect(client.readFeedback(label.id)).rejects.toThrow(/404/);
    expect(Object.keys((await statsOf(client, root.id)) ?? {})).toEqual(['correctness']);
    // The SDK's default path for run-level feedback without a trace id: POST /feedback.
    expect(seen).toContain('POST /feedback');
  });

  it('sent in a multipart batch (the client’s path when it knows the trace) is stored, and a malformed part is refused alone', async () => {
    const client = clientOf(stack.keyA);
    const batched = await client.createFeedback(child.id, 'helpfulness', { score: 0.5, traceId: child.trace_id, sessionId: child.session_id });
    await client.awaitPendingTraceBatches();
    expect(seen).toContain('POST /runs/multipart');
    expect(await client.readFeedback(batched.id)).toMatchObject({ run_id: child.id, key: 'helpfulness', score: 0.5 });

    // A new run and feedback on it in the same batch, plus a feedback without a key.
    const runId = randomUUID();
    const start = new Date().toISOString();
    const feedbackId = randomUUID();
    const broken = randomUUID();
    const [odd, deep] = [randomUUID(), randomUUID()];
    let nested: unknown = 1;
    for (let i = 0; i < 200; i++) nested = [nested];
    const { body, type } = multipart([
      {
        name: `post.${runId}`,
        value: {
          id: runId,
          trace_id: runId,
          dotted_order: `${start.replace(/[-:.]/g, '')}${runId}`,
          name: 'late',
          run_type: 'chain',
          start_time: start,
          session_name: 'support-bot',
        },
      },
      { name: `feedback.${feedbackId}`, value: { id: feedbackId, run_id: runId, trace_id: runId, key: 'thumbs', score: true } },
      { name: `feedback.${broken}`, value: { id: broken, run_id: runId, trace_id: runId } },
      // What Postgres cannot store: a NUL in the key is dropped (as in runs), a value nested too deep refuses its feedback alone.
      { name: `feedback.${odd}`, value: { id: odd, run_id: runId, key: 'odd\u0000key', comment: 'x\ud800y' } },
      { name: `feedback.${deep}`, value: { id: deep, run_id: runId, key: 'deep', value: nested } },
    ]);
    const answer = await call('/runs/multipart', { method: 'POST', body, type });
    expect(answer.status).toBe(202);
    expect(answer.body).toMatchObject({
      stored: 1,
      refused: [
        { id: broken, reason: expect.stringContaining('key') },
        { id: deep, reason: expect.stringContaining('nested') },
      ],
    });
    expect(await client.readFeedback(odd)).toMatchObject({ key: 'oddkey', comment: 'x\ufffdy' });
    expect(await client.readFeedback(feedbackId)).toMatchObject({ run_id: runId, key: 'thumbs', score: 1 });
    expect(await statsOf(client, runId)).toEqual({ thumbs: { n: 1, avg: 1, stdev: 0, values: {} }, oddkey: { n: 1, avg: null, stdev: null, values: {} } });
  });

  it('given before its run arrives waits for the run, and is then stored on it (not on another tenant’s run of that id)', async () => {
    const client = clientOf(stack.keyA);
    const runId = randomUUID();
    const early = await call('/feedback', { method: 'POST', json: { run_id: runId, key: 'early', score: 1 } });
    expect(early).toMatchObject({ status: 200, body: { run_id: runId, key: 'early', trace_id: null, session_id: null } });
    // Another tenant naming the same run id first: held for that tenant only.
    const squatter = await call('/feedback', { method: 'POST', key: stack.keyB, json: { run_id: runId, key: 'early', score: 0 } });
    expect(squatter.status).toBe(200);
    await expect(client.readFeedback(early.body.id)).rejects.toThrow(/404/);

    const start = new Date().toISOString();
    const posted = await call('/runs', {
      method: 'POST',
      json: { id: runId, name: 'slow', run_type: 'chain', start_time: start, session_name: 'support-bot' },
    });
    expect(posted.status).toBe(202);
    expect(await client.readFeedback(early.body.id)).toMatchObject({ run_id: runId, trace_id: runId, session_id: root.session_id, score: 1 });
    expect(await statsOf(client, runId)).toEqual({ early: { n: 1, avg: 1, stdev: 0, values: {} } });
    await expect(clientOf(stack.keyB).readFeedback(squatter.body.id)).rejects.toThrow(/404/);
  });

  it('filters runs by feedback key and score (alone and paired)', async () => {
    const query = async (filter: string) =>
      (await call('/runs/query', { method: 'POST', json: { session: [root.session_id], filter } })).body.runs.map((r: Json) => r.name).sort();
    await clientOf(stack.keyA).createFeedback(root.id, 'tone', { value: 'curt', score: 0.9, sessionId: root.session_id });
    expect(await query('eq(feedback_key, "tone")')).toEqual(['agent']);
    expect(await query('eq(feedback_key, "correctness")')).toEqual(['agent', 'llm']);
    expect(await query('and(eq(feedback_key, "correctness"), gt(feedback_score, 0.1))')).toEqual(['agent']);
    expect(await query('and(eq(feedback_key, "correctness"), eq(feedback_score, 0))')).toEqual(['llm']);
    expect(await query('gt(feedback_score, 0.8)')).toEqual(['agent', 'late', 'slow']);
    expect(await query('neq(feedback_key, "correctness")')).toEqual(['late', 'slow']);
    // As LangSmith's docs show it: runs whose trace's root got a feedback score, through the client.
    const client = clientOf(stack.keyA);
    const underGoodRoots = await collect(
      client.listRuns({ projectName: 'support-bot', filter: 'eq(name, "llm")', traceFilter: 'and(eq(feedback_key, "tone"), gte(feedback_score, 0.9))' }),
    );
    expect(underGoodRoots.map((r) => r.id)).toEqual([child.id]);
    // The stats come with the runs a query selects.
    const selected = await call('/runs/query', { method: 'POST', json: { id: [root.id], select: ['name', 'feedback_stats'] } });
    expect(selected.body.runs).toEqual([
      { id: root.id, name: 'agent', feedback_stats: { correctness: expect.objectContaining({ n: 1 }), tone: expect.objectContaining({ n: 1, avg: 0.9 }) } },
    ]);
  });

  it('is refused past the per-run quota (429), when a comment is too large or a field unknown (422), saying why', async () => {
    const runId = child.id; // correctness and helpfulness so far: two of four
    for (const key of ['a', 'b']) expect((await call('/feedback', { method: 'POST', json: { run_id: runId, key, score: 1 } })).status).toBe(200);
    const over = await call('/feedback', { method: 'POST', json: { run_id: runId, key: 'c', score: 1 } });
    expect(over).toEqual({ status: 429, body: { detail: `run ${runId} already has 4 feedback, the most one run may have` } });
    const long = await call('/feedback', { method: 'POST', json: { run_id: root.id, key: 'c', comment: 'x'.repeat(70_000) } });
    expect(long.status).toBe(422);
    expect(long.body.detail[0]).toMatchObject({ loc: ['body', 'comment'], msg: 'is longer than 65536 bytes' });
    const unknown = await call('/feedback', { method: 'POST', json: { run_id: root.id, key: 'c', rating: 5 } });
    expect(unknown.status).toBe(422);
    expect(await call('/feedback?run=not-a-run')).toMatchObject({ status: 422, body: { detail: [{ loc: ['query', 'run'], msg: 'must be UUIDs' }] } });
    expect(await call('/feedback/not-a-feedback', { method: 'PATCH', json: { score: 1 } })).toEqual({
      status: 404,
      body: { detail: 'feedback not-a-feedback not found' },
    });
  });
});

describe('another tenant', () => {
  it('cannot give, read, list, change or delete feedback on runs that are not its own (404, nothing changes)', async () => {
    const victim = clientOf(stack.keyA);
    const [mine] = await collect(victim.listFeedback({ runIds: [root.id], feedbackKeys: ['correctness'] }));
    const attacker = clientOf(stack.keyB);
    await expect(attacker.createFeedback(root.id, 'correctness', { score: 0, sessionId: root.session_id })).rejects.toThrow(/404/);
    await expect(attacker.readFeedback(mine!.id)).rejects.toThrow(/404/);
    await expect(attacker.updateFeedback(mine!.id, { score: 0 })).rejects.toThrow(/404/);
    await expect(attacker.deleteFeedback(mine!.id)).rejects.toThrow(/404/);
    expect(await collect(attacker.listFeedback({ runIds: [root.id] }))).toEqual([]);
    // Its own id for someone else's feedback: a conflict would tell the id exists; it is the same 404 for the run.
    const smuggled = randomUUID();
    const { body, type } = multipart([{ name: `feedback.${smuggled}`, value: { id: smuggled, run_id: root.id, trace_id: root.trace_id, key: 'x', score: 0 } }]);
    const answer = await call('/runs/multipart', { method: 'POST', key: stack.keyB, body, type });
    expect(answer.body.refused).toEqual([{ id: smuggled, reason: `feedback: run ${root.id} not found` }]);
    expect(await victim.readFeedback(mine!.id)).toMatchObject({ score: 0.25 });
    expect((await statsOf(victim, root.id))?.correctness).toMatchObject({ n: 1, avg: 0.25 });
  });

  it('nor can a credential bound to another project of the same tenant', async () => {
    const other = await stack.worker.traces.createSession((await stack.gateway.store.verifyApiKey(stack.keyA))!.tenantId, { name: 'elsewhere' });
    let server: RunningServer | undefined;
    try {
      server = await boundCredentialServer(stack, { id: other.id, name: other.name });
      const bound = clientOf(stack.keyA, server.url);
      const [mine] = await collect(clientOf(stack.keyA).listFeedback({ runIds: [root.id], feedbackKeys: ['correctness'] }));
      await expect(bound.createFeedback(root.id, 'correctness', { score: 0, sessionId: root.session_id })).rejects.toThrow(/404/);
      await expect(bound.readFeedback(mine!.id)).rejects.toThrow(/404/);
      await expect(bound.updateFeedback(mine!.id, { score: 0 })).rejects.toThrow(/404/);
      expect(await collect(bound.listFeedback({ runIds: [root.id] }))).toEqual([]);
    } finally {
      await server?.close();
    }
  });
});
